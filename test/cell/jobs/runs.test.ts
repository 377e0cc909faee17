import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { inProcessCell, TEST_ENGINE, type InProcess } from '../../helpers/inproc.ts';

const SQLITE_ONLY =
  TEST_ENGINE === 'postgres'
    ? 'SQLite dialect and files: on PostgreSQL a workspace database is a schema (test/cell/jobs/sql-workspaces.test.ts)'
    : false;
import { waitFinished } from './_wait.ts';
import { verifyJournal } from '../../../core/journal/verify.ts';

let t: InProcess;
before(async () => {
  t = await inProcessCell();
});
after(async () => {
  await t.close();
});

const RUNS = '/api/public/v1/admin/jobs/runs';

// The wait outlasts every time cap the runs below set (30 s at most), with room for a loaded machine:
// a run that should end by its own cap ends, however slowly, and its reason is what is asserted.
async function run(job_type: string, spec: unknown, workspace_id = 'ws1') {
  const r = await t.request('POST', RUNS, { token: t.adminKey, body: { job_type, workspace_id, spec } });
  assert.equal(r.status, 202, r.text);
  await waitFinished(t.modules.runs.runs, r.body.run_id, 120_000);
  const s = await t.request('GET', `${RUNS}/${r.body.run_id}`, { token: t.adminKey });
  assert.equal(s.status, 200);
  return s.body;
}

test('compute runs in QuickJS and returns its output; journal verifies', async () => {
  const s = await run('compute', { code: 'console.log("n", input.n); return { doubled: input.n * 2 };', input: { n: 21 } });
  assert.equal(s.state, 'completed', JSON.stringify(s));
  assert.deepEqual(s.output.result, { doubled: 42 });
  assert.deepEqual(s.output.logs, ['n 21']);
  assert.equal(s.checked_cell_id, 'cell-test');
  assert.equal(s.kind, 'job');
  const j = await t.request('GET', `${RUNS}/${s.run_id}/journal`, { token: t.adminKey });
  assert.equal(j.status, 200);
  assert.equal(j.body.finished, true);
  const kinds = j.body.records.map((r: { kind: string }) => r.kind);
  assert.equal(kinds[0], 'run_started');
  assert.equal(kinds.at(-1), 'run_finished');
  assert.ok(kinds.includes('step'));
  const keys = new Map(t.modules.iam.iam.identityKeys().map((k) => [k.kid, k.jwk]));
  assert.deepEqual(await verifyJournal(j.body.records, (kid) => keys.get(kid)), { ok: true });
});

test('compute: an endless loop is stopped by the time cap; the run fails with a clear error', async () => {
  const s = await run('compute', { code: 'for (;;) {}', time_limit_ms: 300 });
  assert.equal(s.state, 'failed');
  assert.equal(s.error.reason, 'time_limit');
  assert.match(s.error.message, /time cap/);
});

test('compute: too much memory fails with memory_limit; host access is refused', async () => {
  // One allocation past the cap, and many small ones up to it. (A program of many mid-sized strings reaches the
  // cap too, but QuickJS collects garbage at nearly every allocation near it: ~15 s on this machine. See docs/jobs.md.)
  for (const code of ['let s = "x"; for (;;) s = s + s;', 'const a = []; for (;;) a.push(new ArrayBuffer(256 * 1024));']) {
    const m = await run('compute', { code, memory_limit_bytes: 4 * 1024 * 1024, time_limit_ms: 30_000 });
    assert.equal(m.state, 'failed', code);
    assert.equal(m.error.reason, 'memory_limit', code);
  }
  const h = await run('compute', { code: 'return require("fs").readFileSync("/etc/passwd", "utf8");' });
  assert.equal(h.state, 'failed');
  assert.equal(h.error.reason, 'script_error');
  assert.match(h.error.message, /require/);
  const g = await run('compute', { code: 'return [typeof process, typeof fetch, typeof setTimeout, typeof globalThis.require];' });
  assert.deepEqual(g.output.result, ['undefined', 'undefined', 'undefined', 'undefined']);
});

test('sql: parameters, a row cap, durability across statements, and a time cap', { skip: SQLITE_ONLY }, async () => {
  const a = await run('sql', {
    statements: [
      { sql: 'CREATE TABLE t (x INTEGER, y TEXT)' },
      { sql: 'INSERT INTO t VALUES (?, ?), (?, ?), (?, ?)', params: [1, 'a', 2, 'b', 3, 'c'] },
    ],
  });
  assert.equal(a.state, 'completed', JSON.stringify(a));
  const b = await run('sql', { sql: 'SELECT x, y FROM t WHERE x >= :min ORDER BY x', params: { min: 1 }, row_limit: 2 });
  assert.equal(b.state, 'completed');
  assert.deepEqual(b.output.results[0].rows, [
    [1, 'a'],
    [2, 'b'],
  ]);
  assert.equal(b.output.results[0].truncated, true);
  const other = await run('sql', { sql: 'SELECT count(*) FROM t' }, 'ws2');
  assert.equal(other.state, 'failed', 'each workspace has its own database');
  assert.match(other.error.message, /no such table/);
  const slow = await run('sql', {
    sql: 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c',
    time_limit_ms: 300,
  });
  assert.equal(slow.state, 'failed');
  assert.equal(slow.error.reason, 'time_limit');
  const atomic = await run('sql', { statements: [{ sql: 'INSERT INTO t VALUES (4, "d")' }, { sql: 'SELECT nope FROM t' }] });
  assert.equal(atomic.state, 'failed');
  const c = await run('sql', { sql: 'SELECT count(*) FROM t' });
  assert.deepEqual(c.output.results[0].rows, [[3]], 'a failed job commits nothing');
});

test('notebook: cells run in order, each a journal step; compute sees earlier outputs', async () => {
  const s = await run(
    'notebook',
    {
      input: { k: 10 },
      cells: [
        { type: 'markdown', source: '# Title' },
        { type: 'sql', sql: 'SELECT 5 AS five' },
        { type: 'compute', code: 'return input.input.k + input.cells[1].results[0].rows[0][0];' },
      ],
    },
    'ws3',
  );
  assert.equal(s.state, 'completed', JSON.stringify(s));
  assert.equal(s.output.cells.length, 3);
  assert.equal(s.output.cells[0].type, 'markdown');
  assert.equal(s.output.cells[2].result, 15);
  const j = await t.request('GET', `${RUNS}/${s.run_id}/journal`, { token: t.adminKey });
  const steps = j.body.records
    .filter((r: { kind: string; step_id: string }) => r.kind === 'step' && /^cell-\d$/.test(r.step_id))
    .map((r: { step_id: string }) => r.step_id);
  assert.deepEqual(steps, ['cell-0', 'cell-1', 'cell-2']);
});

test('single: one catalog tool, once', async () => {
  const s = await run('single', { tool: 'calc', args: { expression: '6 * 7' } });
  assert.equal(s.state, 'completed', JSON.stringify(s));
  assert.equal(JSON.stringify(s.output).includes('42'), true);
  const bad = await t.request('POST', RUNS, {
    token: t.adminKey,
    body: { job_type: 'single', workspace_id: 'w', spec: { tool: 'no.such.tool' } },
  });
  assert.equal(bad.status, 400);
});
