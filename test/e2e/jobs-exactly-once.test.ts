/**
 * A SQL job's statements and its effect record commit together: a cell killed
 * right after the job committed, before the step reached the run's journal,
 * drives the run again on restart and the job's rows are not applied twice
 * (the step returns its recorded result). Both engines: a SQLite file on the
 * embedded one, the workspace's schema on PostgreSQL.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CELL_CRASH_AFTER_SQL_EFFECT_BIN, startCellProcess, type CellProcess } from '../helpers/cell-process.ts';

const RUNS = '/api/public/v1/admin/jobs/runs';

async function call(url: string, key: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(url + path, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

async function finished(cell: CellProcess, key: string, runId: string): Promise<any> {
  for (let i = 0; i < 800; i++) {
    const s = (await call(cell.url, key, 'GET', `${RUNS}/${runId}`)).body;
    if (['completed', 'failed', 'cancelled', 'refused'].includes(s.state)) return s;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`run ${runId} did not finish`);
}

test('a SQL job re-driven after a crash between its commit and its journal record does not apply twice', async () => {
  // The shipped program has no fault hook: the variable that once made it kill itself after a SQL effect does nothing.
  let cell = await startCellProcess({ env: { CELL_TEST_CRASH_AFTER_SQL_EFFECT: '1' } });
  const { dataDir, adminKey: key } = cell;
  try {
    const setup = await call(cell.url, key, 'POST', RUNS, {
      job_type: 'sql',
      workspace_id: 'once',
      spec: { sql: 'CREATE TABLE marks (n INTEGER)' },
    });
    assert.equal((await finished(cell, key, setup.body.run_id)).state, 'completed');
    assert.ok(cell.proc.exitCode === null && cell.proc.signalCode === null, 'the shipped cell lives on after the effect');
    await cell.stop();

    // The fault build of the cell (never shipped) kills itself right after the job's transaction committed.
    cell = await startCellProcess({ dataDir, bin: CELL_CRASH_AFTER_SQL_EFFECT_BIN });
    const r = await call(cell.url, key, 'POST', RUNS, {
      job_type: 'sql',
      workspace_id: 'once',
      spec: { statements: [{ sql: 'INSERT INTO marks VALUES (1)' }, { sql: 'SELECT count(*) FROM marks' }] },
    });
    assert.equal(r.status, 202);
    const runId = r.body.run_id as string;
    await new Promise<void>((resolve) => {
      if (cell.proc.exitCode !== null || cell.proc.signalCode !== null) resolve();
      else cell.proc.once('exit', () => resolve());
    });
    assert.equal(cell.proc.signalCode, 'SIGKILL', 'the cell died right after the effect');

    cell = await startCellProcess({ dataDir });
    const run = await finished(cell, key, runId);
    assert.equal(run.state, 'completed', JSON.stringify(run.error));
    assert.equal(run.output.results[0].changes, 1);
    assert.deepEqual(run.output.results[1].rows, [[1]], 'the recorded result of the one execution');
    assert.equal(run.flags.reissued?.length, 1, 'the step in flight was issued again, and said so');
    const j = await call(cell.url, key, 'GET', `${RUNS}/${runId}/journal`);
    assert.equal(j.body.records.filter((x: any) => x.kind === 'step' && x.step_id === 'sql').length, 1);

    const count = await call(cell.url, key, 'POST', RUNS, {
      job_type: 'sql',
      workspace_id: 'once',
      spec: { sql: 'SELECT count(*) FROM marks' },
    });
    const c = await finished(cell, key, count.body.run_id);
    assert.deepEqual(
      c.output.results[0].rows.map((row: unknown[]) => Number(row[0])),
      [1],
      'the insert was applied once',
    );
  } finally {
    await cell.stop();
    cell.cleanup();
  }
});
