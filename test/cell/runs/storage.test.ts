// Security review, finding 5: job output had no effective size cap (sql results and
// compute logs were stored whole), and a few runs pushed the store past 2 GiB.
// Everything a run stores is metered (cell/runs/storage.ts): a cap per run, a
// quota per workspace (its runs and its SQL database file) and one for the cell.
// Refused payloads are not written; SQL rows and compute logs are truncated
// with a marker instead.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { CellConfig } from '../../../cell/config.ts';
import { LOGS_MAX_BYTES } from '../../../cell/jobs/sandbox/compute.ts';
import { workspaceDbPath } from '../../../cell/jobs/steps.ts';
import { runStorageBytes } from '../../../cell/runs/repository.ts';
import { inProcessCell, TEST_ENGINE, type InProcess } from '../../helpers/inproc.ts';

const SQLITE_ONLY =
  TEST_ENGINE === 'postgres'
    ? 'SQLite dialect and files: on PostgreSQL a workspace database is a schema (test/cell/jobs/sql-workspaces.test.ts)'
    : false;
import { T, crewFixture, ok, team } from '../../helpers/teams.ts';

const RUNS = '/api/public/v1/admin/jobs/runs';
const KiB = 1024;
const MiB = 1024 * KiB;

async function submit(t: InProcess, job_type: string, spec: unknown, workspace_id: string) {
  return t.request('POST', RUNS, { token: t.adminKey, body: { job_type, workspace_id, spec } });
}

