/**
 * Published endpoints (spec Limits: "published notebook/compute endpoints",
 * DESIGN: /jobs/endpoints): an admin publishes a compute or notebook template
 * as an HTTP endpoint; callers invoke it with a bearer credential at
 * `POST /api/public/v1/jobs/endpoints/{endpoint_id}/invoke` and get the
 * result (mode sync, within sync_timeout_ms; otherwise 202 with the run id to
 * follow). Each invocation is a job run with a journal (source
 * `endpoint:<id>`, requester = the caller).
 *
 * Gates of an invocation, in order: gateway rate (429), authentication (401),
 * the endpoint's `required_scopes` against the caller's effective authority
 * (403), the credential's own rpm ceiling (429, as everywhere), then the
 * endpoint's own `rate_limit_rpm` token bucket (429 with
 * Retry-After; default 60/min, shared by all callers of that endpoint,
 * separate from the gateway bucket and from per-key limits), then the input
 * against `input_schema` (400).
 */
import { newId } from '../ids.ts';
import { ServiceError, invalid } from '../../core/errors.ts';
import { rateLimitHeaders, rateLimited } from '../../core/ratelimit.ts';
import type { CredentialLimits } from '../../runtime/gateway.ts';
import { isoTime } from '../../core/iso-time.ts';
import type { Endpoint } from './repository.ts';

export type { Endpoint } from './repository.ts';

export function newEndpointId(): string {
  return newId('jep');
}

export const invokePath = (id: string) => `/api/public/v1/jobs/endpoints/${id}/invoke`;

export function endpointView(e: Endpoint) {
  return {
    endpoint_id: e.endpoint_id,
    name: e.name,
    job_type: e.job_type,
    workspace_id: e.workspace_id,
    spec: e.spec,
    rate_limit_rpm: e.rate_limit_rpm,
    required_scopes: e.required_scopes,
    input_schema: e.input_schema,
    mode: e.mode,
    sync_timeout_ms: e.sync_timeout_ms,
    invoke_path: invokePath(e.endpoint_id),
    created_by: e.created_by,
    created_at: isoTime(e.created_at),
  };
}

/**
 * Takes one invocation from the endpoint's budget (capacity = rpm, refill
 * rpm/60 per second) or throws 429 with Retry-After. The budget is kept by the
 * gateway's one rpm limiter (`endpoint:<id>`), so a group of cells shares it.
 */
export async function takeEndpointBudget(limits: CredentialLimits, e: Endpoint): Promise<Record<string, string>> {
  const r = await limits.take(`endpoint:${e.endpoint_id}`, e.rate_limit_rpm);
  const headers = rateLimitHeaders(r, 'endpoint', 60);
  if (!r.allowed) throw rateLimited(r, `rate_limit_rpm of endpoint ${e.endpoint_id}`, headers);
  return headers;
}

// ------------------------------------------------------------ a JSON Schema subset for endpoint inputs

const SCHEMA_KEYS = new Set([
  'type',
  'properties',
  'required',
  'items',
  'enum',
  'minimum',
  'maximum',
  'minLength',
  'maxLength',
  'minItems',
  'maxItems',
  'additionalProperties',
  'description',
  'title',
]);

/** Checks that an input_schema uses only the supported subset (at registration). */
export function checkInputSchema(s: unknown, path = 'input_schema', depth = 0): void {
  if (depth > 16) throw invalid('input_schema is nested too deeply', { reason: 'invalid_input_schema', path });
  if (typeof s !== 'object' || s === null || Array.isArray(s))
    throw invalid(`${path} must be an object`, { reason: 'invalid_input_schema', path });
  for (const k of Object.keys(s))
    if (!SCHEMA_KEYS.has(k)) throw invalid(`${path}.${k} is not supported`, { reason: 'invalid_input_schema', path: `${path}.${k}` });
  const o = s as Record<string, unknown>;
  if (o['type'] !== undefined && !['object', 'array', 'string', 'number', 'integer', 'boolean', 'null'].includes(o['type'] as string)) {
    throw invalid(`${path}.type is not a JSON Schema type`, { reason: 'invalid_input_schema', path: `${path}.type` });
  }
  if (o['properties'] !== undefined) {
    if (typeof o['properties'] !== 'object' || o['properties'] === null)
      throw invalid(`${path}.properties must be an object`, { reason: 'invalid_input_schema', path });
    for (const [k, v] of Object.entries(o['properties'] as object)) checkInputSchema(v, `${path}.properties.${k}`, depth + 1);
  }
  if (o['items'] !== undefined) checkInputSchema(o['items'], `${path}.items`, depth + 1);
  if (o['required'] !== undefined && (!Array.isArray(o['required']) || !o['required'].every((x) => typeof x === 'string'))) {
    throw invalid(`${path}.required must be a list of names`, { reason: 'invalid_input_schema', path });
  }
}

/** Problems of `v` against the schema subset (empty when valid). */
export function inputProblems(schema: Record<string, unknown>, v: unknown, path = 'input', out: string[] = []): string[] {
  if (out.length >= 20) return out;
  const t = schema['type'];
  const typeOf = (x: unknown) => (x === null ? 'null' : Array.isArray(x) ? 'array' : typeof x);
  if (t !== undefined) {
    const ok = t === 'integer' ? Number.isInteger(v) : t === 'number' ? typeof v === 'number' && Number.isFinite(v) : typeOf(v) === t;
    if (!ok) {
      out.push(`${path}: expected ${String(t)}`);
      return out;
    }
  }
  if (Array.isArray(schema['enum']) && !schema['enum'].some((e) => JSON.stringify(e) === JSON.stringify(v)))
    out.push(`${path}: not one of the allowed values`);
  if (typeof v === 'number') {
    if (typeof schema['minimum'] === 'number' && v < schema['minimum']) out.push(`${path}: below minimum`);
    if (typeof schema['maximum'] === 'number' && v > schema['maximum']) out.push(`${path}: above maximum`);
  }
  if (typeof v === 'string') {
    if (typeof schema['minLength'] === 'number' && v.length < schema['minLength']) out.push(`${path}: shorter than minLength`);
    if (typeof schema['maxLength'] === 'number' && v.length > schema['maxLength']) out.push(`${path}: longer than maxLength`);
  }
  if (Array.isArray(v)) {
    if (typeof schema['minItems'] === 'number' && v.length < schema['minItems']) out.push(`${path}: fewer than minItems`);
    if (typeof schema['maxItems'] === 'number' && v.length > schema['maxItems']) out.push(`${path}: more than maxItems`);
    const items = schema['items'];
    if (items && typeof items === 'object') {
      for (const [i, x] of v.entries()) inputProblems(items as Record<string, unknown>, x, `${path}[${i}]`, out);
    }
  }
  if (typeOf(v) === 'object') {
    const o = v as Record<string, unknown>;
    const props = (schema['properties'] ?? {}) as Record<string, Record<string, unknown>>;
    for (const r of (schema['required'] ?? []) as string[]) if (!(r in o)) out.push(`${path}.${r}: required`);
    for (const [k, x] of Object.entries(o)) {
      if (props[k]) inputProblems(props[k], x, `${path}.${k}`, out);
      else if (schema['additionalProperties'] === false) out.push(`${path}.${k}: not allowed`);
    }
  }
  return out;
}

export function missingScope(required: readonly string[], has: (s: string) => boolean): string | undefined {
  return required.find((s) => !has(s));
}

export const endpointForbidden = (scope: string) =>
  new ServiceError('forbidden', `the credential lacks the scope ${scope} this endpoint requires`, {
    details: { reason: 'missing_scope', required_scope: scope },
  });
