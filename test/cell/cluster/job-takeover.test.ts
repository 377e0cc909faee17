/**
 * Job runs follow the same takeover rule as crew runs (two in-process cells
 * on one PostgreSQL store): a compute job whose cell stops while its step
 * runs is taken over by the peer, the step in flight is re-issued once and
 * flagged (`flags.reissued`, `reissued` on its step record), and the journal,
 * written by both cells, verifies against the group's keys. Skipped on the
 * embedded engine.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { verifyJournal } from '../../../core/journal/verify.ts';
import { inProcessCell, TEST_ENGINE, type InProcess } from '../../helpers/inproc.ts';

const RUNS = '/api/public/v1/admin/jobs/runs';

test('a job run whose cell stops mid-step is taken over by a peer; the step is re-issued once and flagged', {
  skip: TEST_ENGINE !== 'postgres',
}, async () => {
  const group = { posture: 'multi-cell' as const, heartbeatMs: 100, leaseMs: 1000 };
  const a = await inProcessCell({ config: { cellId: 'cell-a', ...group } });
  let b: InProcess | null = null;
  try {
    b = await inProcessCell({ clock: a.clock, config: { cellId: 'cell-b', storeUrl: a.core.config.storeUrl!, dataDir: a.dir, ...group } });
    const r = await a.request('POST', RUNS, {
      token: a.adminKey,
      body: {
        job_type: 'compute',
        workspace_id: 'ws1',
        spec: { code: 'const t = Date.now(); while (Date.now() - t < 1500) {} return { ok: 1 };', time_limit_ms: 30_000 },
      },
    });
    assert.equal(r.status, 202, r.text);
    const runId = r.body.run_id as string;
    const deadline = Date.now() + 15_000;
    while (!(await a.rows("SELECT seq FROM journal WHERE run_id = ? AND kind = 'intent'", [runId])).length) {
      assert.ok(Date.now() < deadline, 'the step starts');
      await new Promise((res) => setTimeout(res, 20));
    }
    await a.running.stop();
    let s: any;
    const until = Date.now() + 30_000;
    do {
      s = (await b.request('GET', `${RUNS}/${runId}`, { token: a.adminKey })).body;
      if (s.state === 'completed' || s.state === 'failed') break;
      await new Promise((res) => setTimeout(res, 50));
    } while (Date.now() < until);
    assert.equal(s.state, 'completed', JSON.stringify(s));
    assert.equal(s.coordinator, 'cell-b');
    assert.deepEqual(s.output.result, { ok: 1 });
    assert.equal(s.flags.reissued.length, 1, 'the step in flight was re-issued once');
    const j = (await b.request('GET', `${RUNS}/${runId}/journal`, { token: a.adminKey })).body;
    const call = j.records.find((x: { kind: string }) => x.kind === 'intent').step_id;
    const steps = j.records.filter((x: { kind: string; step_id: string }) => x.kind === 'step' && x.step_id === call);
    assert.equal(steps.length, 1, 'one result for the call');
    assert.equal(steps[0].data.reissued, true);
    assert.equal(s.flags.reissued[0].step_id, steps[0].step_id);
    assert.ok(j.records.some((x: { kind: string; cell_id: string }) => x.kind === 'taken_over' && x.cell_id === 'cell-b'));
    const keys = new Map((await b.modules.iam.iam.groupIdentityKeys()).map((k) => [k.kid, k.jwk]));
    assert.deepEqual(await verifyJournal(j.records, (kid) => keys.get(kid)), { ok: true });
    assert.deepEqual([...new Set(j.records.map((x: { cell_id: string }) => x.cell_id))], ['cell-a', 'cell-b']);
  } finally {
    await b?.close();
    await a.close();
  }
});