/** Waits (bounded) until the run's journal holds its run_finished record, through the run's events. */
async function waitFinished(t: InProcess, runId: string, timeoutMs = 30_000): Promise<void> {
  let done!: () => void;
  const finished = new Promise<void>((resolve) => {
    done = resolve;
  });
  const unsub = await t.modules.runs.runs.subscribe(runId, 0, (r) => {
    if (r.kind === 'run_finished') done();
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      finished,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`run ${runId} did not finish in ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
  } finally {
    clearTimeout(timer);
    unsub();
  }
}

async function runToEnd(t: InProcess, job_type: string, spec: unknown, workspace_id = 'ws') {
  const r = await submit(t, job_type, spec, workspace_id);
  assert.equal(r.status, 202, r.text);
  await waitFinished(t, r.body.run_id);
  return (await t.request('GET', `${RUNS}/${r.body.run_id}`, { token: t.adminKey })).body;
}

const runBytes = async (t: InProcess, runId: string) => (await runStorageBytes(t.core.store, runId)) ?? 0;
const biggestBlob = async (t: InProcess) => Number((await t.row('SELECT max(length(body)) AS n FROM journal_blobs'))?.['n'] ?? 0);
const runCount = async (t: InProcess) => Number((await t.row('SELECT COUNT(*) AS n FROM runs'))!['n']);
/** Bytes the store takes: the embedded engine's files on disk, or the PostgreSQL database's size. */
const storeBytes = async (t: InProcess) =>
  t.engine === 'postgres'
    ? Number((await t.row('SELECT pg_database_size(current_database()) AS n'))!['n'])
    : dirBytes(join(t.dir, 'store'));
const bytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v), 'utf8');

function dirBytes(dir: string): number {
  let n = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    n += e.isDirectory() ? dirBytes(p) : statSync(p).size;
  }
  return n;
}

test('default cap (1 MiB): a compute run storing more fails run_storage_cap and its output is not written; logs and SQL rows are truncated with a marker', {
  skip: SQLITE_ONLY,
}, async () => {
  const t = await inProcessCell();
  try {
    // 1,040,000 bytes of output (under output_limit_bytes) plus 64 KiB of logs: past the 1 MiB cap.
    const big = await runToEnd(t, 'compute', {
      code: 'for (let i = 0; i < 100; i++) console.log("\\u0000".repeat(1000)); return "x".repeat(1040000);',
      output_limit_bytes: MiB,
      time_limit_ms: 30_000,
    });
    assert.equal(big.state, 'failed', JSON.stringify(big).slice(0, 300));
    assert.equal(big.error.reason, 'run_storage_cap');
    assert.equal(big.error.details.limit_bytes, MiB);
    assert.equal(big.output, null);
    assert.ok((await biggestBlob(t)) < 100 * KiB, 'the refused output was not written to the journal');
    assert.ok((await runBytes(t, big.run_id)) <= MiB, 'the run stored no more than its cap');

    // Logs: 100 lines that take 6000 bytes each as JSON, and 50 more past the line cap.
    const logs = await runToEnd(t, 'compute', { code: 'for (let i = 0; i < 150; i++) console.log("\\u0001".repeat(1000)); return 1;' });
    assert.equal(logs.state, 'completed');
    assert.ok(bytes(logs.output.logs) <= LOGS_MAX_BYTES, `logs kept: ${bytes(logs.output.logs)} bytes`);
    assert.match(logs.output.logs.at(-1), /^\[logs truncated: \d+ of 150 lines not kept/);

    // SQL: 5,000 rows of 1 KB each are ~5 MB; the result keeps what fits the run's room, and says so.
    const sql = await runToEnd(t, 'sql', {
      sql: 'WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 5000) SELECT n, hex(randomblob(500)) FROM c',
      row_limit: 100_000,
      time_limit_ms: 30_000,
    });
    assert.equal(sql.state, 'completed', JSON.stringify(sql.error));
    const res = sql.output.results[0];
    assert.equal(res.truncated, true);
    assert.equal(res.truncated_by, 'byte_limit');
    assert.ok(res.rows.length > 100 && res.rows.length < 5000, `${res.rows.length} rows kept`);
    const sqlBytes = await runBytes(t, sql.run_id);
    assert.ok(sqlBytes <= MiB, `the sql run stored ${sqlBytes} bytes`);
    const rows = await runToEnd(t, 'sql', { sql: 'SELECT 1 UNION ALL SELECT 2', row_limit: 1 });
    assert.equal(rows.output.results[0].truncated_by, 'row_limit');
  } finally {
    await t.close();
  }
});

test('the store stays bounded: 60 runs across 6 workspaces each try to store large outputs; quotas refuse the rest with 409 and nothing is written', {
  skip: SQLITE_ONLY,
}, async () => {
  const config: Partial<CellConfig> = { runStorageCapBytes: 64 * KiB, workspaceQuotaBytes: 256 * KiB, runStorageQuotaBytes: 768 * KiB };
  const t = await inProcessCell({ config });
  try {
    const storeBefore = await storeBytes(t);
    const outcomes = new Map<string, number>();
    const note = (k: string) => outcomes.set(k, (outcomes.get(k) ?? 0) + 1);
    for (let i = 0; i < 60; i++) {
      const ws = `ws-${Math.floor(i / 10)}`;
      // Alternately a 200 KB output (over the run cap), a 25 KB one (fits, kept twice), and a 3 MB SQL result.
      const [type, spec] =
        i % 3 === 0
          ? ['compute', { code: 'return "a".repeat(200000);', output_limit_bytes: MiB }]
          : i % 3 === 1
            ? ['compute', { code: `return "b".repeat(25000) + ${i};`, output_limit_bytes: MiB }]
            : [
                'sql',
                {
                  sql: 'WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 3000) SELECT hex(randomblob(500)) FROM c',
                  row_limit: 100_000,
                  time_limit_ms: 30_000,
                },
              ];
      const runsBefore = await runCount(t);
      const r = await submit(t, type, spec, ws);
      if (r.status === 409) {
        assert.ok(['workspace_quota', 'cell_storage_quota'].includes(r.body.details.reason), r.text);
        assert.equal(await runCount(t), runsBefore, 'a refused submit writes nothing');
        note(`409 ${r.body.details.reason}`);
        continue;
      }
      assert.equal(r.status, 202, r.text);
      await waitFinished(t, r.body.run_id);
      const run = (await t.request('GET', `${RUNS}/${r.body.run_id}`, { token: t.adminKey })).body;
      note(`${run.state} ${run.error?.reason ?? run.output?.results?.[0]?.truncated_by ?? ''}`.trim());
      const stored = await runBytes(t, run.run_id);
      assert.ok(stored <= 64 * KiB + 4 * KiB, `run ${i} stored ${stored} bytes`);
    }
    const seen = [...outcomes.keys()];
    for (const expected of [
      'failed run_storage_cap',
      'completed',
      'completed byte_limit',
      'failed workspace_quota',
      '409 cell_storage_quota',
    ]) {
      assert.ok(seen.includes(expected), `${expected} among ${JSON.stringify(Object.fromEntries(outcomes))}`);
    }
    // Bounds: each workspace and the cell, as metered, and the store's files on disk.
    for (let w = 0; w < 6; w++) {
      const u = await t.modules.runs.runs.workspaceUsage(`ws-${w}`);
      assert.ok(u.run_bytes + u.file_bytes <= 256 * KiB + 8 * KiB, `ws-${w}: ${JSON.stringify(u)}`);
    }
    const cellBytes = await t.modules.runs.runs.cellRunBytes();
    assert.ok(cellBytes <= 768 * KiB + 8 * KiB, `cell: ${cellBytes}`);
    assert.ok((await biggestBlob(t)) <= 64 * KiB, 'no payload above the run cap was ever stored');
    const grown = (await storeBytes(t)) - storeBefore;
    // Embedded: the store's log holds every committed transaction (no checkpoint ran): what runs keep plus
    // the runs' own rows and the log's framing. PostgreSQL: the database's tables and indexes, dead row
    // versions included. Unmetered, these runs alone would have written > 60 MB.
    assert.ok(grown < 6 * MiB, `the store grew ${grown} bytes`);
  } finally {
    await t.close();
  }
});

test('a full workspace refuses new runs at submit: 409 workspace_quota, nothing written; other workspaces still run', async () => {
  const t = await inProcessCell({ config: { workspaceQuotaBytes: 48 * KiB } });
  try {
    let refused: { status: number; body: any } | undefined;
    for (let i = 0; i < 40 && !refused; i++) {
      const r = await submit(t, 'compute', { code: `return "z".repeat(6000) + ${i};` }, 'ws-small');
      if (r.status === 409) {
        refused = r;
        break;
      }
      assert.equal(r.status, 202, r.text);
      await waitFinished(t, r.body.run_id);
    }
    assert.ok(refused, 'the workspace filled up');
    assert.equal(refused.body.error, 'conflict');
    assert.equal(refused.body.details.reason, 'workspace_quota');
    assert.equal(refused.body.details.quota_bytes, 48 * KiB);
    const before = await runCount(t);
    assert.equal((await submit(t, 'sql', { sql: 'SELECT 1' }, 'ws-small')).status, 409);
    assert.equal(await runCount(t), before, 'nothing written');
    const u = await t.modules.runs.runs.workspaceUsage('ws-small');
    assert.ok(u.run_bytes + u.file_bytes <= 48 * KiB, JSON.stringify(u));
    assert.equal((await runToEnd(t, 'compute', { code: 'return 1' }, 'ws-other')).state, 'completed');

    // A schedule into the full workspace: its fire is refused and creates no run.
    const def = await t.request('POST', '/api/public/v1/admin/jobs/definitions', {
      token: t.adminKey,
      body: { name: 'into full', job_type: 'compute', workspace_id: 'ws-small', spec: { code: 'return 1' }, cron: '*/5 * * * *' },
    });
    assert.equal(def.status, 201, def.text);
    t.clock.advance(5 * 60_000);
    assert.equal(await t.modules.jobs.scheduler.tick(), 0);
    assert.equal(await runCount(t), before + 1, 'no run from the fire (one from ws-other)');
    assert.deepEqual(await t.row('SELECT state, detail FROM job_fires WHERE schedule_id = ?', [def.body.schedule_id]), {
      state: 'refused',
      detail: 'workspace_quota',
    });
    assert.equal(
      (await t.request('GET', `/api/public/v1/admin/jobs/definitions/${def.body.schedule_id}`, { token: t.adminKey })).body.enabled,
      true,
      'the definition stays enabled',
    );
  } finally {
    await t.close();
  }
});

test("a run's spec counts: one larger than the run cap is 400 run_storage_cap at submit, nothing written; a fitting one is counted", async () => {
  const t = await inProcessCell({ config: { runStorageCapBytes: 64 * KiB } });
  try {
    const before = await runCount(t);
    const big = await submit(t, 'compute', { code: 'return input.length', input: 'i'.repeat(100_000) }, 'ws');
    assert.equal(big.status, 400, big.text);
    assert.equal(big.body.details.reason, 'run_storage_cap');
    assert.equal(await runCount(t), before, 'nothing written');
    // Just under the cap at submit, past it once the run's records are added: the run fails, its output unwritten.
    const edge = await runToEnd(t, 'compute', { code: 'return input', input: 'e'.repeat(40_000) });
    assert.equal(edge.state, 'failed');
    assert.equal(edge.error.reason, 'run_storage_cap');
    const small = await runToEnd(t, 'compute', { code: 'return input.length', input: 'i'.repeat(20_000) });
    assert.equal(small.state, 'completed');
    const smallBytes = await runBytes(t, small.run_id);
    assert.ok(smallBytes > 20_000, `spec counted: ${smallBytes}`);
  } finally {
    await t.close();
  }
});

test('the workspace SQL database counts: a job that would grow it past the quota fails workspace_quota and leaves the file as it was', {
  skip: SQLITE_ONLY,
}, async () => {
  const t = await inProcessCell({ config: { workspaceQuotaBytes: 512 * KiB } });
  try {
    const made = await runToEnd(
      t,
      'sql',
      { statements: [{ sql: 'CREATE TABLE t (b BLOB)' }, { sql: 'INSERT INTO t VALUES (randomblob(1000))' }] },
      'ws-db',
    );
    assert.equal(made.state, 'completed', JSON.stringify(made.error));
    const file = workspaceDbPath(t.core.config.dataDir, 'ws-db');
    const size = statSync(file).size;
    const grow = await runToEnd(
      t,
      'sql',
      {
        sql: 'WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 2000) INSERT INTO t SELECT randomblob(1000) FROM c',
        time_limit_ms: 30_000,
      },
      'ws-db',
    );
    assert.equal(grow.state, 'failed');
    assert.equal(grow.error.reason, 'workspace_quota', JSON.stringify(grow.error));
    assert.equal(statSync(file).size, size, 'the file is unchanged');
    const count = await runToEnd(t, 'sql', { sql: 'SELECT count(*) FROM t' }, 'ws-db');
    assert.deepEqual(count.output.results[0].rows, [[1]], 'nothing of the failed job was committed');
    assert.ok(existsSync(file));
    const u = await t.modules.runs.runs.workspaceUsage('ws-db');
    assert.ok(u.file_bytes + u.run_bytes <= 512 * KiB, JSON.stringify(u));
  } finally {
    await t.close();
  }
});

test('crew runs are metered too: a model answer past the run cap fails the run run_storage_cap and is not stored', async () => {
  const { t, ai, api } = await crewFixture({ runStorageCapBytes: 256 * KiB });
  try {
    const tm = await team(api, 'sequential', [{ role: 'talker' }]);
    ai.setResponder(() => ({ content: 'y'.repeat(600 * KiB) }));
    const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'go' });
    await t.modules.teams.teams.settled(run.run_id);
    const s = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`);
    assert.equal(s.state, 'failed', JSON.stringify(s).slice(0, 300));
    assert.equal(s.error.reason, 'run_storage_cap');
    assert.ok((await biggestBlob(t)) < 256 * KiB, 'the answer was not written');
    assert.ok((await runBytes(t, run.run_id)) <= 256 * KiB);
  } finally {
    await t.close();
    await ai.close();
  }
});

