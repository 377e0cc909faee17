/**
 * Route: an operator resolves the lost outcome of a crew run's side-effecting
 * call (the run waits `outcome_unknown`; cell/runs/outcomes.ts): retry it with
 * the same effect key, record its result, or fail the run. Resolving lets the
 * run act again with its seats' authority (a retry issues the call again; a
 * recorded result is what the agents act on next), so the caller must be able
 * to run the crew itself: every seat of the run's graph within the caller (the
 * one containment check, as a fork's), else 403 `wider_than_caller`, audited.
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import type { Graph } from '../../../core/engine/types.ts';
import { ServiceError, notFound } from '../../../core/errors.ts';
import { PERMISSIONS } from '../../../core/permissions.ts';
import type { AppEnv, AuthContext } from '../../context.ts';
import { errorResponses, json, jsonBody, secured } from '../../http/openapi.ts';
import { OutcomeResolutionSchema, runIdPath, stepIdOf, stepIdPath, type ResolutionAsk, type Run } from '../../runs/api.ts';
import type { TeamsContext } from '../context.ts';
import { assertSeatsWithinCaller } from '../formations/compile.ts';
import { executedGraph } from './run-graph.ts';
import { resumeRun } from './runs.ts';
import { RunOut, runView } from './run-view.ts';

/** Records a resolution of the lost outcome a crew run waits on (the caller may run the crew), then wakes the run. */
export async function resolveCrewOutcome(
  ctx: TeamsContext,
  auth: AuthContext,
  crewId: string,
  runId: string,
  stepId: string,
  ask: ResolutionAsk,
): Promise<Run> {
  const run = await ctx.runs.getRun(runId);
  if (run?.kind !== 'crew' || run.crew_id !== crewId) throw notFound('run');
  const executed = await executedGraph(ctx, run);
  if (!executed) {
    throw new ServiceError('not_found', 'the graph of this run was not kept and its crew no longer compiles to it', {
      details: { reason: 'graph_not_kept', graph_hash: run.graph_hash },
    });
  }
  const target = `${runId}:${stepId}`;
  await assertSeatsWithinCaller(ctx, auth, executed.graph as Graph, { action: 'crew.run.outcome', target });
  const wake = await ctx.runs.resolveOutcome(auth.principal.id, run, stepId, ask, 'crew.run.outcome');
  if (wake) return resumeRun(ctx, runId, 'resolution');
  return (await ctx.runs.getRun(runId)) ?? run;
}

export function outcomeRoutes(app: OpenAPIHono<AppEnv>, ctx: TeamsContext): void {
  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/public/v1/admin/agent-teams/crews/{crew_id}/runs/{run_id}/outcomes/{step_id}',
      tags: ['Crews'],
      'x-status': 'Live',
      summary:
        "Resolve the lost outcome of a run's side-effecting call: retry it with the same effect key, record its result, or fail the run",
      description:
        "For a run in state `outcome_unknown` (its `unknown_outcome` names the step, the tool and the effect key): `retry` issues the call again with the same effect key (`Idempotency-Key`), `record` makes `result` the call's result (it is not issued), `fail` fails the run (`outcome_unknown`). The caller must be able to run the crew (every seat within it: 403 wider_than_caller). 409 run_terminal, no_unknown_outcome, already_resolved; 404 for a step the run does not wait on. Audited as `crew.run.outcome`; the journal gets an `outcome_resolved` record. URL-encode the step id (it contains `/`).",
      ...secured(PERMISSIONS.teamsWrite),
      request: {
        params: z.object({
          crew_id: z
            .string()
            .max(64)
            .openapi({ param: { name: 'crew_id', in: 'path' } }),
          run_id: runIdPath(),
          step_id: stepIdPath(),
        }),
        body: jsonBody(OutcomeResolutionSchema),
      },
      responses: {
        200: json(RunOut, 'The run after the resolution (driven again in the background)'),
        ...errorResponses(400, 401, 403, 404, 409),
      },
    }),
    async (c) => {
      const { crew_id, run_id, step_id } = c.req.valid('param');
      const body = c.req.valid('json');
      const run = await resolveCrewOutcome(ctx, c.get('auth'), crew_id, run_id, stepIdOf(step_id), body);
      return c.json(await runView(ctx, run), 200);
    },
  );
}
