/**
 * Model providers: registration (the posture allow-gate runs first and a
 * refusal is audited), reads, and the call path used by agents. The gate runs
 * again before every call, so a cell restarted under a stricter posture does
 * not use a provider its posture now forbids (fail-closed).
 */
import { ServiceError, invalid, notFound } from '../../core/errors.ts';
import { isoTime } from '../../core/iso-time.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import type { Posture } from '../config.ts';
import type { AuthContext, CellCore } from '../context.ts';
import type { Custody } from '../custody/api.ts';
import { callerHolding, type Iam, type Reached } from '../iam/api.ts';
import type { CellMetrics } from '../ops/api.ts';
import type { Runs } from '../runs/api.ts';
import type { Reader } from '../store/types.ts';
import { newId } from '../ids.ts';
import { chatCompletion, type ChatDelta, type ChatRequest, type ChatResult } from './openai-client.ts';
import { postureAllows } from './posture.ts';
import { chatSpan } from './chat-span.ts';
import { insertProvider, providerById, secretCreator, secretForCall, type Provider, type SecretForCall } from './repository.ts';
import { mayUseSecret, mayUseSecretAs, readSecret } from './secrets.ts';
import type { ChangeCache } from '../store/change-cache.ts';

export type { Provider } from './repository.ts';

/** A local model runtime (local-runtime.ts provides one): same shape as a chat call. */
export interface LocalModelRuntime {
  /**
   * `opts.signal` is the caller's cancellation (a runtime may honour it; the call path also stops waiting on it);
   * `opts.onDelta` receives the answer's text as it is generated.
   */
  complete(provider: Provider, req: ChatRequest, opts?: CallOptions): Promise<ChatResult>;
  /** Releases loaded models; the AI module calls it when the cell stops. */
  dispose?(): Promise<void>;
}

/**
 * Options of one model call: the caller's cancellation, a receiver of the answer as it streams (live
 * tokens), and the agent it is made for (spans, metrics).
 */
export interface CallOptions {
  signal?: AbortSignal | undefined;
  onDelta?: ((d: ChatDelta) => void) | undefined;
  agent?: { id: string; name: string } | undefined;
  /** The provider's row as the caller read it for this very call (the default provider's lookup): not read again. */
  provider?: Provider | undefined;
}

/** What a model call of the engine needs of the seat's agent: its provider (none: the oldest) and its name (spans, metrics). */
export interface ModelAgent {
  agent_id: string;
  name: string;
  provider_id: string | null;
}

/** Who an agent is, by id (Agent Teams owns agents); undefined for none. */
export type AgentLookup = (agentId: string) => Promise<ModelAgent | undefined>;

/** What the AI module's functions work with: the core, IAM, the runs' drivers, the optional local runtime, the secrets key. */
export interface AiContext {
  core: CellCore;
  iam: Iam;
  /** The drivers of runs in this process: a model call of a run takes its driver's signal and waits out a store outage. */
  runs: Pick<Runs, 'beforeItLeaves' | 'driverSignal'>;
  /** Who the agent of a model call is (Agent Teams, `Ai.resolveAgentsWith`); unset, every engine call is refused agent_unknown. */
  agents: AgentLookup | undefined;
  /** The runtime of `local-signed` providers, when the wiring has one (node-llama-cpp installed). */
  localRuntime: LocalModelRuntime | undefined;
  /** The group's secrets key (proven at start) and sealing under it: provider secrets are sealed with it. */
  custody: Custody;
  /** The cell's metrics (model calls, latency, tokens by provider). */
  metrics: CellMetrics;
  /** Other modules' users of a provider (Agent Teams: agents that name it), which refuse its delete. */
  providerUserHooks: ProviderUsersHook[];
  /** Other modules' agents that call a provider (Agent Teams), which a change of its destination reaches. */
  providerReachHooks: ProviderReachHook[];
  /**
   * What every model call reads, kept while the store says nothing changed
   * (store/change-cache.ts: emptied by any write to the table, on this cell at
   * once and on the group's others when they hear it): providers by id, and
   * secrets (who stored them, sealed) by id. Never the plaintext.
   */
  callCache: { providers: ChangeCache<string, Provider | null>; secrets: ChangeCache<string, SecretForCall | null> };
}

/** The agents calling a provider (`isDefault`: it is the oldest, which agents naming none call). */
export type ProviderReachHook = (db: Reader, providerId: string, isDefault: boolean) => Promise<Reached[]>;

/** Names users of a provider by kind (e.g. `{ agents: [...] }`), read through `db` (the delete's transaction). */
export type ProviderUsersHook = (db: Reader, providerId: string) => Promise<Record<string, string[]>>;

export interface ProviderInput {
  provider_type: string;
  default_model: string;
  base_url?: string | undefined;
  api_key_secret_id?: string | undefined;
  name?: string | undefined;
  timeout_ms?: number | undefined;
  max_retries?: number | undefined;
  /** Ask the provider for streamed answers (assembled before use); default false. */
  stream?: boolean | undefined;
}

