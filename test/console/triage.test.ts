// console/src/triage.ts: every way a run ends badly, triaged to its step, against the records and errors
// the cell writes for each (as a real cell wrote them: test/browser/console-triage.test.ts drives the same
// kinds end to end). The timeline draws the step a run failed in until the run's end.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { failingStep, liveRunState, nodeStates, timelineOf, type GraphLike, type RecordLike } from '../../console/src/run-model.ts';
import { triage } from '../../console/src/triage.ts';

let seq = 0;
const rec = (step_id: string, kind: string, at: number, data?: Record<string, unknown>): RecordLike => ({
  seq: ++seq,
  step_id,
  kind,
  at,
  input_hash: 'h',
  output_hash: 'h',
  ...(data ? { data } : {}),
});
const ended = (error: Record<string, unknown>, at: number, outcome = error['code'] === 'refused' ? 'refused' : 'failed') =>
  rec('run/end', 'run_finished', at, { outcome, reason: error['reason'], error });

test('a model error under a retry policy: the step, its seat, 3 attempts of the policy and the provider’s 2 for the last', () => {
  const step = 'agent:b1/model/0';
  const error = {
    code: 'failed',
    reason: 'model_error',
    message: 'the run failed: model_error',
    details: { seat: 'b1', step_id: step, upstream: { reason: 'provider_error', provider_status: 500, attempts: 2 } },
  };
  const records = [
    rec('run', 'run_started', 0),
    rec(step, 'intent', 1, { attempt: 1, call: 'model' }),
    rec(step, 'attempt', 300, { attempt: 1, outcome: 'failed', reason: 'provider_error', retry_at: 300 }),
    rec(step, 'intent', 310, { attempt: 1, call: 'model' }),
    rec(step, 'attempt', 600, { attempt: 2, outcome: 'failed', reason: 'provider_error', retry_at: 600 }),
    rec(step, 'intent', 610, { attempt: 1, call: 'model' }),
    rec(step, 'attempt', 900, { attempt: 3, outcome: 'failed', reason: 'provider_error' }),
    ended(error, 920),
  ];
  const t = triage({ state: 'failed', error }, records)!;
  assert.equal(t.kind, 'model');
  assert.equal(t.step_id, step);
  assert.equal(t.seat, 'b1');
  assert.deepEqual(t.attempts, { n: 3, failed: 3, reasons: ['provider_error'] });
  assert.equal(t.upstream?.attempts, 2);
  assert.match(t.sentence ?? '', /model call failed/);
});

test('a budget refusal names no step: the refusal record does, with its seat and limits', () => {
  const error = {
    code: 'refused',
    reason: 'budget_ceiling_exceeded',
    message: 'the run was refused: budget_ceiling_exceeded',
    details: { seat: 'b2', agent_id: 'agt_1', ceiling: 5, spent: 0, requested: 1024, left: 5, minimum: 64 },
  };
  const records = [
    rec('run', 'run_started', 0),
    rec('agent:b2', 'refusal', 1, { ...error.details, reason: 'budget_ceiling_exceeded' }),
    ended(error, 2),
  ];
  const t = triage({ state: 'refused', error }, records)!;
  assert.equal(t.kind, 'budget');
  assert.equal(t.step_id, 'agent:b2');
  assert.equal(t.seat, 'b2');
  assert.deepEqual(
    t.facts.map((f) => `${f.label}=${f.value}`),
    ['Ceiling=5', 'Spent=0', 'Requested=1024', 'Left=5', 'Least a call needs=64', 'Agent=agt_1'],
  );
  const graph: GraphLike = { nodes: [{ id: 'agent:b2', kind: 'agent', seat: 'b2' }], edges: [] };
  assert.equal(nodeStates(graph, records, 'refused').get('agent:b2'), 'refused');
});

test('a gate refusal: policy, its rule', () => {
  const error = {
    code: 'refused',
    reason: 'gate_declined',
    message: 'x',
    details: { step_id: 'pre:0', contract: null, rule: 'long-enough' },
  };
  const t = triage({ state: 'refused', error }, [rec('pre:0', 'refusal', 1, { reason: 'gate_declined' }), ended(error, 2)])!;
  assert.equal(t.kind, 'policy');
  assert.equal(t.step_id, 'pre:0');
  assert.deepEqual(t.facts, [{ label: 'Rule', value: 'long-enough' }]);
});

test('a step timeout: its deadline from the call’s start; the timeline bar lasts until the run ended', () => {
  const step = 'agent:b3/model/0';
  const error = { code: 'failed', reason: 'step_timeout', message: 'x', details: { seat: 'b3', step_id: step, timeout_ms: 300 } };
  const records = [rec('run', 'run_started', 1000), rec(step, 'intent', 1003, { attempt: 1, call: 'model' }), ended(error, 1376)];
  const t = triage({ state: 'failed', error }, records)!;
  assert.equal(t.kind, 'timeout');
  assert.deepEqual(t.deadline, { timeout_ms: 300, started_at: 1003, due_at: 1303, stopped_at: 1376 });
  const graph: GraphLike = { nodes: [{ id: 'agent:b3', kind: 'agent', seat: 'b3' }], edges: [] };
  const states = nodeStates(graph, records, 'failed');
  assert.equal(states.get('agent:b3'), 'failed');
  const bar = timelineOf(graph, records, states, 5000).bars[0]!;
  assert.equal(bar.end - bar.start, 373, 'from the call’s start to the run’s end, not a zero-length bar');
});

