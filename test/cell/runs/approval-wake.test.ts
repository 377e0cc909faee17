// A decision recorded while this process drives the run (woken by an earlier
// decision) must not be lost. The drive may have read the decisions before the
// new one was committed; the new decision's caller is told not to wake the run
// (it is driven), so the drive itself must look again before it leaves the run
// waiting. Before the fix the run stayed waiting until its approval timed out
// (seen on PostgreSQL in agent-approvals.test.ts: a rejection never refused the run).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ApprovalsPort, Graph } from '../../../core/engine/types.ts';
import { inProcessCell } from '../../helpers/inproc.ts';

const REQUESTER = 'usr_requester';

/** human_approval (two principals), then a transform: the smallest graph that waits on decisions. */
const graph: Graph = {
  v: 1,
  formation_hash: 'sha256:' + '1'.repeat(64),
  policy: 'sequential',
  entry: 'h',
  exit: 'done',
  nodes: [
    { id: 'h', kind: 'human_approval', config: { rule: 'two_person', timeout_ms: 3_600_000 } },
    { id: 'done', kind: 'transform', config: { expr: '"shipped"' } },
  ],
  edges: [{ from: 'h', to: 'done' }],
  seats: {},
  limits: { max_steps: 100, max_steps_per_seat: 100, max_tool_rounds: 1, default_max_tokens: 100 },
  placement: { clearance: 0, topology: {} },
};

test('a decision recorded while the run is driven makes that drive look again: the run does not stay waiting', async () => {
  const t = await inProcessCell();
  try {
    const runs = t.modules.runs.runs;
    const runId = await t.core.store.write((tx) =>
      runs.createRunTx(tx, { kind: 'job', job_type: 'agent', requester: REQUESTER, spec: {}, at: t.clock.now() }),
    );
    // The run's approvals port, except that once `hold` is set the next read of the decisions
    // is answered only when released: the drive has read them, and waits with that answer.
    const real = runs.approvalsPort(runId);
    let hold: { read: () => void; release: Promise<void> } | null = null;
    const approvals: ApprovalsPort = {
      async decisions(stepId) {
        const answer = await real.decisions(stepId);
        const h = hold;
        hold = null;
        if (h) {
          h.read();
          await h.release;
        }
        return answer;
      },
      request: (stepId, ask) => real.request!(stepId, ask),
    };
    const drive = () => runs.driveRun(runId, graph, { approvals }, 'x', { requester: REQUESTER });

    assert.equal((await drive()).state, 'waiting', 'no decision yet');
    const run = async () => (await runs.getRun(runId))!;
    assert.equal(
      await runs.recordApproval({ principal: 'usr_one' }, await run(), 'h', 'approve', undefined, 'jobs.run.approval'),
      true,
      'waiting, not driven: the caller wakes it',
    );

    // The caller wakes the run; its drive reads the one decision and is held there.
    let read!: () => void;
    const wasRead = new Promise<void>((r) => {
      read = r;
    });
    let release!: () => void;
    hold = {
      read,
      release: new Promise<void>((r) => {
        release = r;
      }),
    };
    const second = drive();
    await wasRead;
    assert.equal(runs.isDriven(runId), true);
    // The second decision arrives now: the run is driven, so its caller does not wake it.
    assert.equal(await runs.recordApproval({ principal: 'usr_two' }, await run(), 'h', 'approve', undefined, 'jobs.run.approval'), false);
    release();
    const r = await second;
    assert.equal(r.state, 'completed', 'the drive looked again and saw the second decision');
    assert.equal(r.result?.output, 'shipped');
    assert.equal((await run()).state, 'completed');
    assert.equal(runs.isDriven(runId), false);
  } finally {
    await t.close();
  }
});
