// Pins of imported tools in the compiled graph (core/compiler/internal/tool-pins.ts): a graph that
// calls a pinned tool carries its pin and its hash covers it; a graph that calls none is exactly the
// graph (and hash) it was before pins existed, whatever pins the catalog holds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compileFormation } from '../../../core/compiler/compile.ts';
import type { BilletInput, FormationInput } from '../../../core/compiler/types.ts';
import { validateGraph } from '../../../core/engine/validate.ts';

const PIN_A = `sha256:${'a'.repeat(64)}`;
const PIN_B = `sha256:${'b'.repeat(64)}`;
const f: FormationInput = { name: 'f' };
const seatWith = (tools: string[]): BilletInput[] => [{ id: 's', role_label: 'r', authority_cap: { allowed_tools: tools } }];

function ok(...a: Parameters<typeof compileFormation>) {
  const r = compileFormation(...a);
  assert.ok(r.ok, JSON.stringify(r));
  return r;
}

test('a graph of built-in tools carries no pins and keeps its hash, whatever the catalog pins', () => {
  const plain = ok(f, seatWith(['calc', 'kv.get']));
  const withCatalog = ok(f, seatWith(['calc', 'kv.get']), undefined, { toolPins: { 'mcp.crm.lookup': PIN_A } });
  assert.equal(withCatalog.graphHash, plain.graphHash);
  assert.equal('tool_pins' in withCatalog.graph, false);
  assert.deepEqual(withCatalog.graph, plain.graph);
});

test("a seat granted a pinned tool puts the tool's pin in the graph and in its hash", () => {
  const tools = ['calc', 'mcp.crm.lookup'];
  const a = ok(f, seatWith(tools), undefined, { toolPins: { 'mcp.crm.lookup': PIN_A, 'mcp.crm.other': PIN_B } });
  assert.deepEqual(a.graph.tool_pins, { 'mcp.crm.lookup': PIN_A }, 'only the pins of tools the graph can call');
  const b = ok(f, seatWith(tools), undefined, { toolPins: { 'mcp.crm.lookup': PIN_B } });
  assert.notEqual(a.graphHash, b.graphHash, 'a re-pin changes the graph hash');
  assert.equal(a.formationHash, b.formationHash, 'the formation itself did not change');
  const again = ok(f, seatWith([...tools].reverse()), undefined, { toolPins: { 'mcp.crm.other': PIN_B, 'mcp.crm.lookup': PIN_A } });
  assert.equal(again.graphHash, a.graphHash, 'deterministic');
  assert.deepEqual(validateGraph(a.graph), { ok: true });
});

test('tool stages, tool skills in chains and map bodies count as calls', () => {
  const skill = (tool: string) => ({
    name: 'k',
    skill_kind: 'chain',
    definition: { steps: [{ name: 't', skill_kind: 'tool', definition: { tool } }] },
  });
  const stages: FormationInput = {
    name: 'f',
    pre: [{ kind: 'tool', config: { tool: 'mcp.a.x', args: {} } }],
    post: [
      { kind: 'skill', config: { skill: skill('mcp.a.y') } },
      { kind: 'map', config: { over: '[1]', max_items: 2, body: { kind: 'tool', config: { tool: 'mcp.a.z' } } } },
    ],
  };
  const pins = { 'mcp.a.x': PIN_A, 'mcp.a.y': PIN_A, 'mcp.a.z': PIN_B, 'mcp.a.unused': PIN_B };
  const r = ok(stages, seatWith([]), undefined, { toolPins: pins });
  assert.deepEqual(r.graph.tool_pins, { 'mcp.a.x': PIN_A, 'mcp.a.y': PIN_A, 'mcp.a.z': PIN_B });
});

test('validateGraph refuses pins that are not pins', () => {
  const r = ok(f, seatWith(['mcp.a.x']), undefined, { toolPins: { 'mcp.a.x': PIN_A } });
  assert.equal(validateGraph({ ...r.graph, tool_pins: { 'mcp.a.x': 'sha256:xyz' } }).ok, false);
  assert.equal(validateGraph({ ...r.graph, tool_pins: [] as unknown as Record<string, string> }).ok, false);
});
