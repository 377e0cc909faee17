/**
 * agent: the seat's agent answers the input with the model, calling granted
 * tools in a bounded loop (each model call and tool call is its own journaled
 * step). Output: the final answer text.
 */
import type { ChatMessage, ToolDescriptor, AgentConfig } from '../types.ts';
import { modelCall, render } from '../internal/model.ts';
import { governedToolCall } from '../internal/tool.ts';
import { refuse } from '../internal/stop.ts';
import type { Executor } from '../internal/step.ts';

export const agent: Executor = async (ctx, step, input) => {
  const cfg = step.config as AgentConfig;
  const seatId = step.seat!;
  const seat = ctx.seat(seatId);
  const maxTokens = cfg.max_tokens ?? ctx.graph.limits.default_max_tokens;
  const maxRounds = cfg.max_tool_rounds ?? ctx.graph.limits.max_tool_rounds;
  const tools: ToolDescriptor[] = [];
  if (ctx.ports.tools !== undefined && seat.authority.permission_mode !== 'plan') {
    for (const name of seat.authority.allowed_tools) {
      const d = ctx.ports.tools.describe(name);
      if (d !== undefined) tools.push(d);
    }
  }
  const messages: ChatMessage[] = [
    { role: 'system', content: seat.system_prompt ?? `You are the ${seat.role_label}.` },
    { role: 'user', content: (cfg.prompt !== undefined ? cfg.prompt + '\n\n' : '') + render(input) },
  ];
  for (let round = 0; ; round++) {
    // The step's tool_choice binds its first call only: later rounds may answer (tool-choice.ts).
    const choice = round === 0 ? cfg.tool_choice : undefined;
    const resp = await modelCall(ctx, seatId, `${step.id}/model/${round}`, messages, tools, maxTokens, cfg, choice);
    const calls = resp.tool_calls ?? [];
    if (calls.length === 0) return { output: resp.content, data: { seat: seatId, rounds: round + 1 } };
    if (round >= maxRounds) throw refuse('tool_rounds_exceeded', { seat: seatId, limit: maxRounds });
    messages.push({ role: 'assistant', content: resp.content, tool_calls: calls });
    for (let i = 0; i < calls.length; i++) {
      const call = calls[i]!;
      const result = await governedToolCall(ctx, seatId, `${step.id}/tool/${round}.${i}`, call.name, call.arguments, cfg);
      messages.push({ role: 'tool', tool_call_id: call.id, content: JSON.stringify(result ?? null) });
    }
  }
};
