/**
 * The AI module's API, as the other modules use it: model providers (read
 * one, list them oldest first) and the call path (posture gate, registrant's
 * right to its secret, the OpenAI-compatible client or the local runtime).
 * Agent Teams' model port calls models only through `call`.
 */
import { isServiceError } from '../../core/errors.ts';
import type { ChatResult } from './openai-client.ts';
import {
  agentRuntimes,
  callProvider,
  type AgentRuntime,
  type AiContext,
  type CallOptions,
  type ProviderRequest,
  type ProviderReachHook,
  type ProviderUsersHook,
} from './providers.ts';
import { listProviders, providerById, type Provider } from './repository.ts';

/** The key of the oldest provider in AiContext.callCache.providers (no provider id has it: ids are `prv_…`). */
const DEFAULT_PROVIDER = '';

export class Ai {
  constructor(private readonly ctx: AiContext) {}

  /** The provider, or undefined. */
  provider(id: string): Promise<Provider | undefined> {
    return providerById(this.ctx.core.store, id);
  }

  /** Providers in registration order (oldest first). */
  providers(limit: number, offset = 0): Promise<Provider[]> {
    return listProviders(this.ctx.core.store, limit, offset);
  }

  /** The oldest provider (the one an agent that names none calls), or undefined; kept while `ai_providers` does not change. */
  async defaultProvider(): Promise<Provider | undefined> {
    const { core, callCache } = this.ctx;
    return (await callCache.providers.read(DEFAULT_PROVIDER, async () => (await listProviders(core.store, 1, 0))[0] ?? null)) ?? undefined;
  }

  /**
   * One chat completion on a provider's model (`req.model` defaults to its
   * default_model). Refusals leave as ServiceError `forbidden`
   * (posture_forbidden, secret_not_usable), failures as `service_unavailable`
   * (provider_*, runtime_unavailable, secret_missing, cancelled), an unknown
   * provider as `not_found`. `opts.signal` interrupts the call (the run's cancel);
   * `opts.onDelta` receives the answer as it streams (a provider with `stream: true`, the local runtime).
   */
  async call(providerId: string, req: ProviderRequest, opts: CallOptions = {}): Promise<ChatResult> {
    const m = this.ctx.metrics;
    const start = performance.now();
    try {
      const result = await callProvider(this.ctx, providerId, req, opts);
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

  /** Registers another module's users of providers: a provider they use is not deleted (409 in_use). */
  onProviderUsers(hook: ProviderUsersHook): void {
    this.ctx.providerUserHooks.push(hook);
  }

  /** Registers another module's callers of providers: a change of a provider's destination must cover them. */
  onProviderReach(hook: ProviderReachHook): void {
    this.ctx.providerReachHooks.push(hook);
  }

  /** Agent runtimes this cell can run. */
  runtimes(): AgentRuntime[] {
    return agentRuntimes(this.ctx);
  }
}
