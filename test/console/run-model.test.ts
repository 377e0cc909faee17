// console/src/run-model.ts against recorded journals (test/fixtures/journals,
// verified and replayed in CI) and their compiled graphs: every node's state
// at every point of the run, routes and skips as the engine decides them,
// tokens per seat, refusals.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { compileFormation } from '../../core/compiler/compile.ts';
import {
  journalGraph,
  liveRunState,
  nodeOfStep,
  nodeStates,
  refusalsOf,
  tokensBySeat,
  type GraphLike,
  type RecordLike,
} from '../../console/src/run-model.ts';

function fixture(name: string): { graph: GraphLike; records: RecordLike[] } {
  const f = JSON.parse(readFileSync(join(import.meta.dirname, '../fixtures/journals', `${name}.v1.json`), 'utf8'));
  const c = compileFormation(f.formation, f.billets, f.bindings);
  assert.ok(c.ok);
  return { graph: c.graph as unknown as GraphLike, records: f.records };
}

const statesAt = (graph: GraphLike, records: RecordLike[], n: number, runState: string) =>
  Object.fromEntries(nodeStates(graph, records.slice(0, n), runState));

test('step ids map to the longest node id they start with, at a separator', () => {
  const ids = ['agent:a', 'agent:ab', 'post:0', 'map'];
  assert.equal(nodeOfStep('agent:a/model/0', ids), 'agent:a');
  assert.equal(nodeOfStep('agent:ab', ids), 'agent:ab');
  assert.equal(nodeOfStep('agent:abc', ids), null, 'a prefix without a separator is another node');
  assert.equal(nodeOfStep('map[3]/model/0', ids), 'map');
  assert.equal(nodeOfStep('post:0#2', ids), 'post:0');
  assert.equal(nodeOfStep('run', ids), null);
});

test('manager-delegates with a two-person approval: states along the journal', () => {
  const { graph, records } = fixture('manager-delegates-approval');
  const ids = graph.nodes.map((n) => n.id);
  assert.deepEqual(ids, ['delegate:lead', 'agent:dev', 'agent:qa', 'review:lead', 'post:0']);
  // Started: the entry runs, the rest waits for it.
  assert.deepEqual(statesAt(graph, records, 1, 'running'), {
    'delegate:lead': 'running',
    'agent:dev': 'pending',
    'agent:qa': 'pending',
    'review:lead': 'pending',
    'post:0': 'pending',
  });
  // The manager chose qa: dev is skipped (its edge is not the route), qa is next.
  assert.deepEqual(statesAt(graph, records, 3, 'running'), {
    'delegate:lead': 'completed',
    'agent:dev': 'skipped',
    'agent:qa': 'running',
    'review:lead': 'pending',
    'post:0': 'pending',
  });
  // Waiting for approval.
  const waiting = statesAt(graph, records, 9, 'waiting');
  assert.equal(waiting['post:0'], 'waiting');
  assert.equal(waiting['review:lead'], 'completed');
  assert.equal(liveRunState(records.slice(0, 9), 'running'), 'waiting', 'the journal is ahead of the fetched state');
  // Approved and finished.
  assert.deepEqual(statesAt(graph, records, records.length, 'waiting'), {
    'delegate:lead': 'completed',
    'agent:dev': 'skipped',
    'agent:qa': 'completed',
    'review:lead': 'completed',
    'post:0': 'completed',
  });
  assert.equal(liveRunState(records, 'waiting'), 'completed');
  assert.deepEqual(tokensBySeat(records), [
    { seat: 'lead', agent_id: 'agt_lead', tokens: 38, calls: 2 },
    { seat: 'qa', agent_id: 'agt_qa', tokens: 19, calls: 1 },
  ]);
  assert.deepEqual(refusalsOf(records), []);
});

test('sequential with tools and a gate: a tool call keeps its agent running; the end completes everything', () => {
  const { graph, records } = fixture('sequential-tools-gate');
  const mid = statesAt(graph, records, 4, 'running');
  assert.equal(mid['pre:0'], 'completed');
  assert.equal(mid['agent:researcher'], 'running', 'a model or tool record of a node means it runs');
  assert.equal(mid['agent:writer'], 'pending');
  const end = nodeStates(graph, records, 'completed');
  assert.ok(
    [...end.values()].every((s) => s === 'completed'),
    JSON.stringify(Object.fromEntries(end)),
  );
});

const rec = (seq: number, step_id: string, kind: string, data?: Record<string, unknown>): RecordLike => ({
  seq,
  step_id,
  kind,
  at: seq,
  input_hash: 'h',
  output_hash: 'h',
  ...(data ? { data } : {}),
});

