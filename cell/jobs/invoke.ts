/**
 * Invoking a published endpoint, one implementation for every way in: the
 * HTTP route (`POST /api/public/v1/jobs/endpoints/{id}/invoke`) and the MCP
 * endpoint's tools (cell/mcp). Who may call an endpoint (`endpointRefusal`)
 * is also what MCP's `tools/list` shows: an endpoint is listed exactly when
 * its invocation would pass these checks.
 *
 * Gates, in order (the caller's own rpm ceiling is the way in's: the route
 * takes it with the endpoint's first required scope, /mcp once per request):
 * the publisher still active and holding jobs write (403 publisher_inactive),
 * the endpoint's required_scopes in the caller's effective authority (403
 * missing_scope), the endpoint's own rate budget (429), the input against its
 * input_schema (400 invalid_input), the job spec (400), then the run is
 * submitted with the caller as its requester.
 */
import { grants } from '../../core/authority/scopes.ts';
import { ServiceError, invalid, notFound } from '../../core/errors.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import { inputProblems } from '../../core/input-schema/problems.ts';
import type { CredentialLimits } from '../../runtime/gateway.ts';
import type { AuthContext } from '../context.ts';
import type { DriveResult, Run } from '../runs/api.ts';
import type { JobsContext } from './context.ts';
import { endpointForbidden, missingScope, takeEndpointBudget, type Endpoint } from './endpoints.ts';
import * as repo from './repository.ts';
import { parseRunSpec, submitJobRun } from './runner.ts';

/** A published endpoint (unpublished ones are not found). */
export async function endpointOr404(ctx: JobsContext, endpointId: string): Promise<Endpoint> {
  const e = await repo.endpointById(ctx.core.store, endpointId);
  if (!e) throw notFound('endpoint');
  return e;
}

/** Why `auth` may not call `e` now (the refusal the invocation answers), or null when it may. */
export async function endpointRefusal(ctx: JobsContext, auth: AuthContext, e: Endpoint): Promise<ServiceError | null> {
  // An endpoint acts on its publisher's authority: only while the publisher is active and may still run jobs.
  const publisher = await ctx.iam.principal(e.created_by);
  if (publisher?.status !== 'active' || !grants(await ctx.iam.permissionsOf(publisher), PERMISSIONS.jobsWrite)) {
    return new ServiceError('forbidden', "this endpoint's publisher may no longer run jobs; the endpoint is suspended", {
      details: { reason: 'publisher_inactive' },
    });
  }
  const lacking = missingScope(e.required_scopes, (s) => grants(auth.effective, s));
  return lacking === undefined ? null : endpointForbidden(lacking);
}

/** The published endpoints `auth` may call now, in publication order (at most `max`). */
export async function callableEndpoints(ctx: JobsContext, auth: AuthContext, max = 1000): Promise<Endpoint[]> {
  const out: Endpoint[] = [];
  for (let offset = 0; out.length < max; offset += 200) {
    const { items } = await repo.listEndpoints(ctx.core.store, 200, offset);
    for (const e of items) if (out.length < max && (await endpointRefusal(ctx, auth, e)) === null) out.push(e);
    if (items.length < 200) break;
  }
  return out;
}

/**
 * Runs `e` for `auth` with `input`, after the endpoint's budget and input
 * checks (the caller checked `endpointRefusal`). Returns the run as recorded
 * and `done`, which resolves when its drive stops.
 */
export async function invokeEndpoint(
  ctx: JobsContext,
  auth: AuthContext,
  limits: CredentialLimits,
  e: Endpoint,
  input: unknown,
): Promise<{ run_id: string; run: Run; done: Promise<DriveResult>; headers: Record<string, string> }> {
  const headers = await takeEndpointBudget(limits, e);
  if (e.input_schema) {
    const problems = inputProblems(e.input_schema, input);
    if (problems.length) throw invalid("the input does not match the endpoint's input_schema", { reason: 'invalid_input', problems });
  }
  const spec = parseRunSpec(ctx, e.job_type, { ...e.spec, input });
  const r = await submitJobRun(ctx, {
    job_type: e.job_type,
    workspace_id: e.workspace_id,
    spec,
    requester: auth.principal.id,
    requesterActors: auth.credential.actors,
    source: `endpoint:${e.endpoint_id}`,
  });
  return { ...r, headers };
}