/** Names of local-signed models (the runtime's file names under <data>/models). */
export const LOCAL_MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

/** Registers a provider after the posture gate; a refusal is audited and thrown. */
export async function registerProvider(ctx: AiContext, auth: AuthContext, input: ProviderInput): Promise<Provider> {
  const { core, iam } = ctx;
  const actor = auth.principal.id;
  const posture = core.config.posture;
  const decision = postureAllows(posture, { provider_type: input.provider_type, base_url: input.base_url ?? null });
  if (!decision.allowed) {
    const details = { reason: 'posture_forbidden' as const, posture, rule: decision.rule, provider_type: input.provider_type };
    await iam.auditNow({
      actor,
      action: 'ai.provider.register',
      target: input.base_url ?? input.provider_type,
      outcome: 'refused',
      details,
    });
    throw new ServiceError('forbidden', `provider refused by the deployment posture: ${decision.reason}`, { details });
  }
  if (input.provider_type === 'local-signed') {
    if (input.api_key_secret_id)
      throw invalid('a local-signed provider takes no api_key_secret_id', { reason: 'field_not_allowed', field: 'api_key_secret_id' });
    // The runtime (local-runtime.ts) finds <data>/models/<default_model>.gguf and .manifest by this name.
    if (!LOCAL_MODEL_NAME.test(input.default_model))
      throw invalid('a local-signed default_model is a file name: letters, digits, dot, dash, underscore', {
        reason: 'bad_model_name',
        field: 'default_model',
      });
  }
  const secretId = input.api_key_secret_id;
  if (secretId !== undefined) {
    if ((await secretCreator(core.store, secretId)) === undefined) {
      throw invalid('api_key_secret_id names no stored secret', { reason: 'unknown_secret', field: 'api_key_secret_id' });
    }
    // Binding a secret sends it to base_url: only a caller with the right to act on it (its creator's own
    // credential with secrets.write, or secrets.use and managing the creator) may.
    if (!(await mayUseSecret(core.store, iam, { principalId: actor, holding: callerHolding(auth) }, secretId))) {
      const details = { reason: 'secret_not_usable' as const, field: 'api_key_secret_id', required_permission: PERMISSIONS.secretsUse };
      await iam.auditNow({ actor, action: 'ai.provider.register', target: secretId, outcome: 'refused', details });
      throw new ServiceError('forbidden', 'the caller may not use this secret: the calling credential has no right to act on it', {
        details,
      });
    }
  }
  const now = core.clock.now();
  const p: Provider = {
    provider_id: newId('prv'),
    name: input.name ?? `${input.provider_type}:${input.default_model}`,
    provider_type: input.provider_type,
    default_model: input.default_model,
    base_url: input.base_url ?? null,
    api_key_secret_id: secretId ?? null,
    timeout_ms: input.timeout_ms ?? 60_000,
    max_retries: input.max_retries ?? 2,
    stream: input.stream ?? false,
    created_at: now,
    created_by: actor,
    updated_at: now,
    bound_by: actor,
  };
  await core.store.write(async (tx) => {
    // Again inside the transaction: a secret deleted meanwhile is never bound (its delete checks for providers in its own).
    if (secretId !== undefined && (await secretCreator(tx, secretId)) === undefined)
      throw invalid('api_key_secret_id names no stored secret', { reason: 'unknown_secret', field: 'api_key_secret_id' });
    await insertProvider(tx, p);
    await iam.audit(tx, {
      at: p.created_at,
      actor,
      action: 'ai.provider.register',
      target: p.provider_id,
      outcome: 'ok',
      details: { rule: decision.rule },
    });
  });
  return p;
}

/** The provider's public view, with its standing under the current posture. */
export function providerView(posture: Posture, p: Provider) {
  const d = postureAllows(posture, p);
  return {
    provider_id: p.provider_id,
    name: p.name,
    provider_type: p.provider_type,
    default_model: p.default_model,
    base_url: p.base_url,
    api_key_secret_id: p.api_key_secret_id,
    timeout_ms: p.timeout_ms,
    max_retries: p.max_retries,
    stream: p.stream,
    posture: { posture, allowed: d.allowed, rule: d.rule },
    created_at: isoTime(p.created_at),
    created_by: p.created_by,
    updated_at: isoTime(p.updated_at),
    secret_bound_by: p.api_key_secret_id === null ? null : p.bound_by,
  };
}

/** A chat request whose model defaults to the provider's `default_model`. */
export type ProviderRequest = Omit<ChatRequest, 'model'> & { model?: string };

/**
 * Calls a provider's model; the posture gate is re-checked first (fail-closed).
 * `opts.signal` (the run's cancellation) interrupts the call in flight and its
 * retries/backoff at once (failure reason `cancelled`).
 */