test('an approval rejected: who, through which chain, when and why; one timed out: its deadline and the quorum', () => {
  const error = {
    code: 'refused',
    reason: 'approval_rejected',
    message: 'x',
    details: { step_id: 'pre:0', by: 'usr_b', chain: ['usr_b', 'svc_c'], comment: 'Not \u202eyet' },
  };
  const records = [
    rec('pre:0', 'waiting', 10, { for: 'approval', wake_at: 99_999 }),
    rec('pre:0', 'approval_received', 50, { by: 'usr_b', decision: 'reject', comment: 'Not \u202eyet' }),
    rec('pre:0', 'refusal', 60, { reason: 'approval_rejected' }),
    ended(error, 70),
  ];
  const t = triage({ state: 'refused', error }, records)!;
  assert.equal(t.kind, 'approval_rejected');
  assert.deepEqual(t.rejected, { by: 'usr_b', chain: ['usr_b', 'svc_c'], comment: 'Not \u202eyet', at: 50 });

  const late = { code: 'refused', reason: 'approval_timeout', message: 'x', details: { step_id: 'pre:0', approved: 1, quorum: 2 } };
  const t2 = triage({ state: 'refused', error: late }, [
    rec('pre:0', 'waiting', 10, { for: 'approval', wake_at: 1010 }),
    rec('pre:0', 'decision', 1050, { decision: 'timeout' }),
    rec('pre:0', 'refusal', 1050, { reason: 'approval_timeout' }),
    ended(late, 1060),
  ])!;
  assert.equal(t2.kind, 'approval_timeout');
  assert.deepEqual(t2.timedOut, { due: 1010, since: 10, at: 1050, approved: 1, quorum: 2 });
});

test('job failures: the failing SQL statement, the failing notebook cell, from the spec; a compute time cap', () => {
  const sqlError = { code: 'failed', reason: 'sql_error', message: 'no such column: nope', details: { duration_ms: 14, statement: 1 } };
  const sqlRecords = [rec('run', 'run_started', 0), rec('sql/call', 'intent', 1, { call: 'tool' }), ended(sqlError, 5)];
  const spec = { statements: [{ sql: 'CREATE TABLE t (a INTEGER)' }, { sql: 'SELECT nope FROM t' }] };
  const t = triage({ state: 'failed', error: sqlError, spec, job_type: 'sql' }, sqlRecords)!;
  assert.equal(t.kind, 'job');
  assert.equal(t.step_id, 'sql/call');
  assert.deepEqual(t.statement, { index: 1, sql: 'SELECT nope FROM t' });
  assert.equal(failingStep(sqlRecords), 'sql/call');

  const nbError = { code: 'failed', reason: 'script_error', message: 'Error: boom', details: { duration_ms: 2, logs: [] } };
  const nb = [
    rec('cell-0/call', 'intent', 1),
    rec('cell-0/call', 'step', 2),
    rec('cell-0', 'step', 2),
    rec('cell-1/call', 'intent', 3),
    ended(nbError, 4),
  ];
  const cells = {
    cells: [
      { type: 'markdown', source: '# hi' },
      { type: 'compute', code: 'throw new Error("boom")' },
    ],
  };
  const t2 = triage({ state: 'failed', error: nbError, spec: cells, job_type: 'notebook' }, nb)!;
  assert.equal(t2.step_id, 'cell-1/call');
  assert.deepEqual(t2.cell, { index: 1, type: 'compute', source: 'throw new Error("boom")' });
  const graph: GraphLike = {
    nodes: [
      { id: 'cell-0', kind: 'tool' },
      { id: 'cell-1', kind: 'tool' },
    ],
    edges: [{ from: 'cell-0', to: 'cell-1' }],
  };
  assert.deepEqual(Object.fromEntries(nodeStates(graph, nb, 'failed')), { 'cell-0': 'completed', 'cell-1': 'failed' });
});

test('a cancel: who cancelled; a completed run has no triage', () => {
  const records = [
    rec('agent:x/model/0', 'intent', 1),
    rec('run', 'cancel_requested', 5, { by: 'usr_op' }),
    rec('run/end', 'run_finished', 6, { outcome: 'cancelled' }),
  ];
  const t = triage({ state: 'cancelled', error: null }, records)!;
  assert.equal(t.kind, 'cancelled');
  assert.equal(t.cancelledBy, 'usr_op');
  assert.equal(t.step_id, 'agent:x/model/0', 'the call it was cancelled in');
  assert.equal(triage({ state: 'completed', error: null }, [rec('run/end', 'run_finished', 1, { outcome: 'completed' })]), null);
});

test('a lost outcome an operator failed: who; a run waiting on one is outcome_unknown from its journal', () => {
  const error = {
    code: 'failed',
    reason: 'outcome_unknown',
    message: 'x',
    details: { step_id: 'tool/call', tool: 'http.request', resolved_by: 'usr_op' },
  };
  const t = triage({ state: 'failed', error }, [rec('tool/call', 'intent', 1), ended(error, 9)])!;
  assert.equal(t.kind, 'outcome');
  assert.equal(t.resolvedBy, 'usr_op');
  assert.equal(t.step_id, 'tool/call');
  const waiting = [rec('tool/call', 'intent', 1), rec('tool/call', 'waiting', 2, { for: 'outcome', effect: { effect_key: 'k' } })];
  assert.equal(liveRunState(waiting, 'running'), 'outcome_unknown');
  assert.equal(liveRunState([rec('pre:0', 'waiting', 2, { for: 'approval' })], 'running'), 'waiting');
});
