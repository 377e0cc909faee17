/**
 * The PostgreSQL server of a group crashes and recovers (`pg_ctl restart -m
 * immediate`) while runs are in flight on three real cell processes and
 * writers mint keys on every cell:
 * - every run completes, on whichever cell, and its journal (no duplicate
 *   seq) verifies against the group's published keys;
 * - every write acknowledged with a 2xx is there after the crash;
 * - a request refused meanwhile gets the spec's envelope (503
 *   `service_unavailable`), never a 500 or internal text.
 * The server is this file's own (fsync on). Needs `node scripts/build.mjs`;
 * runs in the PostgreSQL pass of `make test` (CELL_TEST_STORE=postgres).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { JournalRecord } from '../../../core/journal/record.ts';
import { verifyJournal } from '../../../core/journal/verify.ts';
import { startOpenAIServer, type FakeOpenAI } from '../../fixtures/openai-server.ts';
import { startCellProcess, type CellProcess } from '../../helpers/cell-process.ts';
import { call, type Reply } from '../../helpers/group.ts';
import { TEST_ENGINE } from '../../helpers/inproc.ts';
import { adminQuery, pgDatabase, pgUnavailable, startPgServer, type PgDatabase, type PgServer } from '../../helpers/postgres.ts';
import { provider, team, T, type Api } from '../../helpers/teams.ts';

const SKIP = TEST_ENGINE !== 'postgres' ? 'needs PostgreSQL (CELL_TEST_STORE=postgres)' : (pgUnavailable() ?? false);
// The writers and the polling all come from 127.0.0.1: a gateway budget they do not exhaust.
const GROUP_ARGS = [
  '--posture',
  'multi-cell',
  '--heartbeat-ms',
  '200',
  '--lease-ms',
  '1500',
  '--rate-capacity',
  '100000',
  '--rate-refill',
  '10000',
];
const RUNS_PER_CELL = 2;
const STEPS = 4;

function httpApi(base: string, token: string): Api {
  return { token, request: (method, path, opts = {}) => call(base, method, path, { token: opts.token ?? token, body: opts.body }) };
}

async function until<T>(what: string, fn: () => Promise<T | undefined | null | false>, ms: number): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

let server: PgServer;
let db: PgDatabase;
let ai: FakeOpenAI;
const cells: CellProcess[] = [];
let keyDir = '';

before(async () => {
  if (SKIP) return;
  server = await startPgServer({ durable: true });
  db = await pgDatabase(server.url);
  // Each model answer takes a moment, so the runs are still in flight when the server crashes.
  ai = await startOpenAIServer({
    apiKey: 'sk-fake',
    respond: () => ({ content: 'ok', delayMs: 150, usage: { prompt_tokens: 3, completion_tokens: 2 } }),
  });
  // One secrets key for the group, as docs/multi-cell.md tells operators to give every cell.
  keyDir = mkdtempSync(join(tmpdir(), 'group-key-'));
  writeFileSync(join(keyDir, 'secrets.key'), randomBytes(32), { mode: 0o600 });
  const shared = ['--secrets-key-file', join(keyDir, 'secrets.key'), ...GROUP_ARGS];
  cells.push(await startCellProcess({ args: ['--store', db.url, '--cell-id', 'cell-a', ...shared] }));
  for (const id of ['cell-b', 'cell-c']) cells.push(await startCellProcess({ args: ['--store', db.url, '--cell-id', id, ...shared] }));
});

after(async () => {
  if (SKIP) return;
  for (const c of cells) {
    await c.kill('SIGKILL');
    c.cleanup();
  }
  await ai?.close();
  await db?.drop().catch(() => undefined);
  await server?.stop();
  if (keyDir) rmSync(keyDir, { recursive: true, force: true });
});

/** Writers minting keys on every cell until stopped: the ids answered 201, and every other answer. */
function writers(token: string) {
  const acked: string[] = [];
  const refused: Reply[] = [];
  let stop = false;
  const done = Promise.all(
    cells.flatMap((c, i) =>
      [0, 1].map(async (w) => {
        for (let n = 0; !stop; n++) {
          try {
            const r = await call(c.url, 'POST', '/api/public/v1/admin/api-keys', { token, body: { name: `w${i}-${w}-${n}` } });
            if (r.status === 201) acked.push(String(r.body.key_id));
            else refused.push(r);
          } catch (e) {
            refused.push({ status: 0, body: undefined, text: String(e), headers: {} });
          }
          if (refused.length > 0 && !stop) await new Promise((r) => setTimeout(r, 20));
        }
      }),
    ),
  );
  return {
    acked,
    refused,
    stop: async () => {
      stop = true;
      await done;
    },
  };
}

