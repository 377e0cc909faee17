/**
 * Jobs runs routes (spec: "Jobs runs"): submit, list, status, cancel. The
 * journal and SSE routes of the same resource are in cell/runs/routes.ts.
 * Reads need system.orchestration.admin.read, writes .write. The requester is
 * always the authenticated session's principal; a `requester` in the body is
 * refused.
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { invalid } from '../../core/errors.ts';
import { isoTime, isoTimeOrNull } from '../../core/iso-time.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import type { AppEnv } from '../context.ts';
import { errorResponses, idPath, json, jsonBody, pageFields, pageOf, pageQuery, secured } from '../http/openapi.ts';
import {
  ApprovalDecisionSchema,
  deciderOf,
  forksView,
  type Run,
  READS_ALL_RUNS,
  RunIdParam,
  runFilterOf,
  runFilterQuery,
} from '../runs/api.ts';
import { decideJobApproval, jobPendingApprovals } from './approvals.ts';
import type { JobsContext } from './context.ts';
import { boundSingleSpec, cancelJobRun, parseRunSpec, submitJobRun } from './runner.ts';
import { rerunJob } from './rerun.ts';
import { CreateRunSchema, JobRunSchema, UnknownRunSchema, type SingleSpec } from './shapes.ts';

const TAG = 'Job runs';

export async function runView(ctx: JobsContext, r: Run): Promise<z.infer<typeof JobRunSchema>> {
  return {
    run_id: r.run_id,
    job_id: r.run_id,
    kind: r.kind,
    job_type: r.job_type,
    crew_id: r.crew_id,
    workspace_id: r.workspace_id,
    spec: r.spec,
    requester: r.requester,
    state: r.state,
    stalled: ctx.runs.isStalled(r),
    output: r.output ?? null,
    error: r.error,
    flags: r.flags,
    source: r.source,
    graph_hash: r.graph_hash,
    coordinator: r.coordinator,
    created_at: isoTime(r.created_at),
    updated_at: isoTime(r.updated_at),
    finished_at: isoTimeOrNull(r.finished_at),
    checked_cell_id: ctx.core.config.cellId,
    forked_from: (r.flags['forked_from'] as z.infer<typeof JobRunSchema>['forked_from']) ?? null,
    forks: forksView(r),
    ...(r.job_type === 'agent' ? { pending_approvals: await jobPendingApprovals(ctx, r) } : {}),
    ...(r.job_type === 'agent' || r.kind === 'crew' ? { decisions: await ctx.runs.runDecisions(r.run_id) } : {}),
    unknown_outcome: await ctx.runs.lostOutcomeView(r),
  };
}

const Submitted = z
  .object({
    run_id: z.string().openapi({ description: 'The orchestration run id; follow it with GET .../runs/{run_id}, /journal and /events/sse' }),
    job_id: z.string(),
    state: z.string(),
    checked_cell_id: z.string(),
  })
  .openapi('JobRunSubmitted');

const submit = createRoute({
  method: 'post',
  path: '/api/public/v1/admin/jobs/runs',
  tags: [TAG],
  'x-status': 'Live',
  ...secured(PERMISSIONS.jobsWrite),
  summary: 'Run a job',
  description:
    'Starts a run of `job_type` (notebook, compute, sql, single) with `spec` (SqlJobSpec, ComputeJobSpec, NotebookJobSpec, SingleJobSpec) in `workspace_id`. Answers at once with the run id; the run executes on the orchestration engine with a signed journal. The requester is the authenticated principal; a `requester` field is refused. A spec that leaves no room within the run storage cap is 400 (`run_storage_cap`); a workspace whose runs and SQL database leave no room within its storage quota, or a cell whose runs leave none within theirs, is 409 (`workspace_quota`, `cell_storage_quota`); a run that would store more than its cap fails with `run_storage_cap`.',
  request: { body: jsonBody(CreateRunSchema) },
  responses: {
    202: json(Submitted, 'The run was accepted and is queued'),
    ...errorResponses(400, 401, 403, 409),
  },
});

const list = createRoute({
  method: 'get',
  path: '/api/public/v1/admin/jobs/runs',
  tags: [TAG],
  'x-status': 'Live',
  ...secured(PERMISSIONS.jobsRead),
  summary: 'List runs',
  description:
    'Runs in a stable order: the order they were recorded, oldest first (new runs append at the end). `limit` 1 to 2000 (default 200), `offset` from 0. `kind` selects job runs (default), crew runs or all; `state`, `job_type`, `crew_id`, `source`, `created_after`, `created_before` and `reason` (why it ended badly) narrow the list (all combine; `total` counts the filtered list).' +
    READS_ALL_RUNS,
  request: {
    query: pageQuery(200, 2000).extend({
      kind: z.enum(['job', 'crew', 'all']).default('job').openapi({ description: 'job (default) | crew | all' }),
      ...runFilterQuery,
    }),
  },
  responses: {
    200: json(
      z
        .object({
          items: z.array(JobRunSchema),
          ...pageFields,
          checked_cell_id: z.string(),
        })
        .openapi('JobRunList'),
      'A page of runs',
    ),
    ...errorResponses(400, 401, 403),
  },
});

/**
 * The status route's `{run_id}`: named as every route under `/jobs/runs/{run_id}` names that segment (the
 * spec's table calls it `{job_id}`: the same value, `job_id` = `run_id`), but not the run id parameter
 * (runIdPath) on purpose. The spec answers a job the cell did not find with state `unknown` and
 * `checked_cell_id`, whatever was asked, so any id of 1 to 200 characters is looked up; one that is not a
 * run id is simply not found.
 */
