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
import { ServiceError } from '../../core/errors.ts';
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

export function missingScope(required: readonly string[], has: (s: string) => boolean): string | undefined {
  return required.find((s) => !has(s));
}

export const endpointForbidden = (scope: string) =>
  new ServiceError('forbidden', `the credential lacks the scope ${scope} this endpoint requires`, {
    details: { reason: 'missing_scope', required_scope: scope },
  });
