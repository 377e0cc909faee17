/**
 * Rerun of a failed job run (issue #24): a notebook whose second cell fails is
 * rerun after the cause is fixed; the first cell (a side effect: an INSERT) is
 * reused from the parent's journal, not executed again; the rerun is requested
 * by the caller, opens its journal with a `forked` record naming the parent,
 * and both runs show the link. A run that did not fail is not rerun.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { verifyJournal } from '../../../core/journal/verify.ts';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';

const A = '/api/public/v1/admin';
let t: InProcess;
before(async () => {
  t = await inProcessCell();
});
after(async () => {
  await t.close();
});

async function call(method: string, path: string, body?: unknown, token = t.adminKey) {
  return t.request(method, path, { token, ...(body !== undefined ? { body } : {}) });
}

async function ended(runId: string): Promise<any> {
  for (let i = 0; i < 3000; i++) {
    const state = (await t.modules.runs.runs.getRun(runId))?.state ?? '';
    if (['completed', 'failed', 'refused', 'cancelled'].includes(state)) return (await call('GET', `${A}/jobs/runs/${runId}`)).body;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.fail(`run ${runId} did not end`);
}

async function sql(statement: string): Promise<any> {
  const r = await call('POST', `${A}/jobs/runs`, { job_type: 'sql', workspace_id: 'rerun-ws', spec: { sql: statement } });
  assert.equal(r.status, 202, r.text);
  return ended(r.body.run_id);
}

test('rerun of a failed notebook reuses the cells that ran and runs the failed one again', async () => {
  assert.equal((await sql('CREATE TABLE log (n INTEGER)')).state, 'completed');
  const nb = {
    job_type: 'notebook',
    workspace_id: 'rerun-ws',
    spec: {
      cells: [
        { type: 'sql', sql: 'INSERT INTO log (n) VALUES (1)' },
        { type: 'sql', sql: 'SELECT COUNT(*) AS c FROM later' },
      ],
    },
  };
  const first = await call('POST', `${A}/jobs/runs`, nb);
  assert.equal(first.status, 202, first.text);
  const failed = await ended(first.body.run_id);
  assert.equal(failed.state, 'failed');

  // Not yet fixed is still a rerun; a run that did not fail is not.
  const done = await sql('CREATE TABLE later (x INTEGER)');
  const notFailed = await call('POST', `${A}/jobs/runs/${done.run_id}/rerun`);
  assert.equal(notFailed.status, 409, notFailed.text);
  assert.equal(notFailed.body.details.reason, 'run_not_failed');

  const r = await call('POST', `${A}/jobs/runs/${failed.run_id}/rerun`);
  assert.equal(r.status, 201, r.text);
  const rerun = await ended(r.body.run_id);
  assert.equal(rerun.state, 'completed', JSON.stringify(rerun.error));
  assert.deepEqual(rerun.spec, failed.spec, 'the same spec');
  assert.equal(rerun.forked_from.run_id, failed.run_id);
  const parent = (await call('GET', `${A}/jobs/runs/${failed.run_id}`)).body;
  assert.deepEqual(
    parent.forks.map((f: any) => f.run_id),
    [rerun.run_id],
  );
  // The INSERT ran once: the rerun reused the first cell.
  const count = await sql('SELECT COUNT(*) AS c FROM log');
  assert.equal(count.output.results[0].rows[0][0], 1, JSON.stringify(count.output));
  const j = await t.modules.runs.runs.readJournal(rerun.run_id, 0, 1000);
  assert.equal(j[0]!.kind, 'forked');
  assert.ok(j.some((rec) => (rec.data as any)?.reused));
  // It verifies with the public keys alone: its lineage, written before its first claim, carries the drive's graph hash.
  const pub = await t.request('GET', '/.well-known/cell-keys.json');
  const keys = new Map((pub.body.keys as { kid: string; jwk: JsonWebKey }[]).map((k) => [k.kid, k.jwk]));
  assert.deepEqual(await verifyJournal(j, (kid) => keys.get(kid)), { ok: true });
  assert.equal(rerun.graph_hash, j[0]!.graph_hash);

  // The requester is the session's: another principal's rerun is its own.
  const reader = await call('POST', `${A}/api-keys`, { name: 'jobs-writer', scopes: ['system.orchestration.admin.write'] });
  const refused = await call('POST', `${A}/jobs/runs/${failed.run_id}/rerun`, undefined, reader.body.secret);
  assert.equal(refused.status, 403, refused.text);
  assert.equal(refused.body.details.reason, 'missing_permission');
  assert.equal((await call('POST', `${A}/jobs/runs/run_00000000000000000000/rerun`)).status, 404);
});
