/**
 * The span of one model call, on the OpenTelemetry GenAI semantic conventions
 * (`chat {model}`, kind client): operation, provider, requested and answering
 * model, the provider's response id, token usage (also added to the run's agent
 * span, RequestTraces.addUsage), finish reason, the agent it was made for. Prompt and
 * completion text (`gen_ai.input.messages`, `gen_ai.output.messages`, in the
 * conventions' JSON shape) only when the operator opted in with
 * OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true; never the
 * provider's key or headers. docs/operations.md "Traces".
 */
import type { RequestTraces, SpanAttributes } from '../http/trace.ts';
import type { ChatMessage, ChatRequest, ChatResult } from './openai-client.ts';
import type { Provider } from './repository.ts';

/** `gen_ai.provider.name`: an OpenAI-compatible provider speaks OpenAI's protocol (the conventions' `openai`). */
export function providerName(p: Provider): string {
  return p.provider_type === 'openai-compatible' ? 'openai' : p.provider_type;
}

function server(p: Provider): SpanAttributes {
  if (!p.base_url) return {};
  try {
    const u = new URL(p.base_url);
    return { 'server.address': u.hostname, 'server.port': Number(u.port || (u.protocol === 'https:' ? 443 : 80)) };
  } catch {
    return {};
  }
}

/** The conventions' message shape: a role and its parts (text, tool calls, tool answers). */
function messages(ms: ChatMessage[]): string {
  return JSON.stringify(
    ms.map((m) => {
      const parts: Record<string, unknown>[] = [];
      if (m.role === 'tool') parts.push({ type: 'tool_call_response', id: m.tool_call_id ?? null, response: m.content });
      else if (typeof m.content === 'string' && m.content !== '') parts.push({ type: 'text', content: m.content });
      for (const c of m.tool_calls ?? [])
        parts.push({ type: 'tool_call', id: c.id, name: c.function.name, arguments: c.function.arguments });
      return { role: m.role, parts };
    }),
  );
}

function output(r: ChatResult): string {
  const parts: Record<string, unknown>[] = [];
  if (r.content) parts.push({ type: 'text', content: r.content });
  for (const c of r.tool_calls) parts.push({ type: 'tool_call', id: c.id, name: c.function.name, arguments: c.function.arguments });
  return JSON.stringify([{ role: 'assistant', parts, finish_reason: r.finish_reason ?? 'stop' }]);
}

/** Runs `call` in the model call's span. */
export function chatSpan(
  traces: RequestTraces,
  p: Provider,
  body: ChatRequest,
  agent: { id: string; name: string } | undefined,
  call: () => Promise<ChatResult>,
): Promise<ChatResult> {
  const attributes: SpanAttributes = {
    'gen_ai.operation.name': 'chat',
    'gen_ai.provider.name': providerName(p),
    'gen_ai.request.model': body.model,
    'gen_ai.request.max_tokens': body.max_tokens,
    'gen_ai.agent.id': agent?.id,
    'gen_ai.agent.name': agent?.name,
    'agent_cell.provider.id': p.provider_id,
    ...server(p),
  };
  if (traces.captureContent) attributes['gen_ai.input.messages'] = messages(body.messages);
  return traces.span(`chat ${body.model}`, { kind: 'client', attributes }, async (s) => {
    const r = await call();
    traces.addUsage(providerName(p), r.usage.prompt_tokens, r.usage.completion_tokens);
    s.set({
      'gen_ai.response.id': r.id,
      'gen_ai.response.model': r.model || undefined,
      'gen_ai.response.finish_reasons': r.finish_reason ? [r.finish_reason] : undefined,
      'gen_ai.usage.input_tokens': r.usage.prompt_tokens,
      'gen_ai.usage.output_tokens': r.usage.completion_tokens,
    });
    if (traces.captureContent) s.set({ 'gen_ai.output.messages': output(r) });
    return r;
  });
}