test('pg_ctl restart -m immediate with runs in flight: every run completes, no acknowledged write is lost', {
  skip: SKIP,
  timeout: 240_000,
}, async () => {
  const token = cells[0]!.adminKey;
  const api = httpApi(cells[0]!.url, token);
  await provider(api, ai);
  const seats = Array.from({ length: STEPS }, (_, i) => ({ role: `p${i + 1}` }));
  const tm = await team(api, 'sequential', seats);

  const load = writers(token);
  const runs: { runId: string; cell: CellProcess }[] = [];
  const byId = new Map<string, any>();
  let answeredBefore = 0;
  let restartedAt = 0;
  try {
    for (const c of cells) {
      for (let i = 0; i < RUNS_PER_CELL; i++) {
        const r = await call(c.url, 'POST', `${T}/crews/${tm.crew}/runs`, { token, body: { input: `go ${i}` } });
        assert.equal(r.status, 201, r.text);
        runs.push({ runId: r.body.run_id, cell: c });
      }
    }
    // Some model calls answered, none of the runs finished: the crash lands mid-run.
    await until('the runs to be under way', async () => ai.requests.length >= runs.length, 30_000);
    answeredBefore = ai.requests.length;
    await server.restartImmediate();
    restartedAt = Date.now();

    // Every run completes.
    await until(
      'every run to finish',
      async () => {
        for (const { runId } of runs) {
          if (byId.has(runId)) continue;
          const r = await call(cells[1]!.url, 'GET', `${T}/crews/${tm.crew}/runs/${runId}`, { token });
          if (r.status === 200 && ['completed', 'failed', 'refused', 'cancelled'].includes(r.body.state)) byId.set(runId, r.body);
        }
        return byId.size === runs.length;
      },
      120_000,
    );
  } catch (e) {
    // What the runs and the cells say, for the failure message.
    const states: string[] = [];
    for (const { runId } of runs) {
      const r = await call(cells[1]!.url, 'GET', `${T}/crews/${tm.crew}/runs/${runId}`, { token }).catch(
        (x: unknown) => ({ text: String(x) }) as Reply,
      );
      states.push(`${runId}: ${r.body?.state} coordinator=${r.body?.coordinator} error=${JSON.stringify(r.body?.error)}`);
    }
    const logs = cells
      .map((c) =>
        c
          .output()
          .split('\n')
          .filter((l) => /warn|error/i.test(l))
          .slice(-8)
          .join('\n'),
      )
      .join('\n---\n');
    throw new Error(`${(e as Error).message}\n${states.join('\n')}\n--- cell warnings\n${logs}`);
  } finally {
    await load.stop();
  }
  const finishedMs = Date.now() - restartedAt;
  for (const { runId } of runs) {
    const r = byId.get(runId);
    assert.equal(r.state, 'completed', `${runId}: ${JSON.stringify({ state: r.state, error: r.error, flags: r.flags })}`);
  }
  assert.ok(answeredBefore < runs.length * STEPS, 'the crash came before the runs had made all their calls');

  // Each journal: contiguous seqs, no duplicate, every signature against the group's keys.
  const doc = (await (await fetch(`${cells[2]!.url}/.well-known/cell-keys.json`)).json()) as { keys: { kid: string; jwk: JsonWebKey }[] };
  const keys = new Map(doc.keys.map((k) => [k.kid, k.jwk]));
  for (const { runId } of runs) {
    const j = await call(cells[2]!.url, 'GET', `/api/public/v1/admin/jobs/runs/${runId}/journal`, { token });
    assert.equal(j.status, 200, j.text);
    const records = j.body.records as JournalRecord[];
    assert.deepEqual(
      records.map((r) => r.seq),
      records.map((_, i) => i + 1),
      runId,
    );
    assert.deepEqual(await verifyJournal(records, (kid) => keys.get(kid)), { ok: true }, runId);
    assert.equal(records.at(-1)!.kind, 'run_finished');
  }

  // Nothing acknowledged is lost; every refusal is the envelope.
  const rows = await adminQuery(db.url, 'SELECT id FROM api_keys');
  const present = new Set(rows.rows.map((x: { id: string }) => x.id));
  const missing = load.acked.filter((id) => !present.has(id));
  assert.deepEqual(missing, [], `${missing.length} of ${load.acked.length} acknowledged keys lost`);
  const bad = load.refused.filter((r) => r.status !== 503 || r.body?.error !== 'service_unavailable');
  assert.deepEqual(
    bad.slice(0, 3).map((r) => `${r.status} ${r.text.slice(0, 200)}`),
    [],
    'refusals while the server was down are 503 service_unavailable',
  );
  for (const r of load.refused) assert.doesNotMatch(r.text, /ECONNREFUSED|postgres|pg_|socket/i, 'no internal text');
  console.log(
    `# pg restart: ${runs.length} runs completed ${finishedMs} ms after the restart; ${load.acked.length} keys acknowledged, ${load.refused.length} refused (503) meanwhile`,
  );
});
