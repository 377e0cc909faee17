/**
 * Run a definition now (issue 43 §4, the console's "Run now"): one run of the
 * definition's template, started by a caller outside its cron.
 *
 * The run is the caller's, not the definition's author's: its requester is the
 * caller (with the actors of the caller's token), so it is bounded by the
 * caller's authority now, as if the caller had submitted the template
 * themselves (`POST /jobs/runs`, or a crew run for a team definition). The
 * caller must hold what the job type needs (assertMayAuthor: agent and team
 * templates need agent_teams.write too) and, for a template that runs a crew's
 * graph, authority covering every seat of it (the crew-run route's check, on
 * the graph the run compiles). The definition itself is not changed: not its
 * next fire, not its fire count, not its last run; a paused (disabled)
 * definition may be run too. The run says where it came from and who fired it
 * (`source: schedule:<id>`, `flags: { schedule_id, fired_by, manual: true }`)
 * and the audit trail records `jobs.definition.run`.
 */
import { ServiceError } from '../../core/errors.ts';
import type { AuthContext } from '../context.ts';
import type { Run } from '../runs/api.ts';
import type { JobsContext } from './context.ts';
import { assertDefinitionSeats, assertMayAuthor } from './definition-authority.ts';
import { assertNotDeleted } from './definitions.ts';
import type { Definition } from './repository.ts';
import { submitJobRun } from './runner.ts';

/** Starts one run of `d` as the caller; answers the run as it was recorded. */
export async function runDefinitionNow(ctx: JobsContext, auth: AuthContext, d: Definition): Promise<Run> {
  assertNotDeleted(d);
  assertMayAuthor(auth, d.job_type);
  const caller = auth.principal.id;
  const flags = { schedule_id: d.schedule_id, fired_by: caller, manual: true };
  const source = `schedule:${d.schedule_id}`;
  let run: Run;
  if (d.job_type === 'team') {
    const spec = d.spec as { crew_id?: string; input?: unknown };
    run = await startTeamRun(ctx, auth, d, spec, flags, source);
  } else {
    await assertDefinitionSeats(ctx, auth, d, 'jobs.definition.run');
    ({ run } = await submitJobRun(ctx, {
      job_type: d.job_type,
      workspace_id: d.workspace_id,
      spec: d.spec,
      requester: caller,
      requesterActors: auth.credential.actors,
      source,
      flags,
    }));
  }
  await audit(ctx, auth, d, run.run_id);
  return run;
}

/**
 * A team template's crew run as the caller. A run refused before its first step is a run too (409 with
 * `details.run_id`): it is flagged and audited like any other before the refusal goes back to the caller.
 */
async function startTeamRun(
  ctx: JobsContext,
  auth: AuthContext,
  d: Definition,
  spec: { crew_id?: string; input?: unknown },
  flags: Record<string, unknown>,
  source: string,
): Promise<Run> {
  const caller = auth.principal.id;
  let run: Run;
  try {
    run = await ctx.teams.startCrewRun(
      caller,
      String(spec.crew_id),
      { input: spec.input ?? null, workspace_id: d.workspace_id },
      {
        // The caller's seat check, on the graph the run compiles (the crew-run route's).
        check: (graph) => ctx.teams.assertSeatsWithinCaller(auth, graph, { action: 'jobs.definition.run', target: d.schedule_id }),
        requesterActors: auth.credential.actors,
        source,
      },
    );
  } catch (e) {
    const refused = e instanceof ServiceError ? e.details?.['run_id'] : undefined;
    if (typeof refused === 'string') {
      await ctx.runs.setRunFlags(refused, flags);
      await audit(ctx, auth, d, refused);
    }
    throw e;
  }
  await ctx.runs.setRunFlags(run.run_id, flags);
  return run;
}

function audit(ctx: JobsContext, auth: AuthContext, d: Definition, runId: string): Promise<void> {
  return ctx.iam.auditNow({
    actor: auth.principal.id,
    action: 'jobs.definition.run',
    target: d.schedule_id,
    outcome: 'ok',
    details: { run_id: runId, job_type: d.job_type, credential: auth.credential.id },
  });
}
