/**
 * The span of one tool call of a crew run, on the OpenTelemetry GenAI
 * semantic conventions (`execute_tool {tool}`): the tool, the call's step id
 * and the agent that asked. Its arguments and result only when the operator
 * opted in to content capture
 * (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true). docs/operations.md "Traces".
 */
import type { JsonObject } from '../../../core/journal/record.ts';
import type { ToolCallContext, ToolsPort } from '../../../core/engine/types.ts';
import type { RequestTraces, SpanAttributes } from '../../http/trace.ts';

/** The tools port with a span around each call, when spans are exported (else the port itself). */
export function tracedTools(traces: RequestTraces, port: ToolsPort): ToolsPort {
  if (!traces.spans) return port;
  return {
    describe: (name) => port.describe(name),
    call: (name, args, call) => toolSpan(traces, name, args, call, () => port.call(name, args, call)),
  };
}

function toolSpan(
  traces: RequestTraces,
  name: string,
  args: JsonObject,
  call: ToolCallContext,
  run: () => Promise<unknown>,
): Promise<unknown> {
  const attributes: SpanAttributes = {
    'gen_ai.operation.name': 'execute_tool',
    'gen_ai.tool.name': name,
    // The conventions' `function`: the model asks for the call (function calling) and the cell, the agent's host, runs it.
    'gen_ai.tool.type': 'function',
    'gen_ai.tool.call.id': call.step_id,
    'gen_ai.agent.id': call.agent_id ?? undefined,
    'agent_cell.seat': call.seat ?? undefined,
  };
  if (traces.captureContent) attributes['gen_ai.tool.call.arguments'] = JSON.stringify(args);
  return traces.span(`execute_tool ${name}`, { attributes }, async (s) => {
    const out = await run();
    if (traces.captureContent) s.set({ 'gen_ai.tool.call.result': JSON.stringify(out ?? null) });
    return out;
  });
}