test("a crew run whose last answer fits but not with the run's copy of it: failed run_storage_cap, the answer's step kept, no output", async () => {
  const { t, ai, api } = await crewFixture({ runStorageCapBytes: 256 * KiB });
  try {
    const tm = await team(api, 'sequential', [{ role: 'talker' }]);
    // ~150 KiB: the step's record and value fit the cap, but not with the run row's second copy of it as its output.
    ai.setResponder(() => ({ content: 'y'.repeat(150 * KiB) }));
    const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'go' });
    await t.modules.teams.teams.settled(run.run_id);
    const s = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`);
    assert.equal(s.state, 'failed', JSON.stringify(s).slice(0, 300));
    assert.equal(s.error.reason, 'run_storage_cap');
    assert.equal(s.output ?? null, null, 'no output kept');
    const kinds = (await t.modules.runs.runs.readJournal(run.run_id)).map((r) => r.kind);
    assert.ok(kinds.includes('step'), `the answer's step is kept: ${kinds.join(', ')}`);
    assert.equal(kinds.at(-1), 'run_finished');
    assert.ok((await biggestBlob(t)) >= 150 * KiB, 'the answer was written');
    assert.ok((await runBytes(t, run.run_id)) <= 256 * KiB);
  } finally {
    await t.close();
    await ai.close();
  }
});