export async function callProvider(ctx: AiContext, providerId: string, req: ProviderRequest, opts: CallOptions = {}): Promise<ChatResult> {
  const { core } = ctx;
  const p =
    opts.provider?.provider_id === providerId
      ? opts.provider
      : await ctx.callCache.providers.read(providerId, async () => (await providerById(core.store, providerId)) ?? null);
  if (!p) throw notFound('model provider');
  const posture = core.config.posture;
  const d = postureAllows(posture, p);
  if (!d.allowed) {
    throw new ServiceError('forbidden', `provider refused by the deployment posture: ${d.reason}`, {
      details: { reason: 'posture_forbidden', posture, rule: d.rule },
    });
  }
  const body: ChatRequest = { ...req, model: req.model ?? p.default_model };
  // The model call's span (OpenTelemetry GenAI conventions: cell/ai/chat-span.ts); the provider is sent its id as traceparent.
  if (core.traces.spans) return chatSpan(core.traces, p, body, opts.agent, () => callModel(ctx, p, body, opts));
  return callModel(ctx, p, body, opts);
}

async function callModel(ctx: AiContext, p: Provider, body: ChatRequest, opts: CallOptions): Promise<ChatResult> {
  const { core, iam } = ctx;
  if (p.provider_type === 'local-signed') {
    const rt = ctx.localRuntime;
    if (!rt)
      throw new ServiceError('service_unavailable', 'no local model runtime on this cell', {
        details: { reason: 'runtime_unavailable', provider_type: 'local-signed' },
      });
    const local = { ...(opts.signal ? { signal: opts.signal } : {}), ...(opts.onDelta ? { onDelta: opts.onDelta } : {}) };
    return opts.signal ? raceAbort(rt.complete(p, body, local), opts.signal) : rt.complete(p, body, local);
  }
  let apiKey: string | undefined;
  if (p.api_key_secret_id) {
    // Checked again at every call: whoever bound the secret to this base_url (the registrant, or the principal
    // that last changed either) must still be active and still entitled to the secret. The secret's row is read
    // meanwhile (who stored it, the sealed value: one read, kept while the table does not change) and opened
    // only once the check passed.
    const secretId = p.api_key_secret_id;
    const secret = ctx.callCache.secrets.read(secretId, async () => (await secretForCall(core.store, secretId)) ?? null);
    secret.catch(() => undefined);
    const who = await iam.principal(p.bound_by);
    const row = who?.status === 'active' ? await secret : null;
    if (
      !who ||
      !row ||
      !(await mayUseSecretAs(iam, { principalId: who.id, holding: await iam.authorityOf(who) }, secretId, row.createdBy))
    ) {
      throw new ServiceError('forbidden', "the provider's registrant may no longer use its secret", {
        details: { reason: 'secret_not_usable', provider_id: p.provider_id },
      });
    }
    apiKey = await readSecret(ctx, secretId, Promise.resolve(row));
  }
  return chatCompletion(
    {
      baseUrl: p.base_url!,
      apiKey,
      headersTimeoutMs: p.timeout_ms,
      bodyTimeoutMs: p.timeout_ms,
      retries: p.max_retries,
      stream: p.stream,
      signal: opts.signal,
      onDelta: opts.onDelta,
      traceparent: core.traces.outgoing(),
    },
    body,
  );
}

/** Stops waiting on `p` when `signal` aborts (a runtime that ignores the signal cannot hold a cancel). */
function raceAbort<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  const cancelled = () => new ServiceError('service_unavailable', 'the model call was cancelled', { details: { reason: 'cancelled' } });
  if (signal.aborted) return Promise.reject(cancelled());
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(cancelled());
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

/** An agent runtime this cell can run, as GET /admin/ai/agent-runtimes shows it. */
export interface AgentRuntime {
  runtime: string;
  provider_type: string;
  available: boolean;
  protocol: string;
  streaming: boolean;
  /** True when the runtime's models answer with tool calls. */
  tool_calls: boolean;
  /** The `tool_choice` values it honours (`named`: one named tool): a billet's choice is sent as it is. */
  tool_choice: ('auto' | 'none' | 'required' | 'named')[];
  /** True when its tool calls always parse (generated under a grammar of the tool's schema). */
  constrained_tool_calls: boolean;
}

/** Agent runtimes this cell can run (GET /admin/ai/agent-runtimes). */
export function agentRuntimes(ctx: AiContext): AgentRuntime[] {
  return [
    {
      runtime: 'openai-compatible',
      provider_type: 'openai-compatible',
      available: true,
      protocol: 'chat-completions',
      streaming: true,
      tool_calls: true,
      // Sent as the protocol's tool_choice; whether a provider honours it is the provider's (the engine checks the answer).
      tool_choice: ['auto', 'none', 'required', 'named'],
      constrained_tool_calls: false,
    },
    {
      runtime: 'local-signed',
      provider_type: 'local-signed',
      available: ctx.localRuntime !== undefined,
      protocol: 'local',
      streaming: true,
      // node-llama-cpp's function calling under a grammar of each tool's schema; a forced choice starts the answer
      // inside a call (runtime/local-chat.ts), so required and named calls always come, and always parse.
      tool_calls: true,
      tool_choice: ['auto', 'none', 'required', 'named'],
      constrained_tool_calls: true,
    },
  ];
}
