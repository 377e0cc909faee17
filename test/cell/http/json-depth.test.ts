// Security review, finding 11: a JSON body nested thousands of levels deep gave
// 500 internal_error (a stack overflow downstream) on crew runs and job runs and
// could leave a run queued forever. The gateway refuses any body nested deeper
// than 64 levels with 400 invalid_request / too_deep, and nothing is written.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { scanJson } from '../../../runtime/json-body.ts';
import type { FakeOpenAI } from '../../fixtures/openai-server.ts';
import type { InProcess } from '../../helpers/inproc.ts';
import { A, T, crewFixture, ok, team, type Api } from '../../helpers/teams.ts';

let t: InProcess;
let ai: FakeOpenAI;
let api: Api;
let crew: string;
before(async () => {
  ({ t, ai, api } = await crewFixture());
  crew = (await team(api, 'sequential', [{ role: 'solo' }])).crew;
});
after(async () => {
  await t.close();
  await ai.close();
});

const RUNS = `${A}/jobs/runs`;
const arrays = (n: number, inner = '1') => '['.repeat(n) + inner + ']'.repeat(n);
const objects = (n: number) => '{"a":'.repeat(n) + '1' + '}'.repeat(n);

/** The store's tables, from the engine's own catalog. */
const TABLES_SQL = {
  embedded: "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
  postgres:
    "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name",
};

/** Rows of every table: "nothing written" means none of them changed. */
async function rowCounts(t: InProcess): Promise<Record<string, number>> {
  const tables = await t.rows(TABLES_SQL[t.engine]);
  assert.ok(tables.length > 10, "the catalog lists the cell's tables");
  const counts: Record<string, number> = {};
  for (const { name } of tables) counts[String(name)] = Number((await t.row(`SELECT COUNT(*) AS n FROM "${String(name)}"`))!['n']);
  return counts;
}

/** Resolves once a run's journal holds its run_finished record (the runs module's event bus; bounded). */
async function finished(runId: string, timeoutMs = 30_000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  let unsubscribe: (() => void) | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`run ${runId} did not finish in ${timeoutMs} ms`)), timeoutMs);
      t.modules.runs.runs
        .subscribe(runId, 0, (r) => {
          if (r.kind === 'run_finished') resolve();
        })
        .then((u) => {
          unsubscribe = u;
        }, reject);
    });
  } finally {
    clearTimeout(timer);
    unsubscribe?.();
  }
}

async function refusedTooDeep(method: string, path: string, rawBody: string, headers: Record<string, string> = {}): Promise<void> {
  const before = await rowCounts(t);
  const r = await t.request(method, path, { token: t.adminKey, rawBody, headers });
  assert.equal(r.status, 400, `${path}: ${r.text.slice(0, 200)}`);
  assert.equal(r.body.error, 'invalid_request');
  assert.equal(r.body.details.reason, 'too_deep');
  assert.equal(r.body.details.max_depth, 64);
  assert.deepEqual(await rowCounts(t), before, `${path}: nothing written`);
}

test('crew runs: input nested 100, 5000 and 100000 deep is 400 too_deep, no run is recorded', async () => {
  for (const n of [100, 5_000, 100_000]) {
    await refusedTooDeep('POST', `${T}/crews/${crew}/runs`, `{"input": ${arrays(n)}}`);
    await refusedTooDeep('POST', `${T}/crews/${crew}/runs`, `{"input": ${objects(n)}}`);
  }
  assert.equal(Number((await t.row("SELECT COUNT(*) AS n FROM runs WHERE state IN ('queued', 'running')"))!['n']), 0, 'no run left queued');
});

test('job runs: a deep compute input or notebook input is 400 too_deep, no run is recorded', async () => {
  for (const n of [65, 10_000]) {
    await refusedTooDeep('POST', RUNS, `{"job_type":"compute","workspace_id":"w","spec":{"code":"return 1","input":${arrays(n)}}}`);
    await refusedTooDeep(
      'POST',
      RUNS,
      `{"job_type":"notebook","workspace_id":"w","spec":{"cells":[{"type":"markdown","source":"x"}],"input":${objects(n)}}}`,
    );
  }
});

