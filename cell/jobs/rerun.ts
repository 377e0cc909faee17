/**
 * Rerun from failure of a job run: a new job run with the same job type,
 * workspace and spec, requested by the caller (from the session; a `single`
 * job's authority is bounded by the caller again, the one containment check),
 * forked at the parent's last record: every step the parent completed is
 * reused from its journal (its records copied into the rerun's, each naming
 * the parent record: cell/runs/fork.ts), and the step that failed runs again.
 * Linked both ways: the rerun's `flags.forked_from`, the parent's
 * `flags.forks`. Only an ended run that did not complete is rerun (409
 * run_not_failed otherwise). An agent job run reruns the graph it pinned, as
 * the caller (every seat within the caller); when that graph is no longer one
 * the cell knows (its formation or crew changed) there is nothing to rerun
 * (409 rerun_unsupported): a changed graph could not reuse the parent's steps.
 */
import { grants } from '../../core/authority/scopes.ts';
import { ServiceError, forbidden, notFound } from '../../core/errors.ts';
import { relayedReason } from '../../core/reasons.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import type { AuthContext } from '../context.ts';
import { forksView, type Run } from '../runs/api.ts';
import type { AgentSpec } from './agent.ts';
import type { JobsContext } from './context.ts';
import { boundSingleSpec, submitJobRun } from './runner.ts';
import type { RunJobType, SingleSpec } from './shapes.ts';

const RERUNNABLE = new Set(['failed', 'refused', 'cancelled']);

async function refuse(ctx: JobsContext, auth: AuthContext, runId: string, e: ServiceError): Promise<never> {
  await ctx.iam.auditNow({
    actor: auth.principal.id,
    action: 'jobs.run.rerun',
    target: runId,
    outcome: 'refused',
    details: { reason: relayedReason(e) },
  });
  throw e;
}

/** Reruns a failed job run; the new run, as it was recorded. */
export async function rerunJob(ctx: JobsContext, auth: AuthContext, runId: string): Promise<Run> {
  const parent: Run | undefined = await ctx.runs.getRun(runId);
  if (parent?.kind !== 'job' || !parent.job_type) throw notFound('run');
  if (!grants(auth.effective, PERMISSIONS.jobsRead))
    return refuse(
      ctx,
      auth,
      runId,
      forbidden('a rerun needs reading the run: system.orchestration.admin.read', {
        reason: 'missing_permission',
        required: PERMISSIONS.jobsRead,
      }),
    );
  if (!RERUNNABLE.has(parent.state))
    return refuse(
      ctx,
      auth,
      runId,
      new ServiceError('conflict', `the run is ${parent.state}; only a run that failed, was refused or cancelled is rerun`, {
        details: { reason: 'run_not_failed', state: parent.state },
      }),
    );
  const last = (await ctx.runs.readJournal(runId, 0, 10_000_000)).at(-1);
  const found = last ? await ctx.runs.forkPoint(runId, last.seq) : null;
  if (found === null)
    return refuse(
      ctx,
      auth,
      runId,
      new ServiceError('conflict', 'the run has no end to rerun from', { details: { reason: 'run_not_failed' } }),
    );
  // An approval of the parent stands only for the same requester (through the same chain): else asked again.
  const { point, asked_again } = ctx.runs.standingApprovals(found, {
    requester: { id: auth.principal.id, actors: auth.credential.actors ?? [] },
  });
  const workspace = parent.workspace_id ?? 'default';
  let spec = parent.spec;
  // The rerun acts as the caller: a single job's authority is bounded by the caller again.
  if (parent.job_type === 'single') spec = await boundSingleSpec(ctx, auth, workspace, parent.spec as SingleSpec);
  else if (parent.job_type === 'agent') {
    // The same pinned graph, run as the caller: every seat of it within the caller (the crew fork's check).
    const graphId = (parent.spec as AgentSpec).graph_id;
    const found = await ctx.teams.crewByGraph(graphId);
    if (!found)
      return refuse(
        ctx,
        auth,
        runId,
        new ServiceError('conflict', 'the graph the run executed is no longer one this cell knows (its formation or crew changed)', {
          details: { reason: 'rerun_unsupported', graph_id: graphId },
        }),
      );
    await ctx.teams.assertSeatsWithinCaller(auth, found.graph, { action: 'jobs.run.rerun', target: runId });
  } else await ctx.iam.assertWithinCaller(auth, { permissions: [PERMISSIONS.jobsWrite] }, { action: 'jobs.run.rerun', target: runId });
  const { run } = await submitJobRun(ctx, {
    job_type: parent.job_type as RunJobType,
    workspace_id: workspace,
    spec,
    requester: auth.principal.id,
    requesterActors: auth.credential.actors,
    source: `rerun:${runId}`,
    flags: { forked_from: point.from },
    // Audited with the run, in its creating transaction: nothing after the commit refuses the rerun.
    inTx: (tx, id) =>
      ctx.iam.audit(tx, {
        at: ctx.core.clock.now(),
        actor: auth.principal.id,
        action: 'jobs.run.rerun',
        target: id,
        outcome: 'ok',
        details: { parent: runId },
      }),
    opening: async (id, again) => {
      const kept = again ? await ctx.runs.readJournal(id) : [];
      if (!kept.some((r) => r.kind === 'forked'))
        await ctx.runs.openFork(id, point, asked_again.length > 0 ? { approvals_asked_again: asked_again } : {});
      const copied = new Set(kept.map((r) => (r.data as { reused?: { seq?: unknown } } | null)?.reused?.seq));
      await ctx.runs.copyReused(id, { ...point, copies: point.copies.filter((c) => !copied.has(c.seq)) });
      const listed = again && forksView((await ctx.runs.getRun(runId)) ?? parent).some((f) => f.run_id === id);
      if (!listed)
        await ctx.runs.pushRunFlag(runId, 'forks', { run_id: id, seq: point.from.seq, by: auth.principal.id, at: ctx.core.clock.now() });
    },
  });
  return run;
}
