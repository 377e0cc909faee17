/**
 * A job run survives SIGKILL of its cell: the restarted cell drives it again,
 * reusing the recorded outputs of completed steps (a notebook's SQL insert is
 * not executed twice) and finishing the rest.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startCellProcess } from '../helpers/cell-process.ts';

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

test('SIGKILL mid-run: the restarted cell finishes the run without re-executing completed steps', async () => {
  let cell = await startCellProcess();
  const dataDir = cell.dataDir;
  const key = cell.adminKey;
  try {
    const setup = await call(cell.url, key, 'POST', RUNS, {
      job_type: 'sql',
      workspace_id: 'rec',
      spec: { sql: 'CREATE TABLE marks (n INTEGER)' },
    });
    for (let i = 0; i < 200; i++) {
      const s = await call(cell.url, key, 'GET', `${RUNS}/${setup.body.run_id}`);
      if (s.body.state === 'completed') break;
      await new Promise((r) => setTimeout(r, 25));
    }
    const r = await call(cell.url, key, 'POST', RUNS, {
      job_type: 'notebook',
      workspace_id: 'rec',
      spec: {
        cells: [
          { type: 'sql', sql: 'INSERT INTO marks VALUES (1)' },
          { type: 'compute', code: 'const t = Date.now(); while (Date.now() - t < 1500) {} return "slow";', time_limit_ms: 10_000 },
          { type: 'sql', sql: 'SELECT count(*) FROM marks' },
        ],
      },
    });
    assert.equal(r.status, 202);
    const runId = r.body.run_id as string;
    // Kill once cell-0 is journaled (the slow compute cell is running).
    let killed = false;
    for (let i = 0; i < 400 && !killed; i++) {
      const j = await call(cell.url, key, 'GET', `${RUNS}/${runId}/journal`);
      if (j.body.records.some((x: any) => x.kind === 'step' && x.step_id === 'cell-0')) {
        await cell.kill('SIGKILL');
        killed = true;
      } else await new Promise((res) => setTimeout(res, 20));
    }
    assert.ok(killed, 'cell-0 was journaled before the kill');

    cell = await startCellProcess({ dataDir });
    let final: any;
    for (let i = 0; i < 600; i++) {
      final = (await call(cell.url, key, 'GET', `${RUNS}/${runId}`)).body;
      if (['completed', 'failed', 'cancelled', 'refused'].includes(final.state)) break;
      await new Promise((res) => setTimeout(res, 25));
    }
    assert.equal(final.state, 'completed', JSON.stringify(final));
    assert.deepEqual(final.output.cells[2].results[0].rows, [[1]], 'the insert of cell-0 ran once');
    assert.equal(final.output.cells[1].result, 'slow');
    const j = await call(cell.url, key, 'GET', `${RUNS}/${runId}/journal`);
    const cell0 = j.body.records.filter((x: any) => x.kind === 'step' && x.step_id === 'cell-0');
    assert.equal(cell0.length, 1);
    assert.deepEqual(
      j.body.records.map((x: any) => x.seq),
      j.body.records.map((_: unknown, i: number) => i + 1),
    );
  } finally {
    await cell.stop();
    cell.cleanup();
  }
});
