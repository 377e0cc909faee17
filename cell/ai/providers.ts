/**
 * Model providers: registration (the posture allow-gate runs first and a
 * refusal is audited), reads, and the call path used by agents. The gate runs
 * again before every call, so a cell restarted under a stricter posture does
 * not use a provider its posture now forbids (fail-closed).
 */
import { ServiceError, invalid, notFound } from '../../core/errors.ts';
import type { AuthContext, Cell } from '../context.ts';
import { newId } from '../iam/ids.ts';
import { recordAuditTx } from '../iam/audit.ts';
import { chatCompletion, type ChatRequest, type ChatResult } from './openai-client.ts';
import { postureAllows, type PostureDecision } from './posture.ts';
import { mayUseSecret, readSecret, secretExists } from './secrets.ts';
import { getPrincipal, principalPermissions } from '../iam/principals.ts';
import { PERMISSIONS } from '../../core/permissions.ts';

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

export interface Provider {
  provider_id: string;
  name: string;
  provider_type: string;
  default_model: string;
  base_url: string | null;
  api_key_secret_id: string | null;
  timeout_ms: number;
  max_retries: number;
  /** 1 when answers are streamed (SQLite integer). */
  stream: number;
  created_at: number;
  created_by: string;
}

type Row = Omit<Provider, never>;

/** A local model runtime (the edge issue provides one): same shape as a chat call. */
export interface LocalModelRuntime {
  /** `opts.signal` is the caller's cancellation (a runtime may honour it; the call path also stops waiting on it). */
  complete(provider: Provider, req: ChatRequest, opts?: { signal?: AbortSignal | undefined }): Promise<ChatResult>;
}
export const LOCAL_RUNTIME_SERVICE = 'ai.local-runtime';
/** Names of local-signed models (the runtime's file names under <data>/models). */
const LOCAL_MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

export const AI_MIGRATIONS = [
  {
    id: 'ai-001-secrets',
    sql: 'CREATE TABLE ai_secrets (secret_id TEXT PRIMARY KEY, name TEXT NOT NULL, sealed BLOB NOT NULL, created_at INTEGER NOT NULL, created_by TEXT NOT NULL)',
  },
  {
    id: 'ai-002-providers',
    sql: `CREATE TABLE ai_providers (provider_id TEXT PRIMARY KEY, name TEXT NOT NULL, provider_type TEXT NOT NULL, default_model TEXT NOT NULL,
        base_url TEXT, api_key_secret_id TEXT, timeout_ms INTEGER NOT NULL, max_retries INTEGER NOT NULL,
        created_at INTEGER NOT NULL, created_by TEXT NOT NULL)`,
  },
  { id: 'ai-003-provider-stream', sql: 'ALTER TABLE ai_providers ADD COLUMN stream INTEGER NOT NULL DEFAULT 0' },
] as const;

