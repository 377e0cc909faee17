/**
 * The AI module's API, as the other modules use it: model providers (read
 * one, list them oldest first), the call path (posture gate, registrant's
 * right to its secret, the OpenAI-compatible client or the local runtime),
 * and the engine's model port over it (`modelPort`, `complete`: the engine's
 * request and answer, its refusals as EngineRefusal), which crew runs and
 * agent job runs hand the engine as it is.
 *
 * This is the module's face (docs/architecture.md, "Faces"): another module of
 * cell/ imports the ai module only from here.
 */
import type { ModelCallOptions, ModelPort, ModelRequest, ModelResponse } from '../../core/engine/types.ts';
import { complete, meteredCall } from './complete.ts';
import type { ChatResult } from './openai-client.ts';
import {
  agentRuntimes,
  type AgentLookup,
  type AgentRuntime,
  type AiContext,
  type CallOptions,
  type ProviderRequest,
  type ProviderReachHook,
  type ProviderUsersHook,
} from './providers.ts';
import { listProviders, providerById, type Provider } from './repository.ts';

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

  /**
   * One chat completion on a provider's model (`req.model` defaults to its
   * default_model). Refusals leave as ServiceError `forbidden`
   * (posture_forbidden, secret_not_usable), failures as `service_unavailable`
   * (provider_*, runtime_unavailable, secret_missing, cancelled), an unknown
   * provider as `not_found`. `opts.signal` interrupts the call (the run's cancel);
   * `opts.onDelta` receives the answer as it streams (a provider with `stream: true`, the local runtime).
   */
  call(providerId: string, req: ProviderRequest, opts: CallOptions = {}): Promise<ChatResult> {
    return meteredCall(this.ctx, providerId, req, opts);
  }

  /**
   * One model call of the engine (core/engine/types.ts ModelPort): the seat's
   * agent names the provider (else the oldest is called: `no_provider` when
   * there is none, `agent_unknown` for an agent no longer known), the request
   * leaves in the OpenAI wire shape through `call`, the answer and its live
   * fragments (`opts.onDelta`) come back as the engine's. A `forbidden` of the
   * call path is thrown as EngineRefusal with its reason (posture_forbidden,
   * secret_not_usable), the step's `timeout_ms` passed as StepTimeout, any
   * other failure as it is. `runId`: the run it is made for (see `modelPort`).
   */
  complete(req: ModelRequest, opts?: ModelCallOptions, runId?: string): Promise<ModelResponse> {
    return complete(this.ctx, req, opts, runId);
  }

  /**
   * The engine's model port for a run: `complete` with the run's id, so each
   * call carries the abort signal of this process's driver of the run (a
   * cancel interrupts a slow provider at once) and a store outage before its
   * request leaves is waited out rather than taken for a call in flight.
   */
  modelPort(runId: string): ModelPort {
    const { ctx } = this;
    return { complete: (req, opts) => complete(ctx, req, opts, runId) };
  }

  /** Registers who agents are (Agent Teams, once): the engine's model calls name an agent, whose provider they call. */
  resolveAgentsWith(lookup: AgentLookup): void {
    if (this.ctx.agents !== undefined) throw new TypeError('the agents of model calls are resolved by one module');
    this.ctx.agents = lookup;
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

/** The provider secrets as witnesses of the group's secrets key, for a store from before the key check (cell/custody). */
export { secretWitnesses } from './secrets.ts';
/**
 * @deprecated The secrets key and sealing as the ai module offered them before the custody module
 * (`sealSecret(key, aad, value)`, `openSecret(key, aad, sealed)`, `readSecretsKeyFile`,
 * `secretsKeyLoader(config)`, `keyMatchesStore(core, key)`): the custody module's, same signatures,
 * for branches written against them. New code takes them, or the `Custody` instance, from cell/custody/api.ts.
 */
export { keyMatchesStore, openSecret, readSecretsKeyFile, sealSecret, secretsKeyLoader } from '../custody/api.ts';