const StatusIdParam = z.object({ run_id: idPath('run_id', 'run_0123456789abcdef0123') });

const status = createRoute({
  method: 'get',
  path: '/api/public/v1/admin/jobs/runs/{run_id}',
  // The operationId the path gave while the segment was `{job_id}`: clients generated from the document keep it.
  operationId: 'getAdminJobsRunsByJobId',
  tags: [TAG],
  'x-status': 'Live',
  ...secured(PERMISSIONS.jobsRead),
  summary: 'Run status',
  description:
    'State, output or error, and `checked_cell_id`. A run this cell does not know answers 200 with state `unknown` and `checked_cell_id` (not 404).' +
    READS_ALL_RUNS,
  request: { params: StatusIdParam },
  responses: {
    200: json(z.union([JobRunSchema, UnknownRunSchema]), 'The run, or state unknown'),
    ...errorResponses(400, 401, 403),
  },
});

const cancel = createRoute({
  method: 'post',
  path: '/api/public/v1/admin/jobs/runs/{run_id}/cancel',
  tags: [TAG],
  'x-status': 'Live',
  ...secured(PERMISSIONS.jobsWrite),
  summary: 'Cancel a run (idempotent)',
  description:
    'Interrupts the running step (QuickJS interrupt, SQL worker stop), records `cancel_requested` and a `run_finished` with outcome cancelled in the journal. Cancelling a finished or already-cancelled run changes nothing and answers the run as it is.',
  request: { params: RunIdParam },
  responses: {
    200: json(JobRunSchema, 'The run after the cancel'),
    ...errorResponses(400, 401, 403, 404),
  },
});

const rerun = createRoute({
  method: 'post',
  path: '/api/public/v1/admin/jobs/runs/{run_id}/rerun',
  tags: [TAG],
  'x-status': 'Live',
  ...secured(PERMISSIONS.jobsWrite),
  summary: 'Rerun a failed run from its failure',
  description:
    'A new run with the same job type, workspace and spec, requested by the caller (the session), that reuses every step the run completed (its journal opens with a `forked` record naming this run) and runs the failed step again. Linked both ways: `forked_from` on the new run, `forks` on this one. Needs reading the run too (system.orchestration.admin.read). 409 `run_not_failed` unless the run failed, was refused or cancelled. An agent job run reruns its pinned graph as the caller (every seat within the caller, 403 `wider_than_caller`); 409 `rerun_unsupported` when the cell no longer knows that graph.',
  request: { params: RunIdParam },
  responses: {
    201: json(Submitted, 'The new run, queued'),
    ...errorResponses(400, 401, 403, 404, 409),
  },
});

/** A step id as given (the router already decoded the path); a second decode only when it is well-formed. */
function safeDecode(v: string): string {
  try {
    return decodeURIComponent(v);
  } catch {
    return v;
  }
}