test("a workspace's SQL file counts as a SQL step leaves it: its size is measured again after each step, not at every append", {
  skip: SQLITE_ONLY,
}, async () => {
  const t = await inProcessCell({ config: { workspaceQuotaBytes: 512 * KiB } });
  try {
    // Measured (and kept) before the workspace has a SQL file.
    assert.equal((await t.modules.runs.runs.workspaceUsage('ws-file')).file_bytes, 0);
    const grow = await runToEnd(
      t,
      'sql',
      {
        statements: [
          { sql: 'CREATE TABLE pad (b BLOB)' },
          {
            sql: 'INSERT INTO pad WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 200) SELECT randomblob(1000) FROM c',
          },
        ],
      },
      'ws-file',
    );
    assert.equal(grow.state, 'completed', JSON.stringify(grow.error));
    const onDisk = statSync(workspaceDbPath(t.core.config.dataDir, 'ws-file')).size;
    assert.ok(onDisk > 200_000, `the file grew: ${onDisk}`);
    assert.equal(
      (await t.modules.runs.runs.workspaceUsage('ws-file')).file_bytes,
      onDisk,
      'the size after the step, not the one kept before it',
    );
  } finally {
    await t.close();
  }
});

test('a crew run into a full workspace: 409 workspace_quota at its POST, and its creating transaction leaves nothing behind', async () => {
  const { t, ai, api } = await crewFixture({ workspaceQuotaBytes: 48 * KiB });
  try {
    const tm = await team(api, 'sequential', [{ role: 'talker' }]);
    const crew = (await ok(api, 'GET', `${T}/crews/${tm.crew}`)) as { workspace_id: string };
    // A first run while there is room: the graph is kept, the path warm.
    const first = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'go' });
    await t.modules.teams.teams.settled(first.run_id);
    for (let i = 0; i < 40; i++) {
      const r = await submit(t, 'compute', { code: `return "z".repeat(6000) + ${i};` }, crew.workspace_id);
      if (r.status === 409) break;
      assert.equal(r.status, 202, r.text);
      await waitFinished(t, r.body.run_id);
    }
    const count = async (sql: string) => Number((await t.row(sql))!['n']);
    const before = {
      runs: await runCount(t),
      journal: await count('SELECT COUNT(*) AS n FROM journal'),
      audit: await count("SELECT COUNT(*) AS n FROM audit WHERE action = 'crew.run'"),
    };
    const refused = await t.request('POST', `${T}/crews/${tm.crew}/runs`, { token: t.adminKey, body: { input: 'go' } });
    assert.equal(refused.status, 409, refused.text);
    assert.equal(refused.body.details.reason, 'workspace_quota');
    assert.deepEqual(
      {
        runs: await runCount(t),
        journal: await count('SELECT COUNT(*) AS n FROM journal'),
        audit: await count("SELECT COUNT(*) AS n FROM audit WHERE action = 'crew.run'"),
      },
      before,
      'no run, no record, no audit entry',
    );
  } finally {
    await t.close();
    await ai.close();
  }
});
