// The engine hands the tools port the graph's pin of the tool it calls (ToolCallContext.tool_pin), and
// the step record carries the identity an imported tool's server saw (data.identity), as it carries
// on_behalf.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runGraph } from '../../../core/engine/run.ts';
import type { ToolCallContext, ToolsPort } from '../../../core/engine/types.ts';
import { graph, OPTS, ports, seat } from './_harness.ts';

test('the tool port gets the pin of the tool from the graph, and the identity lands in the step data', async () => {
  const seen: ToolCallContext[] = [];
  const port: ToolsPort = {
    describe: (name) => ({ name, description: name, side_effects: false, parameters: { type: 'object' } }),
    async call(_name, _args, ctx) {
      seen.push(ctx);
      return { content: [], identity: { kind: 'delegated', jti: 'j1' } };
    },
  };
  const pin = `sha256:${'c'.repeat(64)}`;
  const g = {
    ...graph(
      [
        { id: 'a', kind: 'tool', seat: 's', config: { tool: 'mcp.crm.lookup', args: {} } },
        { id: 'b', kind: 'tool', seat: 's', config: { tool: 'calc', args: {} } },
      ],
      [{ from: 'a', to: 'b' }],
      [seat('s', {}, { allowed_tools: ['mcp.crm.lookup', 'calc'] })],
    ),
    tool_pins: { 'mcp.crm.lookup': pin },
  };
  const { p, j } = await ports({ tools: port }, ['agt_s']);
  const r = await runGraph(g, {}, p, OPTS);
  assert.equal(r.outcome, 'completed', JSON.stringify(r));
  assert.equal(seen[0]!.tool_pin, pin);
  assert.equal('tool_pin' in seen[1]!, false, 'a built-in tool has no pin');
  const step = j.records.find((x) => x.step_id === 'a/call')!;
  assert.deepEqual(step.data?.['identity'], { kind: 'delegated', jti: 'j1' });
});
