/**
 * Approvals for agent job runs. A job run of job_type `agent` runs a crew's
 * compiled graph with the crew's ports, so it can wait on a human_approval
 * stage or on a side-effecting tool call under permission mode `ask`, exactly
 * like a crew run. `POST /admin/jobs/runs/{run_id}/approvals/{step_id}`
 * (permission agent_teams.approve) decides such a step with the same rules as
 * the crew route (the runs module's recordApproval: pending step, not
 * terminal, two-person rule, named approvers, one decision per principal),
 * audited as `jobs.run.approval`, and wakes the run.
 */
import { notFound } from '../../core/errors.ts';
import type { Decider, Run } from '../runs/api.ts';
import type { JobsContext } from './context.ts';
import { resumeJobRun } from './runner.ts';

/** Records a decision on a waiting step of an agent job run, then wakes it. */
export async function decideJobApproval(
  ctx: JobsContext,
  decider: Decider,
  runId: string,
  stepId: string,
  decision: 'approve' | 'reject',
  comment: string | undefined,
): Promise<Run> {
  const run = await ctx.runs.getRun(runId);
  if (run?.kind !== 'job' || run.job_type !== 'agent') throw notFound('agent job run');
  const wake = await ctx.runs.recordApproval(decider, run, stepId, decision, comment, 'jobs.run.approval');
  if (wake) void resumeJobRun(ctx, runId); // driven in the background; follow it with GET, /journal or /events/sse
  return (await ctx.runs.getRun(runId))!;
}

/** Pending approvals of an agent job run (empty for other runs and terminal ones). */
export function jobPendingApprovals(ctx: JobsContext, run: Run) {
  if (run.kind !== 'job' || run.job_type !== 'agent') return Promise.resolve([]);
  return ctx.runs.pendingApprovalsView(run);
}
