/**
 * Routes: crew runs, their status, the graph each executed, approvals, cancel and recovery; the operators' run list (investigate flag).
 * The run reads open to agent_teams.read or system.orchestration.admin.read, as the jobs routes show the same runs (docs/security.md).
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { PERMISSIONS } from '../../../core/permissions.ts';
import { ServiceError, notFound } from '../../../core/errors.ts';
import type { AppEnv } from '../../context.ts';
import { errorResponses, json, jsonBody, listSchema, pageOf, pageQuery, secured, securedEither } from '../../http/openapi.ts';
import { ApprovalDecisionSchema, deciderOf, type Run, runFilterOf, runFilterQuery, runIdPath } from '../../runs/api.ts';
import type { TeamsContext } from '../context.ts';
import { getCrew } from '../formations/formations.ts';
import { executedGraph } from './run-graph.ts';
import { forkCrewRun } from './fork.ts';
import { cancelCrewRun, decideApproval, recoverRun, startCrewRunAs } from './runs.ts';
import { RunOut, runView, type CrewRunView } from './run-view.ts';

const P = '/api/public/v1/admin/agent-teams';
const param = (n: string) =>
  z
    .string()
    .max(64)
    .openapi({ param: { name: n, in: 'path' } });

const RunIn = z
  .object({
    input: z.unknown().optional().openapi({ description: 'The task given to the entry seat (any JSON)' }),
    workspace_id: z
      .string()
      .min(1)
      .max(100)
      .regex(/^[A-Za-z0-9._-]+$/)
      .optional(),
    max_duration_ms: z
      .number()
      .int()
      .min(1)
      .max(7 * 24 * 3600_000)
      .optional()
      .openapi({ description: 'Time budget; still in flight after it: flagged investigate (default 600000)' }),
    max_tokens: z
      .number()
      .int()
      .min(1)
      .max(1e12)
      .optional()
      .openapi({ description: 'Cost budget in tokens across seats; beyond it: flagged investigate' }),
  })
  .strict()
  .openapi('StartCrewRun');

const ForkIn = z
  .object({
    at: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER).openapi({ description: 'The seq of a step (or decision) record of the run' }),
    input: z.unknown().optional().openapi({ description: "Replacement input of the step at `at` (a graph node's record)" }),
    formation_version: z
      .number()
      .int()
      .min(1)
      .optional()
      .openapi({ description: "Run this version of the formation (default: the parent's); a prefix it changed is 409 graph_changed" }),
  })
  .strict()
  .openapi('ForkCrewRun');

const RunGraphOut = z
  .object({
    run_id: z.string(),
    crew_id: z.string(),
    formation_id: z.string().nullable(),
    formation_version: z.number().int(),
    graph_hash: z.string(),
    graph: z.record(z.string(), z.unknown()),
  })
  .openapi('CrewRunGraph');

export function runRoutes(app: OpenAPIHono<AppEnv>, ctx: TeamsContext): void {
  const { runs } = ctx;
  const view = (r: Run) => runView(ctx, r);
  const views = async (rs: readonly Run[]) => {
    const out: CrewRunView[] = [];
    for (const r of rs) out.push(await view(r));
    return out;
  };

  app.openapi(
    createRoute({
      method: 'post',
      path: `${P}/crews/{crew_id}/runs`,
      tags: ['Crews'],
      'x-status': 'Live',
      summary: 'Compile the crew and start a run (refused at once without budget ledgers or placement)',
      ...secured(PERMISSIONS.teamsWrite),
      request: { params: z.object({ crew_id: param('crew_id') }), body: jsonBody(RunIn) },
      responses: { 201: json(RunOut, 'The run (driven in the background)'), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      // One load and one compile: the caller's check runs on the graph startCrewRunAs compiled, before anything is written.
      const run = await startCrewRunAs(ctx, c.get('auth'), c.req.valid('param').crew_id, c.req.valid('json'));
      return c.json(await runView(ctx, run, { started: true }), 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/crews/{crew_id}/runs`,
      tags: ['Crews'],
      'x-status': 'Live',
      summary: "A crew's runs, oldest first",
      ...securedEither(PERMISSIONS.teamsRead, PERMISSIONS.jobsRead),
      request: { params: z.object({ crew_id: param('crew_id') }), query: pageQuery(100, 1000) },
      responses: {
        200: json(listSchema('runs', RunOut, 'CrewRunList'), 'Runs'),
        ...errorResponses(400, 401, 403, 404),
      },
    }),
    async (c) => {
      const crewId = c.req.valid('param').crew_id;
      if (!(await getCrew(ctx, crewId))) throw notFound('crew');
      const q = c.req.valid('query');
      const r = await runs.listRuns({ limit: q.limit, offset: q.offset, kind: 'crew', crewId });
      return c.json({ runs: await views(r.items), ...pageOf(q, r.total) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/runs`,
      tags: ['Crews'],
      'x-status': 'Live',
      summary: 'Crew runs across crews; `investigate=true` lists runs flagged for investigation',
      description:
        '`state`, `crew_id`, `source`, `created_after`, `created_before` (RFC 3339, exclusive) and `reason` (why the run ended badly) narrow the list; all combine, and `total` counts the filtered list. `job_type` matches no crew run.',
      ...securedEither(PERMISSIONS.teamsRead, PERMISSIONS.jobsRead),
      request: {
        query: pageQuery(100, 1000).extend({
          investigate: z.enum(['true', 'false']).optional(),
          ...runFilterQuery,
        }),
      },
      responses: {
        200: json(listSchema('runs', RunOut, 'CrewRunPage'), 'Runs'),
        ...errorResponses(400, 401, 403),
      },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const r = await runs.listRuns({
        limit: q.limit,
        offset: q.offset,
        kind: 'crew',
        ...runFilterOf(q),
        investigate: q.investigate === 'true',
      });
      return c.json({ runs: await views(r.items), ...pageOf(q, r.total) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/crews/{crew_id}/runs/{run_id}`,
      tags: ['Crews'],
      'x-status': 'Live',
      summary: 'Run status',
      ...securedEither(PERMISSIONS.teamsRead, PERMISSIONS.jobsRead),
      request: { params: z.object({ crew_id: param('crew_id'), run_id: runIdPath() }) },
      responses: { 200: json(RunOut, 'The run'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const { crew_id, run_id } = c.req.valid('param');
      const run = await runs.getRun(run_id);
      if (run?.kind !== 'crew' || run.crew_id !== crew_id) throw notFound('run');
      return c.json(await view(run), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: `${P}/crews/{crew_id}/runs/{run_id}/fork`,
      tags: ['Crews'],
      'x-status': 'Live',
      summary: 'Fork a run at a step: a new run that reuses every answer recorded before it (no model call) and runs the rest',
      description:
        "The caller must read the run (agent_teams.read or system.orchestration.admin.read) and may run the crew (every seat within its authority); the fork runs as the caller. Its journal opens with a `forked` record naming the parent run, `at` and that record's hash. Rerun from failure is a fork at the failed step with nothing changed.",
      ...secured(PERMISSIONS.teamsWrite),
      request: { params: z.object({ crew_id: param('crew_id'), run_id: runIdPath() }), body: jsonBody(ForkIn) },
      responses: { 201: json(RunOut, 'The new run (driven in the background)'), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const { crew_id, run_id } = c.req.valid('param');
      const run = await forkCrewRun(ctx, c.get('auth'), crew_id, run_id, c.req.valid('json'));
      return c.json(await runView(ctx, run, { started: true }), 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: `${P}/crews/{crew_id}/runs/{run_id}/recover`,
      tags: ['Crews'],
      'x-status': 'Live',
      summary: 'Resume a run whose coordinator died (completed steps reused; refused if the formation changed)',
      ...secured(PERMISSIONS.teamsWrite),
      request: { params: z.object({ crew_id: param('crew_id'), run_id: runIdPath() }) },
      responses: { 202: json(RunOut, 'The run, being driven by this cell'), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const { crew_id, run_id } = c.req.valid('param');
      const run = await recoverRun(ctx, c.get('auth').principal.id, crew_id, run_id);
      return c.json(await view(run), 202);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: `${P}/crews/{crew_id}/runs/{run_id}/approvals/{step_id}`,
      tags: ['Crews'],
      'x-status': 'Live',
      summary: 'Approve or reject a waiting step (human_approval, or a side-effecting tool call under `ask`); step ids are URL-encoded',
      ...secured(PERMISSIONS.teamsApprove),
      request: {
        params: z.object({
          crew_id: param('crew_id'),
          run_id: runIdPath(),
          step_id: z
            .string()
            .min(1)
            .max(300)
            .openapi({ param: { name: 'step_id', in: 'path' } }),
        }),
        body: jsonBody(ApprovalDecisionSchema),
      },
      responses: { 200: json(RunOut, 'The run after the decision'), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const { crew_id, run_id, step_id } = c.req.valid('param');
      const body = c.req.valid('json');
      const run = await decideApproval(
        ctx,
        deciderOf(c.get('auth')),
        crew_id,
        run_id,
        decodeURIComponent(step_id),
        body.decision,
        body.comment,
      );
      return c.json(await view(run), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/crews/{crew_id}/runs/{run_id}/graph`,
      tags: ['Crews'],
      'x-status': 'Live',
      summary: 'The graph the run executed, with its formation version and hash (a new version of the formation does not change it)',
      ...secured(PERMISSIONS.teamsRead),
      request: { params: z.object({ crew_id: param('crew_id'), run_id: runIdPath() }) },
      responses: { 200: json(RunGraphOut, 'The graph'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const { crew_id, run_id } = c.req.valid('param');
      const run = await runs.getRun(run_id);
      if (run?.kind !== 'crew' || run.crew_id !== crew_id || !run.graph_hash) throw notFound('run');
      const g = await executedGraph(ctx, run);
      if (!g) {
        throw new ServiceError('not_found', 'the graph of this run was not kept and its crew no longer compiles to it', {
          details: { reason: 'graph_not_kept', graph_hash: run.graph_hash },
        });
      }
      const spec = (run.spec ?? {}) as { formation_id?: string };
      return c.json(
        {
          run_id,
          crew_id,
          formation_id: spec.formation_id ?? null,
          formation_version: g.formationVersion,
          graph_hash: run.graph_hash,
          graph: g.graph as Record<string, unknown>,
        },
        200,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: `${P}/crews/{crew_id}/runs/{run_id}/cancel`,
      tags: ['Crews'],
      'x-status': 'Live',
      summary: 'Cancel a crew run (idempotent: cancelling an ended run changes nothing and answers the run as it is)',
      description:
        'Aborts the model call or tool in flight, records `cancel_requested` and a `run_finished` with outcome cancelled, releases open budget reservations. The same cancel as `POST /jobs/runs/{run_id}/cancel`.',
      ...secured(PERMISSIONS.teamsWrite),
      request: { params: z.object({ crew_id: param('crew_id'), run_id: runIdPath() }) },
      responses: { 200: json(RunOut, 'The run after the cancel'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const { crew_id, run_id } = c.req.valid('param');
      return c.json(await view(await cancelCrewRun(ctx, c.get('auth'), crew_id, run_id)), 200);
    },
  );
}
