// Live tokens in the engine (core/engine/internal/delta.ts): a streaming model port's fragments become
// step deltas placed by their offset; a restart starts the answer over at index 0; a port that does not
// stream gives one delta per part at the end; a replayed step gives none; deltas never change the journal.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runGraph } from '../../../core/engine/run.ts';
import type { ModelPort, StepDelta } from '../../../core/engine/types.ts';
import { answer, graph, OPTS, ports, seat } from './_harness.ts';

const one = () => graph([{ id: 'a', kind: 'agent', seat: 'a', config: {} }], [], [seat('a', { role_label: 'writer' })]);

test('a streaming port: each fragment is a delta at its offset, with step id, seat and role label', async () => {
  const model: ModelPort = {
    async complete(_req, opts) {
      opts?.onDelta?.({ text: 'Hel' });
      opts?.onDelta?.({ text: 'lo' });
      opts?.onDelta?.({ text: '{"x"', tool_call: { index: 0, id: 'c1', name: 'calc' } });
      opts?.onDelta?.({ text: ':1}', tool_call: { index: 0 } });
      return answer('Hello');
    },
  };
  const seen: StepDelta[] = [];
  const { p, j } = await ports({ model, delta: (d) => seen.push(d) }, ['agt_a']);
  const r = await runGraph(one(), 'go', p, OPTS);
  assert.equal(r.outcome, 'completed');
  assert.deepEqual(seen, [
    { step_id: 'a/model/0', seat: 'a', role_label: 'writer', index: 0, text: 'Hel' },
    { step_id: 'a/model/0', seat: 'a', role_label: 'writer', index: 3, text: 'lo' },
    { step_id: 'a/model/0', seat: 'a', role_label: 'writer', index: 0, text: '{"x"', tool_call: { index: 0, id: 'c1', name: 'calc' } },
    { step_id: 'a/model/0', seat: 'a', role_label: 'writer', index: 4, text: ':1}', tool_call: { index: 0, id: 'c1', name: 'calc' } },
  ]);
  // The same run without a delta port writes the same journal: deltas are not records.
  const { p: p2, j: j2 } = await ports({ model }, ['agt_a']);
  await runGraph(one(), 'go', p2, OPTS);
  assert.deepEqual(
    j.records.map((x) => [x.kind, x.step_id, x.output_hash]),
    j2.records.map((x) => [x.kind, x.step_id, x.output_hash]),
  );
});

test('a restart (a retried request) starts the answer over at index 0', async () => {
  const model: ModelPort = {
    async complete(_req, opts) {
      opts?.onDelta?.({ text: 'par' });
      opts?.onDelta?.({ text: 'whole', restart: true });
      return answer('whole');
    },
  };
  const seen: StepDelta[] = [];
  const { p } = await ports({ model, delta: (d) => seen.push(d) }, ['agt_a']);
  await runGraph(one(), 'go', p, OPTS);
  assert.deepEqual(
    seen.map((d) => [d.index, d.text]),
    [
      [0, 'par'],
      [0, 'whole'],
    ],
  );
});

test('a port that does not stream: one delta per part at the end; a replayed step: none; a throwing listener changes nothing', async () => {
  const model: ModelPort = { complete: async () => answer('all', [{ id: 'c1', name: 'calc', arguments: { x: 1 } }]) };
  const seen: StepDelta[] = [];
  const g = graph(
    [{ id: 'a', kind: 'agent', seat: 'a', config: { max_tool_rounds: 0 } }],
    [],
    [seat('a', {}, { allowed_tools: ['calc'] })],
  );
  const { p } = await ports(
    {
      model,
      delta: (d) => {
        seen.push(d);
        throw new Error('listener failed');
      },
    },
    ['agt_a'],
  );
  await runGraph(g, 'go', p, OPTS);
  assert.deepEqual(
    seen.slice(0, 2).map((d) => [d.step_id, d.index, d.text, d.tool_call]),
    [
      ['a/model/0', 0, 'all', undefined],
      ['a/model/0', 0, '{"x":1}', { index: 0, id: 'c1', name: 'calc' }],
    ],
  );
  // Replayed from the journal: no model call, no delta.
  const seen2: StepDelta[] = [];
  const recorded = await ports({ model: { complete: async () => answer('fresh') }, delta: (d) => seen2.push(d) }, ['agt_a']);
  await runGraph(one(), 'go', recorded.p, OPTS);
  const before = seen2.length;
  await runGraph(one(), 'go', recorded.p, OPTS);
  assert.equal(seen2.length, before, 'a replayed step streams nothing');
});
