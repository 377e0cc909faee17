/**
 * The engine's model call (core/engine/types.ts: ModelRequest, ModelResponse,
 * ModelDelta) in the OpenAI Chat Completions wire shape (../openai-client.ts)
 * and back, for the AI module's `complete` (../complete.ts).
 *
 * Tool names travel to the model with `.` spelled `__` (function names of the
 * protocol allow only [A-Za-z0-9_-]; core/engine/wire-name.ts); answers in
 * either spelling map back to the catalog name. A tool call's arguments that are not a JSON object come
 * back as `{ _unparsed: <the text> }`, for the engine to refuse.
 */
import type { ChatMessage, ModelCallOptions, ModelRequest, ModelResponse } from '../../../core/engine/types.ts';
import type { JsonObject } from '../../../core/journal/record.ts';
import { fromWireName, toWireName } from '../../../core/engine/wire-name.ts';
import type { ChatDelta, ChatResult, ChatMessage as WireMessage, ToolSpec, WireToolChoice } from '../openai-client.ts';

/** The conversation as the protocol's messages (tool calls' arguments as JSON text). */
export function wireMessages(messages: ChatMessage[]): WireMessage[] {
  return messages.map((m) => {
    const w: WireMessage = { role: m.role, content: m.content };
    if (m.tool_call_id !== undefined) w.tool_call_id = m.tool_call_id;
    if (m.tool_calls?.length) {
      w.tool_calls = m.tool_calls.map((c) => ({
        id: c.id,
        type: 'function' as const,
        function: { name: toWireName(c.name), arguments: JSON.stringify(c.arguments) },
      }));
    }
    return w;
  });
}

/** The seat's tools as the protocol's function declarations. */
export function wireTools(tools: ModelRequest['tools']): ToolSpec[] {
  return tools.map((t) => ({
    type: 'function',
    function: { name: toWireName(t.name), description: t.description, parameters: t.parameters },
  }));
}

/** The step's tool_choice in the protocol's shape (a named tool as its function, `.` spelled `__`); undefined: auto. */
export function wireToolChoice(choice: ModelRequest['tool_choice']): WireToolChoice | undefined {
  if (choice === undefined) return undefined;
  return typeof choice === 'string' ? choice : { type: 'function', function: { name: toWireName(choice.name) } };
}

/** The provider's answer as the engine's: text, tool calls (catalog names, parsed arguments), token usage. */
export function engineResponse(r: ChatResult): ModelResponse {
  const out: ModelResponse = {
    content: r.content ?? '',
    usage: { input_tokens: r.usage.prompt_tokens, output_tokens: r.usage.completion_tokens },
  };
  // What the call's failed attempts consumed before this answer: charged, not part of the answer.
  if (r.failed_usage) out.failed_usage = { input_tokens: r.failed_usage.prompt_tokens, output_tokens: r.failed_usage.completion_tokens };
  if (r.tool_calls.length) {
    out.tool_calls = r.tool_calls.map((c) => {
      let args: unknown;
      try {
        args = JSON.parse(c.function.arguments);
      } catch {
        args = undefined;
      }
      return {
        id: c.id,
        name: fromWireName(c.function.name),
        arguments: (typeof args === 'object' && args !== null && !Array.isArray(args)
          ? args
          : { _unparsed: c.function.arguments }) as JsonObject,
      };
    });
  }
  return out;
}

/** The provider's fragments as the engine's (tool names back in the catalog's spelling). */
export function engineDeltas(onDelta: ModelCallOptions['onDelta']): ((d: ChatDelta) => void) | undefined {
  if (onDelta === undefined) return undefined;
  return (d) => {
    const call = d.tool_call;
    onDelta({
      text: d.text,
      ...(call ? { tool_call: { ...call, ...(call.name !== undefined ? { name: fromWireName(call.name) } : {}) } } : {}),
      ...(d.restart ? { restart: true } : {}),
    });
  };
}
