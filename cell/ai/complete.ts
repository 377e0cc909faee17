/**
 * The AI module's call path as its callers use it: one model call, measured
 * (the cell's metrics: calls by outcome, latency, tokens by provider and by
 * agent), and one model call in the engine's language (core/engine/types.ts
 * ModelPort), which crew runs and agent job runs hand the engine as their
 * model port (`Ai.modelPort`).
 *
 * In the engine's language: the seat's agent (Agent Teams answers who it is,
 * `Ai.resolveAgentsWith`) names the provider, else the oldest is called; the
 * request goes out in the OpenAI wire shape (internal/engine-wire.ts); the
 * answer and its live fragments come back as the engine's. The call path's
 * refusals (ServiceError `forbidden`: posture_forbidden, secret_not_usable)
 * become EngineRefusals with the same reason and details, the step's timeout
 * a StepTimeout; every other failure is thrown as it is (the run fails
 * model_error with the call path's reason).
 */
import { EngineRefusal } from '../../core/engine/refusal.ts';
import { StepTimeout } from '../../core/engine/timeout.ts';
import type { ModelCallOptions, ModelRequest, ModelResponse } from '../../core/engine/types.ts';
import { isServiceError } from '../../core/errors.ts';
import type { JsonObject } from '../../core/journal/record.ts';
import { relayedReason } from '../../core/reasons.ts';
import { stepDeadline } from '../../runtime/step-deadline.ts';
import { engineDeltas, engineResponse, wireMessages, wireToolChoice, wireTools } from './internal/engine-wire.ts';
import type { ChatResult } from './openai-client.ts';
import { callProvider, type AiContext, type CallOptions, type ProviderRequest } from './providers.ts';
import { listProviders, type Provider } from './repository.ts';

/** The key of the oldest provider in AiContext.callCache.providers (no provider id has it: ids are `prv_…`). */
const DEFAULT_PROVIDER = '';

/**
 * One chat completion on a provider's model, counted in the cell's metrics (see Ai.call).
 */
export async function meteredCall(ctx: AiContext, providerId: string, req: ProviderRequest, opts: CallOptions = {}): Promise<ChatResult> {
  const m = ctx.metrics;
  const start = performance.now();
  try {
    const result = await callProvider(ctx, providerId, req, opts);
    m.modelCalls.inc({ provider: providerId, outcome: 'ok' });
    m.modelTokens.inc({ provider: providerId, kind: 'prompt' }, result.usage.prompt_tokens);
    m.modelTokens.inc({ provider: providerId, kind: 'completion' }, result.usage.completion_tokens);
    if (opts.agent) m.agentTokens(opts.agent.id, result.usage.prompt_tokens, result.usage.completion_tokens);
    return result;
  } catch (err) {
    const reason = isServiceError(err) ? err.details?.['reason'] : undefined;
    m.modelCalls.inc({ provider: providerId, outcome: typeof reason === 'string' ? reason : 'error' });
    throw err;
  } finally {
    m.modelDuration.observe({ provider: providerId }, (performance.now() - start) / 1000);
  }
}

/**
 * One model call of the engine (see Ai.complete). With `runId`, the call
 * carries the abort signal of this process's driver of the run, so a cancel
 * interrupts a slow provider at once (the engine then ends the run
 * `cancelled`), and a store outage before its request leaves is waited out.
 */
export function complete(
  ctx: AiContext,
  req: ModelRequest,
  opts: ModelCallOptions | undefined,
  runId: string | undefined,
): Promise<ModelResponse> {
  // Every store read of the call comes before its request leaves (the agent, the provider and its secret are
  // read first): a store outage meanwhile is waited out here, not taken for a call in flight.
  return runId === undefined
    ? completeOnce(ctx, req, opts, undefined)
    : ctx.runs.beforeItLeaves(runId, () => completeOnce(ctx, req, opts, runId));
}

async function completeOnce(
  ctx: AiContext,
  req: ModelRequest,
  opts: ModelCallOptions | undefined,
  runId: string | undefined,
): Promise<ModelResponse> {
  const agent = await ctx.agents?.(req.agent.id);
  if (!agent) throw new EngineRefusal('agent_unknown', 'the seat has no agent', { agent_id: req.agent.id });
  // The agent's own provider, else the oldest registered (then with its row as just read, which the call uses
  // rather than reading it again).
  let providerId = agent.provider_id;
  let row: Provider | undefined;
  if (!providerId) {
    row = await defaultProvider(ctx);
    if (!row) throw new EngineRefusal('no_provider', 'no model provider is registered', { agent_id: agent.agent_id });
    providerId = row.provider_id;
  }
  const messages = wireMessages(req.messages);
  const tools = wireTools(req.tools);
  const toolChoice = wireToolChoice(req.tool_choice);
  // The step's timeout cancels the call in flight (the provider sees its connection closed).
  const deadline = stepDeadline(req.timeout_ms, runId === undefined ? undefined : ctx.runs.driverSignal(runId));
  const signal = deadline.signal;
  try {
    const r = await meteredCall(
      ctx,
      providerId,
      {
        ...(req.agent.model ? { model: req.agent.model } : {}),
        messages,
        ...(tools.length ? { tools } : {}),
        ...(toolChoice !== undefined ? { tool_choice: toolChoice } : {}),
        max_tokens: req.max_tokens,
      },
      {
        signal,
        onDelta: engineDeltas(opts?.onDelta),
        agent: { id: agent.agent_id, name: agent.name },
        ...(row ? { provider: row } : {}),
      },
    );
    return engineResponse(r);
  } catch (e) {
    if (deadline.timedOut()) throw new StepTimeout(req.timeout_ms!);
    if (isServiceError(e) && e.code === 'forbidden')
      throw new EngineRefusal(relayedReason(e, 'posture_forbidden'), e.message, { ...(e.details ?? {}) } as JsonObject);
    throw e;
  } finally {
    deadline.release();
  }
}

/** The oldest provider (the one an agent that names none calls), or undefined; kept while `ai_providers` does not change. */
async function defaultProvider(ctx: AiContext): Promise<Provider | undefined> {
  const { core, callCache } = ctx;
  return (await callCache.providers.read(DEFAULT_PROVIDER, async () => (await listProviders(core.store, 1, 0))[0] ?? null)) ?? undefined;
}
