// A seat's tool_choice (core/engine/tool-choice.ts): the engine hands it to the model port on the agent step's
// first call only, refuses a run whose seat cannot offer what it forces, and fails a step whose model did not
// honour it; an absent choice changes nothing the journal records.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runGraph } from '../../../core/engine/run.ts';
import { seatToolChoiceProblem, toolChoiceProblem } from '../../../core/engine/tool-choice.ts';
import { validateGraph } from '../../../core/engine/validate.ts';
import type { AgentConfig, Graph } from '../../../core/engine/types.ts';
import { answer, graph, OPTS, ports, scriptedModel, seat, tools } from './_harness.ts';

const call = (name: string, id = 'c1') => [{ id, name, arguments: {} }];

function oneSeat(choice: AgentConfig['tool_choice'], allowed = ['calc', 'clock.now'], mode: 'auto' | 'plan' = 'auto'): Graph {
  return graph(
    [{ id: 'agent:s', kind: 'agent', seat: 's', config: choice === undefined ? {} : { tool_choice: choice } }],
    [],
    [seat('s', {}, { allowed_tools: allowed, permission_mode: mode })],
  );
}

const catalog = () => tools({ calc: { fn: () => ({ value: 2 }) }, 'clock.now': { fn: () => ({ epoch_ms: 1 }) } });

test('the choice goes to the first model call of the step; later rounds are auto', async () => {
  const m = scriptedModel({ s: [answer('', call('calc')), answer('done')] });
  const { p } = await ports({ model: m.port, tools: catalog().port }, ['agt_s']);
  const r = await runGraph(oneSeat({ name: 'calc' }), 'go', p, OPTS);
  assert.equal(r.outcome, 'completed', JSON.stringify(r));
  assert.deepEqual(m.calls[0]!.tool_choice, { name: 'calc' });
  assert.equal('tool_choice' in m.calls[1]!, false, 'the second round decides for itself');
});

test('required is honoured by any tool call; an answer without one fails the step (tool_choice_unmet)', async () => {
  const ok = scriptedModel({ s: [answer('', call('clock.now')), answer('done')] });
  const a = await ports({ model: ok.port, tools: catalog().port }, ['agt_s']);
  assert.equal((await runGraph(oneSeat('required'), 'go', a.p, OPTS)).outcome, 'completed');
  assert.equal(ok.calls[0]!.tool_choice, 'required');

  const lazy = scriptedModel({ s: [answer('no tool for you')] });
  const b = await ports({ model: lazy.port, tools: catalog().port }, ['agt_s']);
  const r = await runGraph(oneSeat('required'), 'go', b.p, OPTS);
  assert.equal(r.outcome, 'failed');
  assert.equal(r.reason, 'model_error');
  assert.equal(r.details?.['problem'], 'tool_choice_unmet');
  assert.equal(r.details?.['expected'], 'a tool call');
});

test('a named tool must be the one called; none must call none', async () => {
  const other = scriptedModel({ s: [answer('', call('clock.now'))] });
  const a = await ports({ model: other.port, tools: catalog().port }, ['agt_s']);
  const r = await runGraph(oneSeat({ name: 'calc' }), 'go', a.p, OPTS);
  assert.equal(r.reason, 'model_error');
  assert.equal(r.details?.['expected'], 'calc');

  const none = scriptedModel({ s: [answer('', call('calc'))] });
  const b = await ports({ model: none.port, tools: catalog().port }, ['agt_s']);
  const n = await runGraph(oneSeat('none'), 'go', b.p, OPTS);
  assert.equal(n.reason, 'model_error');
  assert.equal(n.details?.['expected'], 'no tool call');
  assert.equal(none.calls[0]!.tool_choice, 'none');
});

test('a forced choice whose tool is not on offer is refused before the model is asked (tool_choice_unavailable)', async () => {
  // The port does not describe calc (no such tool here): the model would be made to call what cannot run.
  const m = scriptedModel({ s: [answer('', call('calc'))] });
  const onlyClock = tools({ 'clock.now': { fn: () => ({}) } });
  const { p } = await ports({ model: m.port, tools: onlyClock.port }, ['agt_s']);
  const r = await runGraph(oneSeat({ name: 'calc' }), 'go', p, OPTS);
  assert.equal(r.outcome, 'refused');
  assert.equal(r.reason, 'tool_choice_unavailable');
  assert.equal(m.calls.length, 0, 'no model call, no tokens spent');
  // No tools port at all: nothing is on offer.
  const q = await ports({ model: m.port }, ['agt_s']);
  assert.equal((await runGraph(oneSeat('required'), 'go', q.p, OPTS)).reason, 'tool_choice_unavailable');
});

test('without a choice the model step records exactly what it did before tool_choice existed', async () => {
  const m = scriptedModel({ s: [answer('hi')] });
  const a = await ports({ model: m.port }, ['agt_s']);
  await runGraph(oneSeat(undefined), 'go', a.p, OPTS);
  const plain = a.j.records.find((x) => x.step_id === 'agent:s/model/0')!;
  const m2 = scriptedModel({ s: [answer('', call('calc')), answer('hi')] });
  const b = await ports({ model: m2.port, tools: catalog().port }, ['agt_s']);
  await runGraph(oneSeat('required'), 'go', b.p, OPTS);
  const forced = b.j.records.find((x) => x.step_id === 'agent:s/model/0')!;
  assert.equal('tool_choice' in (a.j.blobs.get(plain.input_hash) as object), false);
  assert.equal((b.j.blobs.get(forced.input_hash) as { tool_choice?: unknown }).tool_choice, 'required');
  assert.equal(m.calls[0]!.tool_choice, undefined);
});

test('tool_choice values and what a seat can honour', () => {
  for (const ok of ['auto', 'none', 'required', { name: 'calc' }]) assert.equal(toolChoiceProblem(ok), null, JSON.stringify(ok));
  for (const bad of ['any', '', null, 3, [], { name: '' }, { name: 'calc', extra: 1 }, { tool: 'calc' }])
    assert.notEqual(toolChoiceProblem(bad), null, JSON.stringify(bad));
  const auth = { allowed_tools: ['calc'], permission_mode: 'auto' as const };
  assert.equal(seatToolChoiceProblem({ name: 'calc' }, auth), null);
  assert.match(seatToolChoiceProblem({ name: 'kv.put' }, auth)!, /not granted/);
  assert.match(seatToolChoiceProblem('required', { ...auth, allowed_tools: [] })!, /no tool/);
  assert.match(seatToolChoiceProblem('required', { ...auth, permission_mode: 'plan' })!, /plan mode/);
  assert.equal(seatToolChoiceProblem('none', { ...auth, allowed_tools: [] }), null);
  assert.equal(seatToolChoiceProblem(undefined, auth), null);
});

test('the graph validator refuses a choice the seat cannot honour', () => {
  assert.deepEqual(validateGraph(oneSeat({ name: 'calc' })), { ok: true });
  const v = validateGraph(oneSeat({ name: 'kv.put' }));
  assert.equal(v.ok, false);
  assert.match((v as { problem: string }).problem, /not granted/);
  assert.equal(validateGraph(oneSeat('required', ['calc'], 'plan')).ok, false);
  assert.equal(validateGraph(oneSeat('sometimes' as never)).ok, false);
});
