/**
 * Route: an operator resolves the lost outcome of a job run's side-effecting
 * call (a `single` job's http.request POST, an agent job run's tool call: the
 * run waits `outcome_unknown`, cell/runs/outcomes.ts): retry it with the same
 * effect key, record its result, or fail the run. The caller must hold the
 * authority the run acts with, as if it submitted the run itself (the one
 * containment check): a `single` job's tool and recorded authority, every seat
 * of an agent job run's graph; else 403 `wider_than_caller`, audited. The
 * run's view shows what it waits on (`unknown_outcome`).
 */
import { createRoute, type OpenAPIHono } from '@hono/zod-openapi';
import { ServiceError, notFound } from '../../core/errors.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import type { AppEnv, AuthContext } from '../context.ts';
import { errorResponses, json, jsonBody, secured } from '../http/openapi.ts';
import { OutcomeResolutionSchema, RunIdParam, stepIdOf, stepIdPath, type ResolutionAsk, type Run } from '../runs/api.ts';
import type { AgentSpec } from './agent.ts';
import type { JobsContext } from './context.ts';
import { resumeJobRun } from './runner.ts';
import { runView } from './routes-runs.ts';
import { JobRunSchema, type SingleSpec } from './shapes.ts';

/** Refuses a caller that does not hold the authority the job run acts with. */
async function assertRunWithinCaller(
  ctx: JobsContext,
  auth: AuthContext,
  run: Run,
  what: { action: string; target: string },
): Promise<void> {
  if (run.job_type === 'single') {
    // The authority recorded with the run at its submit (the requester's ∩ what the spec asked): what it acts with.
    const spec = run.spec as SingleSpec;
    const a = spec.authority;
    const envelope = {
      allowed_tools: [spec.tool],
      egress_allowlist: a?.egress_allowlist ?? [],
      data_grant_ids: a?.data_grant_ids ?? [],
      clearance_level: a?.clearance_level ?? 0,
      compartments: a?.compartments ?? [],
    };
    await ctx.iam.assertWithinCaller(auth, { envelope }, what);
  } else if (run.job_type === 'agent') {
    const graphId = (run.spec as AgentSpec).graph_id;
    const found = await ctx.teams.crewByGraph(graphId);
    if (!found)
      throw new ServiceError('conflict', 'the graph the run executes is no longer one this cell knows (its formation or crew changed)', {
        details: { reason: 'graph_unknown', graph_id: graphId },
      });
    await ctx.teams.assertSeatsWithinCaller(auth, found.graph, what);
  }
}

/** Records a resolution of the lost outcome a job run waits on (the caller holds the run's authority), then wakes the run. */
export async function resolveJobOutcome(
  ctx: JobsContext,
  auth: AuthContext,
  runId: string,
  stepId: string,
  ask: ResolutionAsk,
): Promise<Run> {
  const run = await ctx.runs.getRun(runId);
  if (run?.kind !== 'job') throw notFound('run');
  await assertRunWithinCaller(ctx, auth, run, { action: 'jobs.run.outcome', target: `${runId}:${stepId}` });
  const wake = await ctx.runs.resolveOutcome(auth.principal.id, run, stepId, ask, 'jobs.run.outcome');
  if (wake) void resumeJobRun(ctx, runId); // driven in the background; follow it with GET, /journal or /events/sse
  return (await ctx.runs.getRun(runId)) ?? run;
}

const resolve = createRoute({
  method: 'post',
  path: '/api/public/v1/admin/jobs/runs/{run_id}/outcomes/{step_id}',
  tags: ['Job runs'],
  'x-status': 'Live',
  ...secured(PERMISSIONS.jobsWrite),
  summary:
    "Resolve the lost outcome of a job run's side-effecting call: retry it with the same effect key, record its result, or fail the run",
  description:
    "For a job run in state `outcome_unknown` (its `unknown_outcome` names the step, the tool and the effect key): `retry` issues the call again with the same effect key (`Idempotency-Key`), `record` makes `result` the call's result (it is not issued), `fail` fails the run (`outcome_unknown`). The caller must hold the authority the run acts with (a single job's tool and authority, every seat of an agent job run's graph: 403 wider_than_caller). 409 run_terminal, no_unknown_outcome, already_resolved; 404 for a step the run does not wait on. Audited as `jobs.run.outcome`. URL-encode the step id.",
  request: {
    params: RunIdParam.extend({ step_id: stepIdPath() }),
    body: jsonBody(OutcomeResolutionSchema),
  },
  responses: {
    200: json(JobRunSchema, 'The run after the resolution (driven again in the background)'),
    ...errorResponses(400, 401, 403, 404, 409),
  },
});

export function mountOutcomeRoutes(app: OpenAPIHono<AppEnv>, ctx: JobsContext): void {
  app.openapi(resolve, async (c) => {
    const { run_id, step_id } = c.req.valid('param');
    const run = await resolveJobOutcome(ctx, c.get('auth'), run_id, stepIdOf(step_id), c.req.valid('json'));
    return c.json(await runView(ctx, run), 200);
  });
}