/** Registers a provider after the posture gate; a refusal is audited and thrown. */
export async function registerProvider(cell: Cell, auth: AuthContext, input: ProviderInput): Promise<Provider> {
  const actor = auth.principal.id;
  const decision = postureAllows(cell.config.posture, { provider_type: input.provider_type, base_url: input.base_url ?? null });
  if (!decision.allowed) {
    const details = { reason: 'posture_forbidden', posture: cell.config.posture, rule: decision.rule, provider_type: input.provider_type };
    await cell.store.write((tx) => recordAuditTx(tx, {
      at: cell.clock.now(), actor, action: 'ai.provider.register', target: input.base_url ?? input.provider_type, outcome: 'refused', details,
    }));
    throw new ServiceError('forbidden', `provider refused by the deployment posture: ${decision.reason}`, { details });
  }
  if (input.provider_type === 'local-signed') {
    if (input.api_key_secret_id) throw invalid('a local-signed provider takes no api_key_secret_id', { reason: 'field_not_allowed', field: 'api_key_secret_id' });
    // The runtime (cell/edge/local-runtime.ts) finds <data>/models/<default_model>.gguf and .manifest by this name.
    if (!LOCAL_MODEL_NAME.test(input.default_model)) throw invalid('a local-signed default_model is a file name: letters, digits, dot, dash, underscore', { reason: 'bad_model_name', field: 'default_model' });
  }
  if (input.api_key_secret_id && !secretExists(cell, input.api_key_secret_id)) {
    throw invalid('api_key_secret_id names no stored secret', { reason: 'unknown_secret', field: 'api_key_secret_id' });
  }
  // Binding a secret sends it to base_url: only its creator, or a holder of secrets.use, may.
  if (input.api_key_secret_id && !mayUseSecret(cell, actor, auth.effective, input.api_key_secret_id)) {
    const details = { reason: 'secret_not_usable', field: 'api_key_secret_id', required_permission: PERMISSIONS.secretsUse };
    await cell.store.write((tx) => recordAuditTx(tx, {
      at: cell.clock.now(), actor, action: 'ai.provider.register', target: input.api_key_secret_id!, outcome: 'refused', details,
    }));
    throw new ServiceError('forbidden', 'the caller may not use this secret: it is not theirs and they lack secrets.use', { details });
  }
  const p: Provider = {
    provider_id: newId('prv'),
    name: input.name ?? `${input.provider_type}:${input.default_model}`,
    provider_type: input.provider_type,
    default_model: input.default_model,
    base_url: input.base_url ?? null,
    api_key_secret_id: input.api_key_secret_id ?? null,
    timeout_ms: input.timeout_ms ?? 60_000,
    max_retries: input.max_retries ?? 2,
    stream: input.stream ? 1 : 0,
    created_at: cell.clock.now(),
    created_by: actor,
  };
  await cell.store.write((tx) => {
    tx.run(`INSERT INTO ai_providers (provider_id, name, provider_type, default_model, base_url, api_key_secret_id, timeout_ms, max_retries, stream, created_at, created_by)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [p.provider_id, p.name, p.provider_type, p.default_model, p.base_url, p.api_key_secret_id, p.timeout_ms, p.max_retries, p.stream, p.created_at, p.created_by]);
    recordAuditTx(tx, { at: p.created_at, actor, action: 'ai.provider.register', target: p.provider_id, outcome: 'ok', details: { rule: decision.rule } });
  });
  return p;
}

export function getProvider(cell: Cell, id: string): Provider | undefined {
  return cell.store.get<Row & Record<string, never>>('SELECT * FROM ai_providers WHERE provider_id = ?', [id]) as Provider | undefined;
}

export function listProviders(cell: Cell, limit = 1000, offset = 0): Provider[] {
  return cell.store.all('SELECT * FROM ai_providers ORDER BY created_at, provider_id LIMIT ? OFFSET ?', [limit, offset]) as unknown as Provider[];
}

export function providerView(cell: Cell, p: Provider) {
  const d: PostureDecision = postureAllows(cell.config.posture, p);
  return {
    provider_id: p.provider_id, name: p.name, provider_type: p.provider_type, default_model: p.default_model,
    base_url: p.base_url, api_key_secret_id: p.api_key_secret_id, timeout_ms: p.timeout_ms, max_retries: p.max_retries,
    stream: p.stream === 1,
    posture: { posture: cell.config.posture, allowed: d.allowed, rule: d.rule },
    created_at: new Date(p.created_at).toISOString(), created_by: p.created_by,
  };
}

/**
 * Calls a provider's model; the posture gate is re-checked first (fail-closed).
 * `opts.signal` (the run's cancellation) interrupts the call in flight and its
 * retries/backoff at once (failure reason `cancelled`).
 */
export async function callProvider(cell: Cell, providerId: string, req: Omit<ChatRequest, 'model'> & { model?: string }, opts: { signal?: AbortSignal | undefined } = {}): Promise<ChatResult> {
  const p = getProvider(cell, providerId);
  if (!p) throw notFound('model provider');
  const d = postureAllows(cell.config.posture, p);
  if (!d.allowed) {
    throw new ServiceError('forbidden', `provider refused by the deployment posture: ${d.reason}`, { details: { reason: 'posture_forbidden', posture: cell.config.posture, rule: d.rule } });
  }
  const body: ChatRequest = { ...req, model: req.model ?? p.default_model };
  if (p.provider_type === 'local-signed') {
    const rt = cell.services.get(LOCAL_RUNTIME_SERVICE) as LocalModelRuntime | undefined;
    if (!rt) throw new ServiceError('service_unavailable', 'no local model runtime on this cell', { details: { reason: 'runtime_unavailable', provider_type: 'local-signed' } });
    return opts.signal ? raceAbort(rt.complete(p, body, { signal: opts.signal }), opts.signal) : rt.complete(p, body);
  }
  if (p.api_key_secret_id) {
    // Checked again at every call: the registrant must still be active and still entitled to the secret.
    const who = getPrincipal(cell, p.created_by);
    if (!who || who.status !== 'active' || !mayUseSecret(cell, who.id, principalPermissions(cell, who), p.api_key_secret_id)) {
      throw new ServiceError('forbidden', 'the provider\'s registrant may no longer use its secret', { details: { reason: 'secret_not_usable', provider_id: p.provider_id } });
    }
  }
  const apiKey = p.api_key_secret_id ? readSecret(cell, p.api_key_secret_id) : undefined;
  return chatCompletion({
    baseUrl: p.base_url!, apiKey, headersTimeoutMs: p.timeout_ms, bodyTimeoutMs: p.timeout_ms, retries: p.max_retries, stream: p.stream === 1,
    signal: opts.signal,
  }, body);
}

/** Stops waiting on `p` when `signal` aborts (a runtime that ignores the signal cannot hold a cancel). */
function raceAbort<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  const cancelled = () => new ServiceError('service_unavailable', 'the model call was cancelled', { details: { reason: 'cancelled' } });
  if (signal.aborted) return Promise.reject(cancelled());
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(cancelled());
    signal.addEventListener('abort', onAbort, { once: true });
    p.then((v) => { signal.removeEventListener('abort', onAbort); resolve(v); }, (e: unknown) => { signal.removeEventListener('abort', onAbort); reject(e); });
  });
}

/** Agent runtimes this cell can run (GET /admin/ai/agent-runtimes). */
export function agentRuntimes(cell: Cell) {
  return [
    { runtime: 'openai-compatible', provider_type: 'openai-compatible', available: true, protocol: 'chat-completions', streaming: false, tool_calls: true },
    { runtime: 'local-signed', provider_type: 'local-signed', available: cell.services.has(LOCAL_RUNTIME_SERVICE), protocol: 'local', streaming: false, tool_calls: true },
  ];
}
