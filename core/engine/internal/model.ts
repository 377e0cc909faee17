/**
 * A model call by a seat's agent: seat ceiling, budget reserve before and
 * commit after (reserving what is left when less than max_tokens is, down to
 * a floor: ../budget.ts), memoized so a recorded answer is never asked for again.
 */
import type { JsonObject } from '../../journal/record.ts';
import type { RunContext } from './context.ts';
import { isEngineRefusal } from '../refusal.ts';
import { fail, refuse, Stop } from './stop.ts';
import { withAttempts } from './attempts.ts';
import { isStepTimeout } from '../timeout.ts';
import type { StepPolicy } from '../policy.ts';
import { consumedBy, failedCallTokens, grantTokens, tokenFloor, withConsumed } from '../budget.ts';
import { deltaSink } from './delta.ts';
import type { ChatMessage, ModelCallOptions, ModelResponse, ToolCall, ToolDescriptor } from '../types.ts';
import { toolChoiceForces, type ToolChoice } from '../tool-choice.ts';

/**
 * What the run may say of a failed model call (kept in the run's error and its
 * signed end record): the cell's own error code, message and reason, the
 * provider's HTTP status and the number of attempts. Only a ServiceError's
 * fields, all written by the cell; never the provider's body (a raw error's
 * message may quote it).
 */
export function upstreamOf(e: unknown): JsonObject | null {
  if (typeof e !== 'object' || e === null || (e as { name?: unknown }).name !== 'ServiceError') return null;
  const x = e as { code?: unknown; message?: unknown; details?: Record<string, unknown> };
  const d = x.details ?? {};
  const out: JsonObject = {};
  if (typeof x.code === 'string') out['code'] = x.code;
  if (typeof x.message === 'string') out['message'] = x.message.slice(0, 200);
  if (typeof d['reason'] === 'string') out['reason'] = d['reason'];
  if (typeof d['provider_status'] === 'number') out['provider_status'] = d['provider_status'];
  if (typeof d['attempts'] === 'number') out['attempts'] = d['attempts'];
  return Object.keys(out).length ? out : null;
}

function validResponse(r: unknown): ModelResponse | null {
  if (typeof r !== 'object' || r === null) return null;
  const x = r as Record<string, unknown>;
  const usage = x.usage as Record<string, unknown> | undefined;
  if (typeof x.content !== 'string' && x.content !== null && x.content !== undefined) return null;
  const inTok = typeof usage?.input_tokens === 'number' && usage.input_tokens >= 0 ? usage.input_tokens : 0;
  const outTok = typeof usage?.output_tokens === 'number' && usage.output_tokens >= 0 ? usage.output_tokens : 0;
  const out: ModelResponse = {
    content: typeof x.content === 'string' ? x.content : '',
    usage: { input_tokens: inTok, output_tokens: outTok },
  };
  if (x.tool_calls !== undefined && x.tool_calls !== null) {
    if (!Array.isArray(x.tool_calls)) return null;
    const calls: ToolCall[] = [];
    for (const c of x.tool_calls as unknown[]) {
      const cc = c as Record<string, unknown>;
      if (typeof cc?.name !== 'string' || typeof cc.id !== 'string') return null;
      const args = cc.arguments;
      if (typeof args !== 'object' || args === null || Array.isArray(args)) return null;
      calls.push({ id: cc.id, name: cc.name, arguments: args as JsonObject });
    }
    if (calls.length > 0) out.tool_calls = calls;
  }
  return out;
}

/** The tokens a port's own failed attempts consumed before an answer (ModelResponse.failed_usage), 0 when it names none. */
function failedUsageOf(raw: unknown): number {
  const u = (raw as { failed_usage?: Record<string, unknown> } | null)?.failed_usage;
  if (typeof u !== 'object' || u === null) return 0;
  const n = (x: unknown) => (typeof x === 'number' && Number.isSafeInteger(x) && x >= 0 ? x : 0);
  return n(u['input_tokens']) + n(u['output_tokens']);
}

