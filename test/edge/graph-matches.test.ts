// A device recompiles a crew bundle's compiler input and must get the carried graph (edge/load.ts
// graphMatches). A crew that may call an imported tool was compiled with the tool's pin: the bundle's
// compiler_input carries the pins, so the device's compile gives the same graph and hash; without them
// it does not, and the bundle is refused.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compileFormation } from '../../core/compiler/compile.ts';
import type { CrewContent } from '../../bundles/crew-bundle.ts';
import { graphMatches } from '../../edge/load.ts';

test('a graph with pins recompiles on the device from the carried compiler input', () => {
  const formation = { name: 'f' };
  const billets = [{ id: 's', role_label: 'r', authority_cap: { allowed_tools: ['calc', 'mcp.crm.lookup'] } }];
  const bindings = { s: { agent_id: 'agt_1' } };
  const toolPins = { 'mcp.crm.lookup': `sha256:${'d'.repeat(64)}` };
  const r = compileFormation(formation, billets, bindings, { toolPins });
  assert.ok(r.ok);
  const crew = (compiler_input: CrewContent['compiler_input']): CrewContent =>
    ({ graph: r.graph, graph_hash: r.graphHash, compiler_input }) as unknown as CrewContent;
  assert.equal(graphMatches(crew({ formation, billets, bindings, tool_pins: toolPins } as CrewContent['compiler_input'])), true);
  assert.equal(graphMatches(crew({ formation, billets, bindings })), false, 'without the pins it is another graph');
});
