// The engine's tracer port: one span per executed step (replayed steps open
// none), with the step's id, executor, seat and agent; a step that stops to
// wait is not failed, a refused one is; and the journal is the same with the
// port as without it (tracing never changes what a run does or records).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runGraph } from '../../../core/engine/run.ts';
import type { TracerPort } from '../../../core/engine/types.ts';
import { answer, approvals, chain, graph, OPTS, ports, scriptedModel, seat } from './_harness.ts';

interface Recorded {
  name: string;
  attributes: Record<string, string | number | boolean>;
  failed: string | null;
  ok: boolean;
  threw: boolean;
}

function tracer(): { port: TracerPort; spans: Recorded[] } {
  const spans: Recorded[] = [];
  return {
    spans,
    port: {
      async span(name, attributes, fn) {
        const r: Recorded = { name, attributes: { ...attributes }, failed: null, ok: false, threw: false };
        spans.push(r);
        try {
          return await fn({ set: (a) => Object.assign(r.attributes, a), fail: (reason) => (r.failed = reason), ok: () => (r.ok = true) });
        } catch (e) {
          r.threw = true;
          throw e;
        }
      },
    },
  };
}

const g = () =>
  graph(
    [
      { id: 'a', kind: 'agent', seat: 'a', config: {} },
      { id: 'h', kind: 'human_approval', config: { rule: 'quorum', quorum: 1, timeout_ms: 60_000 } },
      { id: 'b', kind: 'agent', seat: 'b', config: {} },
    ],
    chain('a', 'h', 'b'),
    [seat('a'), seat('b')],
  );

test('one span per executed step; waiting is not a failure; replayed steps open none', async () => {
  const m = scriptedModel(() => answer('x'));
  const ap = approvals();
  const t = tracer();
  const { p } = await ports({ model: m.port, approvals: ap.port, tracer: t.port }, ['agt_a', 'agt_b']);
  assert.equal((await runGraph(g(), 'go', p, OPTS)).outcome, 'waiting');
  assert.deepEqual(
    t.spans.map((s) => [s.name, s.attributes['agent_cell.step.outcome']]),
    [
      ['step a', 'completed'],
      ['step h', 'waiting'],
    ],
  );
  assert.deepEqual(t.spans[0]!.attributes, {
    'agent_cell.step.id': 'a',
    'agent_cell.step.kind': 'agent',
    'agent_cell.seat': 'a',
    'gen_ai.agent.id': 'agt_a',
    'agent_cell.step.outcome': 'completed',
  });
  assert.equal(t.spans[1]!.ok, true, 'a step that waits is told ok');
  assert.equal(t.spans[1]!.failed, null);
  ap.add('h', 'u1');
  t.spans.length = 0;
  assert.equal((await runGraph(g(), 'go', p, OPTS)).outcome, 'completed');
  assert.deepEqual(
    t.spans.map((s) => s.name),
    ['step h', 'step b'],
    'step a was replayed from the journal: no span',
  );
});

test('a refused step is failed with its reason', async () => {
  const m = scriptedModel(() => answer('x'));
  const t = tracer();
  const { p, b } = await ports({ model: m.port, tracer: t.port }, ['agt_a', 'agt_b']);
  b.port.reserve = async () => ({ ok: false, reason: 'exhausted' });
  const r = await runGraph(g(), 'go', p, OPTS);
  assert.equal(r.outcome, 'refused');
  assert.equal(t.spans[0]!.failed, 'budget_exceeded');
  assert.equal(t.spans[0]!.attributes['agent_cell.step.outcome'], 'refused');
});

test('the journal is the same with the tracer port as without it', async () => {
  const kinds = async (withTracer: boolean) => {
    const m = scriptedModel(() => answer('x'));
    const ap = approvals();
    ap.add('h', 'u1');
    const { p, j } = await ports({ model: m.port, approvals: ap.port, ...(withTracer ? { tracer: tracer().port } : {}) }, [
      'agt_a',
      'agt_b',
    ]);
    await runGraph(g(), 'go', p, OPTS);
    return j.records.map((r) => [r.kind, r.step_id, r.output_hash]);
  };
  assert.deepEqual(await kinds(true), await kinds(false));
});