/** One model call for `seatId` under step id `stepId`. Returns the (possibly recorded) response. */
export async function modelCall(
  ctx: RunContext,
  seatId: string,
  stepId: string,
  messages: ChatMessage[],
  tools: ToolDescriptor[],
  maxTokens: number,
  policy: StepPolicy = {},
  toolChoice?: Exclude<ToolChoice, 'auto'>,
): Promise<ModelResponse> {
  const seat = ctx.seat(seatId);
  const agentId = ctx.agentOf(seatId);
  const input = {
    seat: seatId,
    messages,
    tools: tools.map((t) => t.name),
    max_tokens: maxTokens,
    ...(toolChoice !== undefined ? { tool_choice: toolChoice } : {}),
  };
  const r = await ctx.memo(stepId, 'step', seatId, input, async () => {
    const model = ctx.ports.model;
    if (model === undefined) throw refuse('model_unavailable', { seat: seatId });
    // A forced call needs what it forces on offer: a tool at all, or the named one (tool-choice.ts).
    if (toolChoiceForces(toolChoice) && !tools.some((t) => toolChoice === 'required' || t.name === toolChoice.name))
      throw refuse('tool_choice_unavailable', { seat: seatId, step_id: stepId, tool_choice: toolChoice });
    // Reserve min(max_tokens, what is left of the seat ceiling and of the ledger); refuse only below the floor.
    const floor = tokenFloor(maxTokens);
    const ceiling = seat.authority.budget_ceiling;
    const spent = ctx.spent(seatId);
    let want = maxTokens;
    if (ceiling !== null) {
      const granted = grantTokens(maxTokens, ceiling - spent, floor);
      if (granted === null) {
        throw refuse('budget_ceiling_exceeded', {
          seat: seatId,
          agent_id: agentId,
          ceiling,
          spent,
          requested: maxTokens,
          left: Math.max(0, ceiling - spent),
          minimum: floor,
        });
      }
      want = granted;
    }
    const budget = ctx.ports.budget;
    if (budget === undefined) throw refuse('no_budget_ledger', { agent_id: agentId, seat: seatId });
    // One attempt: reserve, journal the intent (unless the reservation is it), call; a failed call commits what it consumed and leaves as it was thrown.
    let startedAt: number | null = null;
    const once = async () => {
      const res = await budget.reserve(agentId, want, { run_id: ctx.runId, step_id: stepId }, floor);
      if (!res.ok)
        throw refuse('budget_exceeded', { agent_id: agentId, seat: seatId, ledger: res.reason, requested: want, minimum: floor });
      const reserved = res.amount ?? want;
      let attempt: JsonObject;
      try {
        // A reservation the port counts (`issued`) is the call's intent, durable before it leaves: no record.
        attempt = res.issued !== undefined ? await ctx.beginReservedCall(stepId, res.issued) : await ctx.beginCall(stepId, 'model', input);
      } catch (e) {
        await budget.commit(res.reservation_id, 0);
        throw e;
      }
      let raw: unknown;
      // Each attempt streams from index 0 (a retried answer starts over); its fragments are counted, since a
      // call that fails after part of its answer streamed consumed tokens all the same.
      const live = deltaSink(ctx, seatId, stepId);
      let fragments = 0;
      const opts: ModelCallOptions = {
        onDelta(d) {
          if (typeof d?.text === 'string' && d.text !== '') fragments++;
          live?.opts.onDelta?.(d);
        },
      };
      // A failed call is charged what it consumed (../budget.ts), in the ledger and against the seat ceiling,
      // and says so on the error (an `attempt` record under a retry policy records it).
      const failed = async (e: unknown): Promise<never> => {
        const charged = failedCallTokens(e, fragments, messages);
        await budget.commit(res.reservation_id, charged);
        if (charged > 0) {
          ctx.addSpend(seatId, charged);
          if (consumedBy(e) === null && typeof e === 'object' && e !== null && Object.isExtensible(e))
            withConsumed(e, { input_tokens: charged - fragments, output_tokens: fragments });
        }
        throw e;
      };
      // When this attempt's call started: a model call writes no intent record (its reservation is its intent),
      // so a step timeout names its start itself (the console shows the deadline from it).
      startedAt = ctx.ports.clock.now();
      try {
        raw = await model.complete(
          {
            agent: { id: agentId, seat: seatId, model: seat.model },
            messages,
            tools,
            max_tokens: reserved,
            ...(policy.timeout_ms !== undefined ? { timeout_ms: policy.timeout_ms } : {}),
            ...(toolChoice !== undefined ? { tool_choice: toolChoice } : {}),
          },
          opts,
        );
      } catch (e) {
        return failed(e);
      }
      const resp = validResponse(raw);
      if (resp === null) return failed(fail('model_error', { seat: seatId, step_id: stepId, problem: 'malformed response' }));
      live?.end(resp);
      const used = resp.usage.input_tokens + resp.usage.output_tokens;
      const wasted = failedUsageOf(raw);
      await budget.commit(res.reservation_id, used + wasted);
      if (wasted > 0) ctx.addSpend(seatId, wasted);
      return { resp, used, wasted, reserved, attempt };
    };
    let r: Awaited<ReturnType<typeof once>>;
    let tries: JsonObject;
    try {
      const a = await withAttempts(ctx, stepId, 'model', policy, input, once, modelFailureReason);
      r = a.value;
      tries = a.data;
    } catch (e) {
      if (e instanceof Stop) throw e;
      if (isEngineRefusal(e)) throw refuse(e.reason, { ...e.details, seat: seatId });
      if (isStepTimeout(e))
        throw fail(
          'step_timeout',
          { seat: seatId, step_id: stepId, timeout_ms: e.timeout_ms, ...(startedAt !== null ? { started_at: startedAt } : {}) },
          e,
        );
      const upstream = upstreamOf(e);
      throw fail('model_error', { seat: seatId, step_id: stepId, ...(upstream ? { upstream } : {}) }, e);
    }
    const { resp, used, wasted, reserved, attempt } = r;
    const unmet = toolChoiceUnmet(toolChoice, resp);
    if (unmet !== null) throw fail('model_error', { seat: seatId, step_id: stepId, problem: 'tool_choice_unmet', expected: unmet });
    // The answer is the step's output (validResponse keeps only its own fields): what failed before it is charged, not recorded as it.
    return {
      output: resp,
      data: {
        seat: seatId,
        agent_id: agentId,
        usage: used,
        ...(wasted > 0 ? { failed_usage: wasted } : {}),
        reserved,
        ...attempt,
        ...tries,
      },
    };
  });
  const resp = r.output as ModelResponse;
  ctx.addSpend(seatId, resp.usage.input_tokens + resp.usage.output_tokens);
  return resp;
}

/** What a forced tool choice expected and the answer did not give ('a tool call', or the tool's name), or null. */
function toolChoiceUnmet(choice: Exclude<ToolChoice, 'auto'> | undefined, resp: ModelResponse): string | null {
  const calls = resp.tool_calls ?? [];
  if (choice === 'required') return calls.length > 0 ? null : 'a tool call';
  if (choice === 'none') return calls.length === 0 ? null : 'no tool call';
  if (choice !== undefined) return calls.length > 0 && calls.every((c) => c.name === choice.name) ? null : choice.name;
  return null;
}

/** The retry reason of a failed model call: the provider failure's reason (a cell ServiceError), else provider_error. */
function modelFailureReason(e: unknown): string | null {
  if (isEngineRefusal(e) || isStepTimeout(e)) return null;
  const reason = upstreamOf(e)?.['reason'];
  if (reason === 'cancelled') return null;
  return typeof reason === 'string' ? reason : 'provider_error';
}

/** Text of a step input for a user message. */
export function render(input: unknown): string {
  return typeof input === 'string' ? input : JSON.stringify(input ?? null);
}