test('every JSON body: a generic admin route, a definition, and a published endpoint fed text/plain', async () => {
  await refusedTooDeep('POST', `${A}/principals`, `{"kind":"service","name":"deep","roles":${arrays(5_000, '"viewer"')}}`);
  await refusedTooDeep(
    'POST',
    `${A}/jobs/definitions`,
    `{"name":"d","job_type":"compute","cron":"0 * * * *","spec":{"code":"return 1","input":${arrays(5_000)}}}`,
  );
  const ep = await ok(api, 'POST', `${A}/jobs/endpoints`, {
    name: 'echo',
    job_type: 'compute',
    spec: { code: 'return input;' },
    mode: 'async',
  });
  // The invoke route parses its body as JSON whatever the content type says.
  await refusedTooDeep('POST', ep.invoke_path, arrays(5_000), { 'content-type': 'text/plain' });
  await refusedTooDeep('POST', ep.invoke_path, arrays(5_000), { 'content-type': 'application/merge-patch+json' });
});

test('the limit is exactly 64 levels; brackets inside strings do not count; the gate order holds', async () => {
  const at64 = await t.request('POST', RUNS, {
    token: t.adminKey,
    rawBody: `{"job_type":"compute","workspace_id":"w","spec":{"code":"return 1","input":${arrays(62)}}}`,
  });
  assert.equal(at64.status, 202, `64 levels (body 1 + spec 1 + input 62) are accepted: ${at64.text}`);
  // The accepted run writes its journal as it runs: let it finish before counting rows.
  await finished(at64.body.run_id);
  await refusedTooDeep('POST', RUNS, `{"job_type":"compute","workspace_id":"w","spec":{"code":"return 1","input":${arrays(63)}}}`);
  const inString = JSON.stringify({
    job_type: 'compute',
    workspace_id: 'w',
    spec: { code: 'return input.length', input: `${arrays(5_000)}\\"{{{{` },
  });
  const s = await t.request('POST', RUNS, { token: t.adminKey, rawBody: inString });
  assert.equal(s.status, 202, `brackets and escaped quotes inside strings are data: ${s.text.slice(0, 200)}`);
  const anon = await t.request('POST', RUNS, { rawBody: `{"spec":${arrays(5_000)}}` });
  assert.equal(anon.status, 401, 'authentication comes first: an anonymous caller learns nothing about the body');
  const form = await t.request('POST', '/oauth/token', {
    rawBody: `grant_type=client_credentials&scope=${'['.repeat(100)}`,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  assert.notEqual(form.body?.details?.reason, 'too_deep', 'form bodies are not JSON');
});

test('scanJson depth: linear scan, strings and escapes skipped, unbalanced input does not go negative', () => {
  const nestedDeeperThan = (text: string, max: number) => scanJson(text, max)?.reason === 'too_deep';
  assert.equal(nestedDeeperThan(arrays(64), 64), false);
  assert.equal(nestedDeeperThan(arrays(65), 64), true);
  assert.equal(nestedDeeperThan(`["${'['.repeat(100)}"]`, 64), false);
  assert.equal(nestedDeeperThan(`["\\"${'['.repeat(100)}"]`, 64), false, 'an escaped quote does not end the string');
  assert.equal(nestedDeeperThan(`["\\\\"${'['.repeat(100)}`, 64), true, 'an escaped backslash does end it');
  assert.equal(nestedDeeperThan(']'.repeat(100) + arrays(65), 64), true, 'closing brackets first do not buy depth');
  const big = arrays(1_000_000);
  const t0 = performance.now();
  assert.equal(nestedDeeperThan(big, 64), true);
  assert.ok(performance.now() - t0 < 1_000, 'stops at the first level past the limit');
});