test('refusals: a rejected approval, a gate refusal, a failed step, a cancelled run', () => {
  const graph: GraphLike = {
    nodes: [
      { id: 'pre:0', kind: 'human_approval' },
      { id: 'agent:a', kind: 'agent', seat: 'a' },
      { id: 'post:0', kind: 'gate' },
    ],
    edges: [
      { from: 'pre:0', to: 'agent:a' },
      { from: 'agent:a', to: 'post:0' },
    ],
    entry: 'pre:0',
  };
  const rejected = [
    rec(1, 'run', 'run_started'),
    rec(2, 'pre:0', 'waiting', { reason: 'approval_pending' }),
    rec(3, 'pre:0', 'decision', { decision: 'reject', rule: 'quorum', by: 'usr_bob' }),
    rec(4, 'pre:0', 'refusal', { reason: 'approval_rejected', by: 'usr_bob' }),
    rec(5, 'run/end', 'run_finished', { outcome: 'refused', reason: 'approval_rejected' }),
  ];
  assert.deepEqual(Object.fromEntries(nodeStates(graph, rejected, 'refused')), {
    'pre:0': 'refused',
    'agent:a': 'skipped',
    'post:0': 'skipped',
  });
  assert.deepEqual(
    refusalsOf(rejected).map((r) => [r.seq, r.reason]),
    [[4, 'approval_rejected']],
    'the decision and its refusal record are one refusal',
  );
  assert.deepEqual(
    refusalsOf(rejected.filter((r) => r.kind !== 'refusal')).map((r) => [r.seq, r.reason]),
    [[3, 'approval_rejected']],
  );

  const gate = [
    rec(1, 'run', 'run_started'),
    rec(2, 'pre:0', 'decision', { decision: 'approve' }),
    rec(3, 'agent:a', 'step'),
    rec(4, 'post:0', 'refusal', { reason: 'gate_refused', rule: 'not_empty' }),
    rec(5, 'run/end', 'run_finished', { outcome: 'refused' }),
  ];
  assert.deepEqual(Object.fromEntries(nodeStates(graph, gate, 'refused')), {
    'pre:0': 'completed',
    'agent:a': 'completed',
    'post:0': 'refused',
  });

  const failed = [
    rec(1, 'run', 'run_started'),
    rec(2, 'pre:0', 'decision', { decision: 'approve' }),
    rec(3, 'agent:a/model/0', 'step', { seat: 'a', usage: 7 }),
    rec(4, 'run', 'run_finished', { outcome: 'failed', error: { code: 'failed', details: { step_id: 'agent:a/model/1' } } }),
  ];
  assert.deepEqual(Object.fromEntries(nodeStates(graph, failed, 'failed')), {
    'pre:0': 'completed',
    'agent:a': 'failed',
    'post:0': 'skipped',
  });
  assert.deepEqual(tokensBySeat(failed), [{ seat: 'a', agent_id: null, tokens: 7, calls: 1 }]);

  const cancelled = [
    rec(1, 'run', 'run_started'),
    rec(2, 'pre:0', 'waiting'),
    rec(3, 'run', 'cancel_requested'),
    rec(4, 'run', 'run_finished', { outcome: 'cancelled' }),
  ];
  assert.equal(nodeStates(graph, cancelled, 'cancelled').get('pre:0'), 'cancelled');
  assert.equal(liveRunState(cancelled, 'running'), 'cancelled');
});

test('a tool call waiting for approval under `ask` holds its agent step waiting, until the call runs', () => {
  const graph: GraphLike = { nodes: [{ id: 'agent:a', kind: 'agent', seat: 'a' }], edges: [], entry: 'agent:a' };
  const records = [
    rec(1, 'run', 'run_started'),
    rec(2, 'agent:a/model/0', 'step', { seat: 'a', usage: 9 }),
    rec(3, 'agent:a/tool/0.0', 'waiting', { reason: 'approval_pending', for: 'approval' }),
    rec(4, 'agent:a/tool/0.0', 'approval_received', { by: 'usr_bob', decision: 'approve' }),
    rec(5, 'agent:a/tool/0.0', 'step', { tool: 'kv.put' }),
  ];
  assert.equal(nodeStates(graph, records.slice(0, 3), 'waiting').get('agent:a'), 'waiting');
  assert.equal(nodeStates(graph, records.slice(0, 4), 'running').get('agent:a'), 'waiting', 'an approval alone does not run the call');
  assert.equal(nodeStates(graph, records, 'running').get('agent:a'), 'running');
});

test('a job run without a compiled graph: one node per top-level step, in journal order', () => {
  const records = [
    rec(1, 'run', 'run_started'),
    rec(2, 'exec', 'step', { executor: 'tool' }),
    rec(3, 'exec/call', 'step'),
    rec(4, 'store', 'step', { executor: 'transform' }),
    rec(5, 'run/end', 'run_finished', { outcome: 'completed' }),
  ];
  const g = journalGraph(records);
  assert.deepEqual(g.nodes, [
    { id: 'exec', kind: 'tool' },
    { id: 'store', kind: 'transform' },
  ]);
  assert.deepEqual(g.edges, [{ from: 'exec', to: 'store' }]);
  assert.deepEqual([...nodeStates(g, records, 'completed').values()], ['completed', 'completed']);
  assert.deepEqual([...nodeStates(g, records.slice(0, 1), 'running').values()], ['running', 'pending'], 'the entry runs first');
  assert.deepEqual([...nodeStates(g, records.slice(0, 3), 'running').values()], ['completed', 'running']);
});
