// A billet's tool_choice in the compiled graph: on its agent step's config (not a manager's review), in the
// formation hash only when authored and not auto, and refused when the billet's cap or the bound agent
// cannot honour it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compileFormation } from '../../../core/compiler/compile.ts';
import type { BilletInput, FormationInput } from '../../../core/compiler/types.ts';
import type { AgentConfig } from '../../../core/engine/types.ts';

const f: FormationInput = { name: 'f' };
const billet = (over: Partial<BilletInput> = {}): BilletInput => ({
  id: 's',
  role_label: 'r',
  authority_cap: { allowed_tools: ['calc', 'kv.get'], permission_mode: 'auto' },
  ...over,
});

function ok(...a: Parameters<typeof compileFormation>) {
  const r = compileFormation(...a);
  assert.ok(r.ok, JSON.stringify(r));
  return r;
}

test('absent or auto: the graph and both hashes are those of a billet without tool_choice', () => {
  const plain = ok(f, [billet()]);
  const auto = ok(f, [billet({ tool_choice: 'auto' })]);
  assert.equal(auto.formationHash, plain.formationHash);
  assert.equal(auto.graphHash, plain.graphHash);
  assert.deepEqual(auto.graph, plain.graph);
  assert.equal('tool_choice' in plain.graph.nodes[0]!.config, false);
});

test('a choice rides on the seat agent step and changes the hashes', () => {
  const plain = ok(f, [billet()]);
  const named = ok(f, [billet({ tool_choice: { name: 'calc' } })]);
  const required = ok(f, [billet({ tool_choice: 'required' })]);
  assert.deepEqual((named.graph.nodes[0]!.config as AgentConfig).tool_choice, { name: 'calc' });
  assert.equal((required.graph.nodes[0]!.config as AgentConfig).tool_choice, 'required');
  assert.equal(new Set([plain.formationHash, named.formationHash, required.formationHash]).size, 3);
  assert.equal(new Set([plain.graphHash, named.graphHash, required.graphHash]).size, 3);
  assert.equal(ok(f, [billet({ tool_choice: { name: 'calc' } })]).graphHash, named.graphHash, 'deterministic');
});

test("a manager's review step is not forced (it gives the final answer)", () => {
  const r = ok({ name: 'm', coordination_policy: 'manager-delegates' }, [
    billet({ id: 'boss', tool_choice: 'required' }),
    billet({ id: 'w', reports_to: 'boss' }),
  ]);
  const review = r.graph.nodes.find((n) => n.id === 'review:boss')!;
  assert.equal('tool_choice' in review.config, false);
});

test('a choice the billet cap cannot honour is refused (invalid_formation, field tool_choice)', () => {
  const cases: [NonNullable<BilletInput['tool_choice']>, BilletInput['authority_cap']][] = [
    [{ name: 'kv.put' }, { allowed_tools: ['calc'] }],
    ['required', {}],
    ['required', { allowed_tools: ['calc'], permission_mode: 'plan' }],
  ];
  for (const [choice, cap] of cases) {
    const r = compileFormation(f, [billet({ tool_choice: choice, authority_cap: cap })]);
    assert.equal(r.ok, false);
    if (!r.ok) {
      assert.equal(r.code, 'invalid_formation');
      assert.equal(r.details['field'], 'tool_choice');
    }
  }
  const bad = compileFormation(f, [billet({ tool_choice: 'sometimes' as never })]);
  assert.equal(bad.ok, false);
});

test('a bound agent that narrows the seat below the choice makes the crew fail to compile', () => {
  const b = [billet({ tool_choice: { name: 'kv.get' } })];
  ok(f, b, { s: { agent_id: 'agt_1', authority: { allowed_tools: ['kv.get'], permission_mode: 'auto' } } });
  const r = compileFormation(f, b, { s: { agent_id: 'agt_1', authority: { allowed_tools: ['calc'], permission_mode: 'auto' } } });
  assert.equal(r.ok, false);
  if (!r.ok) {
    assert.equal(r.code, 'invalid_formation');
    assert.equal(r.details['billet'], 's');
  }
});
