/**
 * Published endpoints routes: admin publish / list / get / unpublish under
 * /api/public/v1/admin/jobs/endpoints (system.orchestration.admin.read/write),
 * and the invocation `POST /api/public/v1/jobs/endpoints/{endpoint_id}/invoke`
 * (any authenticated caller holding the endpoint's required_scopes; its own
 * rate_limit_rpm). See invoke.ts for the gates.
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { PERMISSIONS } from '../../core/permissions.ts';
import type { AppEnv } from '../context.ts';
import type { JobsContext } from './context.ts';
import * as repo from './repository.ts';
import { requires } from '../http/authorize.ts';
import { malformedRequest } from '../../runtime/gateway.ts';
import { errorResponses, idPath, json, jsonBody, listSchema, pageOf, pageQuery, secured } from '../http/openapi.ts';
import { checkInputSchema } from '../../core/input-schema/check.ts';
import { endpointView, newEndpointId } from './endpoints.ts';
import { endpointOr404, endpointRefusal, invokeEndpoint } from './invoke.ts';
import { parseRunSpec } from './runner.ts';
import { CreateEndpointSchema, EndpointSchema, RunErrorSchema } from './shapes.ts';

const TAG = 'Job endpoints';
const BASE = '/api/public/v1/admin/jobs/endpoints';
const IdParam = z.object({ endpoint_id: idPath('endpoint_id', 'jep_0123456789abcdef0123') });

const publish = createRoute({
  method: 'post',
  path: BASE,
  tags: [TAG],
  'x-status': 'Live',
  ...secured(PERMISSIONS.jobsWrite),
  summary: 'Publish a compute or notebook template as an endpoint',
  description:
    "The template is validated now (with the input replaced at invocation). `rate_limit_rpm` (default 60) is this endpoint's own budget; `required_scopes` are what a caller's credential must grant; `input_schema` (a JSON Schema subset) checks the input.",
  request: { body: jsonBody(CreateEndpointSchema) },
  responses: { 201: json(EndpointSchema, 'The endpoint, with its invoke_path'), ...errorResponses(400, 401, 403) },
});
const list = createRoute({
  method: 'get',
  path: BASE,
  tags: [TAG],
  'x-status': 'Live',
  ...secured(PERMISSIONS.jobsRead),
  summary: 'List published endpoints',
  description: 'In creation order; `limit` 1 to 1000 (default 100).',
  request: { query: pageQuery(100, 1000) },
  responses: {
    200: json(listSchema('items', EndpointSchema, 'JobEndpointList'), 'A page of endpoints'),
    ...errorResponses(400, 401, 403),
  },
});
const get = createRoute({
  method: 'get',
  path: `${BASE}/{endpoint_id}`,
  tags: [TAG],
  'x-status': 'Live',
  ...secured(PERMISSIONS.jobsRead),
  summary: 'Get a published endpoint',
  request: { params: IdParam },
  responses: { 200: json(EndpointSchema, 'The endpoint'), ...errorResponses(400, 401, 403, 404) },
});
const unpublish = createRoute({
  method: 'delete',
  path: `${BASE}/{endpoint_id}`,
  tags: [TAG],
  'x-status': 'Live',
  ...secured(PERMISSIONS.jobsWrite),
  summary: 'Unpublish an endpoint',
  description: 'Invocations answer 404 from now on; runs it produced stay.',
  request: { params: IdParam },
  responses: { 200: json(EndpointSchema, 'The endpoint as it was'), ...errorResponses(400, 401, 403, 404) },
});

const InvokeResult = z
  .object({
    run_id: z.string(),
    state: z.string(),
    output: z.unknown().nullable().optional(),
    error: RunErrorSchema.nullable().optional(),
    checked_cell_id: z.string(),
  })
  .openapi('JobEndpointInvocation');

const invoke = createRoute({
  method: 'post',
  path: '/api/public/v1/jobs/endpoints/{endpoint_id}/invoke',
  tags: [TAG],
  'x-status': 'Live',
  // A token's scope is judged against the endpoint's own required_scopes, which the document cannot name.
  security: [{ bearerAuth: [] }, { dpop: [] }, { oauth2: [] }],
  'x-required-permission': "the endpoint's required_scopes",
  summary: 'Invoke a published endpoint',
  description:
    "The JSON body is the job's input. Gates: authentication, the endpoint's required_scopes (403), the credential's own rpm ceiling (429), the endpoint's rate_limit_rpm (429 + Retry-After, a budget of its own, independent of the gateway and per-key budgets), input_schema (400), the workspace's and the cell's storage quotas (409). Mode sync answers 200 with the output when the run ends within sync_timeout_ms, else 202 with the run id; mode async answers 202.",
  request: {
    params: IdParam,
    body: { required: false, content: { 'application/json': { schema: z.unknown().openapi({ description: 'The input (any JSON)' }) } } },
  },
  responses: {
    200: json(InvokeResult, 'The run ended: its output or error'),
    202: json(InvokeResult, 'The run is still going: follow run_id'),
    ...errorResponses(400, 401, 403, 404, 409, 429),
  },
});

export function mountEndpointRoutes(app: OpenAPIHono<AppEnv>, ctx: JobsContext): void {
  const { core, iam, runs } = ctx;
  app.openapi(publish, async (c) => {
    const b = c.req.valid('json');
    if (b.input_schema !== undefined) checkInputSchema(b.input_schema);
    parseRunSpec(ctx, b.job_type, { ...b.spec, input: null });
    const auth = c.get('auth');
    const actor = auth.principal.id;
    await iam.assertNotDelegated(auth, { action: 'jobs.endpoint.publish', target: b.name });
    // Publishing lets holders of required_scopes run this job: the publisher must hold them itself.
    await iam.assertWithinCaller(auth, { permissions: b.required_scopes }, { action: 'jobs.endpoint.publish', target: b.name });
    const now = core.clock.now();
    const id = newEndpointId();
    await core.store.write(async (tx) => {
      await repo.insertEndpoint(tx, {
        endpoint_id: id,
        name: b.name,
        job_type: b.job_type,
        workspace_id: b.workspace_id,
        spec: b.spec,
        rate_limit_rpm: b.rate_limit_rpm,
        required_scopes: b.required_scopes,
        input_schema: b.input_schema ?? null,
        mode: b.mode,
        sync_timeout_ms: b.sync_timeout_ms,
        created_by: actor,
        created_at: now,
        deleted_at: null,
      });
      await iam.audit(tx, {
        at: now,
        actor,
        action: 'jobs.endpoint.publish',
        target: id,
        outcome: 'ok',
        details: { job_type: b.job_type, rate_limit_rpm: b.rate_limit_rpm },
      });
    });
    return c.json(endpointView((await repo.endpointById(core.store, id))!), 201);
  });

  app.openapi(list, async (c) => {
    const q = c.req.valid('query');
    const { items, total } = await repo.listEndpoints(core.store, q.limit, q.offset);
    return c.json({ items: items.map(endpointView), ...pageOf(q, total) }, 200);
  });

  app.openapi(get, async (c) => c.json(endpointView(await endpointOr404(ctx, c.req.valid('param').endpoint_id)), 200));

  app.openapi(unpublish, async (c) => {
    const e = await endpointOr404(ctx, c.req.valid('param').endpoint_id);
    const auth = c.get('auth');
    // An endpoint acts as its publisher: unpublishing another's needs managing it (the shared-things rule).
    await iam.assertMayActOnOwned(auth, { kind: 'endpoint', id: e.endpoint_id, ownerId: e.created_by }, 'jobs.endpoint.unpublish');
    const now = core.clock.now();
    const actor = auth.principal.id;
    await core.store.write(async (tx) => {
      await repo.unpublishEndpoint(tx, e.endpoint_id, now);
      await iam.audit(tx, { at: now, actor, action: 'jobs.endpoint.unpublish', target: e.endpoint_id, outcome: 'ok' });
    });
    return c.json(endpointView(e), 200);
  });

  app.openapi(invoke, async (c) => {
    const e = await endpointOr404(ctx, c.req.valid('param').endpoint_id);
    const auth = c.get('auth');
    const refusal = await endpointRefusal(ctx, auth, e);
    if (refusal) throw refusal;
    // The caller's own per-key rpm ceiling, as on every protected operation (the first scope is granted: checked above).
    await requires(e.required_scopes[0]!)(c, async () => {});
    const text = await c.req.text();
    let input: unknown = null;
    if (text.trim() !== '') {
      try {
        input = JSON.parse(text) as unknown;
      } catch {
        throw malformedRequest('the body is not JSON');
      }
    }
    const { run_id, run: recorded, done } = await invokeEndpoint(ctx, auth, c.get('credentialLimits'), e, input);
    if (e.mode === 'sync') {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const finished = await Promise.race([
        done.then(() => true),
        new Promise<boolean>((r) => {
          timer = setTimeout(() => r(false), e.sync_timeout_ms);
        }),
      ]);
      if (timer) clearTimeout(timer);
      // The run is recorded: a read that meets an outage answers 202 with it as recorded, never a refusal.
      const run = (await runs.getRun(run_id).catch(() => undefined)) ?? recorded;
      if (finished && (run.state === 'completed' || run.state === 'failed' || run.state === 'refused' || run.state === 'cancelled')) {
        return c.json({ run_id, state: run.state, output: run.output ?? null, error: run.error, checked_cell_id: core.config.cellId }, 200);
      }
      c.header('Location', `/api/public/v1/admin/jobs/runs/${run_id}`);
      return c.json({ run_id, state: run.state, checked_cell_id: core.config.cellId }, 202);
    }
    c.header('Location', `/api/public/v1/admin/jobs/runs/${run_id}`);
    return c.json({ run_id, state: recorded.state, checked_cell_id: core.config.cellId }, 202);
  });
}