const approve = createRoute({
  method: 'post',
  path: '/api/public/v1/admin/jobs/runs/{run_id}/approvals/{step_id}',
  tags: [TAG],
  'x-status': 'Live',
  ...secured(PERMISSIONS.teamsApprove),
  summary: 'Approve or reject a waiting step of an agent job run',
  description:
    "For job runs of job_type `agent` (a scheduled agent definition runs a crew graph): decides a step listed in the run's `pending_approvals` (a human_approval stage, or a side-effecting tool call under permission mode `ask`) with the same rules as the crew approvals route: two-person rule refuses the requester (403 requester_cannot_approve), named approvers only (403 not_an_approver), one decision per principal (409 already_decided), 409 run_terminal on an ended run. A decision wakes the run. URL-encode the step id (it contains `/`). Other runs: 404.",
  request: {
    params: RunIdParam.extend({
      step_id: z
        .string()
        .min(1)
        .max(300)
        .openapi({ param: { name: 'step_id', in: 'path' } }),
    }),
    body: jsonBody(ApprovalDecisionSchema),
  },
  responses: {
    200: json(JobRunSchema, 'The run after the decision'),
    ...errorResponses(400, 401, 403, 404, 409),
  },
});

export function mountRunRoutes(app: OpenAPIHono<AppEnv>, ctx: JobsContext): void {
  const { core, runs } = ctx;
  app.openapi(approve, async (c) => {
    const { run_id, step_id } = c.req.valid('param');
    const body = c.req.valid('json');
    const run = await decideJobApproval(ctx, deciderOf(c.get('auth')), run_id, safeDecode(step_id), body.decision, body.comment);
    return c.json(await runView(ctx, run), 200);
  });

  app.openapi(submit, async (c) => {
    const body = c.req.valid('json');
    if (body.requester !== undefined) {
      throw invalid('requester is taken from the authenticated session and cannot be given in the body', {
        reason: 'requester_from_session',
        field: 'requester',
      });
    }
    const auth = c.get('auth');
    let spec = parseRunSpec(ctx, body.job_type, body.spec);
    if (body.job_type === 'single') spec = await boundSingleSpec(ctx, auth, body.workspace_id, spec as SingleSpec);
    // Answered as the run was recorded (its creating transaction read it): nothing after the commit refuses it.
    const { run_id, run } = await submitJobRun(ctx, {
      job_type: body.job_type,
      workspace_id: body.workspace_id,
      spec,
      requester: auth.principal.id,
      requesterActors: auth.credential.actors,
      source: 'api',
    });
    c.header('Location', `/api/public/v1/admin/jobs/runs/${run_id}`);
    return c.json({ run_id, job_id: run_id, state: run.state, checked_cell_id: core.config.cellId }, 202);
  });

  app.openapi(list, async (c) => {
    const q = c.req.valid('query');
    const { items, total } = await runs.listRuns({
      limit: q.limit,
      offset: q.offset,
      ...(q.kind !== 'all' ? { kind: q.kind } : {}),
      ...runFilterOf(q),
    });
    const views = [];
    for (const r of items) views.push(await runView(ctx, r));
    return c.json({ items: views, ...pageOf(q, total), checked_cell_id: core.config.cellId }, 200);
  });

  app.openapi(status, async (c) => {
    const { run_id } = c.req.valid('param');
    const run = await runs.getRun(run_id);
    if (!run) return c.json({ run_id, job_id: run_id, state: 'unknown' as const, checked_cell_id: core.config.cellId }, 200);
    return c.json(await runView(ctx, run), 200);
  });

  app.openapi(rerun, async (c) => {
    const { run_id } = c.req.valid('param');
    const { run_id: id, state } = await rerunJob(ctx, c.get('auth'), run_id);
    c.header('Location', `/api/public/v1/admin/jobs/runs/${id}`);
    return c.json({ run_id: id, job_id: id, state, checked_cell_id: core.config.cellId }, 201);
  });

  app.openapi(cancel, async (c) => {
    const { run_id } = c.req.valid('param');
    return c.json(await runView(ctx, await cancelJobRun(ctx, c.get('auth'), run_id)), 200);
  });
}
