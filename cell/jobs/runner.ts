/**
 * Submitting and driving job runs. `submitJobRun` is the one submit path: the
 * POST jobs/runs route, the scheduler (definitions) and published endpoints
 * all go through it. It records the run (state queued, requester from the
 * caller's session) and starts driving it on the engine (cell/runs/drive.ts)
 * in the background; the returned `done` resolves when the drive stops.
 *
 * The engine's tools port for a job run (jobToolsPort) maps the job tools of
 * graph.ts to the sandboxed steps of steps.ts, and `single` to the governed
 * catalog (cell/tools).
 */
import { invalid, notFound } from '../../core/errors.ts';
import type { RunResult, ToolDescriptor, ToolsPort } from '../../core/engine/types.ts';
import type { AuthContext } from '../context.ts';
import type { DrivenRun, DriveResult, NewRun, Run, RunError } from '../runs/api.ts';
import type { Tx } from '../store/types.ts';
import { validationError } from '../http/errors.ts';
import { stepDeadline } from '../../runtime/step-deadline.ts';
import { driveAgentRun } from './agent.ts';
import type { JobsContext } from './context.ts';
import { JOB_TOOLS, jobGraph, jobGraphHash, notebookNodeId } from './graph.ts';
import { SPEC_BY_TYPE, type ComputeSpec, type NotebookSpec, type RunJobType, type SingleSpec, type SqlSpec } from './shapes.ts';
import { JobStepFailure, runComputeStep, runNotebookCell, runSingleTool, runSqlStep, singleAuthority, sqlStorageCaps } from './steps.ts';

/** Validates a run spec for its job type (defaults applied); 400 invalid_request naming the fields. */
export function parseRunSpec(ctx: JobsContext, jobType: RunJobType, spec: unknown): unknown {
  const r = SPEC_BY_TYPE[jobType].safeParse(spec);
  if (!r.success) {
    const e = validationError(r.error);
    throw invalid(`spec is not a valid ${jobType} spec`, { reason: 'invalid_spec', ...(e.details ?? {}) });
  }
  if (jobType === 'single' && !ctx.tools.has((r.data as SingleSpec).tool)) {
    throw invalid(`no tool named ${(r.data as SingleSpec).tool} in the catalog`, { reason: 'tool_unknown' });
  }
  return r.data;
}

/**
 * A `single` job's authority is the requester's, intersected with what the spec asks (default:
 * its workspace only): never the spec alone. The tool itself must be within the caller's
 * `allowed_tools` (403 wider_than_caller, audited). The effective authority is written into
 * the run's spec, so the run shows what it may reach; execution narrows it again by the
 * requester's ceiling at that moment (steps.ts).
 */
export async function boundSingleSpec(ctx: JobsContext, auth: AuthContext, workspaceId: string, spec: SingleSpec): Promise<SingleSpec> {
  await ctx.iam.assertWithinCaller(auth, { envelope: { allowed_tools: [spec.tool] } }, { action: 'jobs.run', target: workspaceId });
  return { ...spec, authority: singleAuthority(spec, workspaceId, auth.envelope) };
}

export interface SubmitJob {
  /** A run's job type; `agent` for a definition's agent template (run-now.ts). */
  job_type: RunJobType | 'agent';
  workspace_id: string;
  /** A spec already validated by parseRunSpec. */
  spec: unknown;
  /** Principal id from the authenticated session (or the definition's author for scheduled runs). */
  requester: string;
  /** The actors of the token the requester used (an exchanged token's `act`): kept on the run, they never approve its two-person steps. */
  requesterActors?: readonly string[] | undefined;
  source?: string;
  run_id?: string;
  /** Flags the run starts with (a rerun: `forked_from`). */
  flags?: Record<string, unknown>;
  /** Written in the run's creating transaction (a rerun's audit record). */
  inTx?: (tx: Tx, runId: string) => Promise<void>;
  /**
   * Written to the run's journal before it is driven (a rerun: its lineage and reused records), after the
   * run's commit: idempotent (`again`: a retry, after the store came back; it reads what was kept).
   */
  opening?: (runId: string, again: boolean) => Promise<void>;
}

/**
 * Records a job run and starts driving it. A workspace (or a cell) whose runs
 * already keep as much as its storage quota allows is refused (409,
 * cell/runs/storage.ts); nothing is kept. The run is answered as its
 * creating transaction read it: once it commits, nothing refuses it (issue
 * 22); its opening, if any, and its drive follow, now or once the store is
 * back (cell/runs/opening.ts).
 */
export async function submitJobRun(ctx: JobsContext, j: SubmitJob): Promise<{ run_id: string; run: Run; done: Promise<DriveResult> }> {
  // On PostgreSQL the room is judged beside the creating transaction, which awaits it before its COMMIT
  // (a refusal rolls it back: nothing is kept); the embedded store judges it first.
  const room = ctx.runs.assertStorageRoom(j.workspace_id, Buffer.byteLength(JSON.stringify(j.spec ?? null), 'utf8'));
  room.catch(() => undefined);
  if (ctx.core.store.engine === 'embedded') await room;
  const at = ctx.core.clock.now();
  // Driven here at once with nothing written before: recorded claimed (cell/runs/opening.ts recordDrivenRunTx),
  // so the drive starts without a claim of its own. An agent run's drive decides its graph (and may refuse it)
  // when it starts; a rerun's opening follows the commit.
  const drivenNow = !j.opening && j.job_type !== 'agent';
  let claimed: DrivenRun['fence'] | undefined;
  const run = await ctx.core.store.write(async (tx) => {
    // Answered as inserted (RETURNING): a read of the runs table here would make job runs submitted at
    // once fail each other's serializable commits (issue 21).
    const newRun: NewRun = {
      ...(j.run_id ? { run_id: j.run_id } : {}),
      kind: 'job',
      job_type: j.job_type,
      workspace_id: j.workspace_id,
      requester: j.requester,
      requesterActors: j.requesterActors,
      spec: j.spec,
      source: j.source ?? 'api',
      at,
      // Known now: every record of the run's journal carries it, those written before its first claim
      // included (a rerun's lineage and reused records), so the journal verifies as one graph's.
      graph_hash: jobGraphHash(j.job_type, j.spec),
      ...(j.flags ? { flags: j.flags } : {}),
    };
    let r: Run;
    if (drivenNow) {
      const d = await ctx.runs.recordDrivenRunTx(tx, newRun);
      claimed = d.fence;
      r = d.run;
    } else r = await ctx.runs.recordRunTx(tx, newRun);
    const id = r.run_id;
    await ctx.iam.audit(tx, {
      at,
      actor: j.requester,
      action: 'jobs.run',
      target: id,
      outcome: 'ok',
      details: {
        job_type: j.job_type,
        workspace_id: j.workspace_id,
        source: j.source ?? 'api',
        ...(j.requesterActors?.length ? { actors: [...j.requesterActors] } : {}),
      },
    });
    await j.inTx?.(tx, id);
    await room;
    return r;
  });
  if (!j.opening) return { run_id: run.run_id, run, done: startJobDrive(ctx, run, claimed) };
  const opening = j.opening;
  let drove: (d: Promise<DriveResult>) => void = () => undefined;
  const done = new Promise<DriveResult>((res) => {
    drove = res;
  });
  await ctx.runs.afterCommit(
    run.run_id,
    (again) => opening(run.run_id, again),
    () => drove(startJobDrive(ctx, run)),
  );
  return { run_id: run.run_id, run, done };
}

/**
 * Cancels a run as the caller (the cancel route's one implementation, and an MCP call the client
 * cancelled): idempotent, audited `jobs.run.cancel` when it changed the run; 404 when unknown.
 */
export async function cancelJobRun(ctx: JobsContext, auth: AuthContext, runId: string): Promise<Run> {
  const actor = auth.principal.id;
  const before = await ctx.runs.getRun(runId);
  // A run acts as its requester: cancelling another's needs managing it (the shared-things rule).
  if (before) await ctx.iam.assertMayActOnOwned(auth, { kind: 'run', id: runId, ownerId: before.requester }, 'jobs.run.cancel');
  const run = await ctx.runs.requestCancel(runId, actor);
  if (!run) throw notFound('run');
  if (before && before.state !== run.state) {
    await ctx.iam.auditNow({ actor, action: 'jobs.run.cancel', target: runId, outcome: 'ok', details: { from: before.state } });
  }
  return run;
}

/** Drives a (new or recovered) job run in the background; `claimed`: the claim it was recorded with (submitJobRun). */
export function startJobDrive(ctx: JobsContext, run: Run, claimed?: DrivenRun['fence']): Promise<DriveResult> {
  const outputs = new Map<number, unknown>();
  const drive =
    run.job_type === 'agent'
      ? driveAgentRun(ctx, run).then((r) => {
          if (r.state === 'waiting') wakeAgentRunAt(ctx, run.run_id, r.result?.waiting?.wake_at ?? null);
          return r;
        })
      : ctx.runs.driveRun(run.run_id, jobGraph(run.job_type!, run.spec), { tools: jobToolsPort(ctx, run, outputs) }, null, {
          requester: run.requester,
          context: { job_type: run.job_type, workspace_id: run.workspace_id },
          describeError,
          finalOutput: (r) => finalOutput(ctx, run, r, outputs),
          ...(claimed ? { claimed } : {}),
        });
  const p = drive.catch((err: unknown): DriveResult => {
    ctx.core.log.error('job run drive failed', { run_id: run.run_id, error: err });
    return { state: 'failed', result: null };
  });
  ctx.inflight.add(p);
  void p.finally(() => ctx.inflight.delete(p));
  return p;
}

/**
 * Drives a waiting job run again (an approval decision arrived, its timer or
 * approval timeout is due, the cell started). No-op for a run that is not
 * waiting or is driven by this process now.
 */
export async function resumeJobRun(ctx: JobsContext, runId: string): Promise<DriveResult | undefined> {
  if (ctx.stopped) return undefined;
  const run = await ctx.runs.getRun(runId);
  if (run?.kind !== 'job' || run.state !== 'waiting' || ctx.runs.isDriven(runId)) return undefined;
  return startJobDrive(ctx, run);
}

/** Re-drives a waiting agent job run when its timer (or approval timeout) is due. */
function wakeAgentRunAt(ctx: JobsContext, runId: string, wakeAt: number | null): void {
  if (wakeAt === null || ctx.stopped) return;
  const delay = Math.min(Math.max(0, wakeAt - ctx.core.clock.now()), 2 ** 31 - 1);
  const t = setTimeout(() => {
    ctx.wakeTimers.delete(t);
    void resumeJobRun(ctx, runId);
  }, delay);
  t.unref();
  ctx.wakeTimers.add(t);
}

function describeError(r: RunResult): RunError {
  const c = r.cause;
  if (c instanceof JobStepFailure) {
    return { code: 'failed', reason: c.reason, message: c.message, ...(Object.keys(c.details).length ? { details: c.details } : {}) };
  }
  const reason = r.reason ?? r.outcome;
  return {
    code: r.outcome === 'refused' ? 'refused' : 'failed',
    reason,
    message: r.outcome === 'refused' ? `the run was refused: ${reason}` : `the run failed: ${reason}`,
    ...(r.details !== undefined ? { details: r.details } : {}),
  };
}

/** A notebook cell's output: from this drive, else as the journal recorded it (a recovered run). */
async function cellOutput(ctx: JobsContext, run: Run, outputs: Map<number, unknown>, i: number): Promise<unknown> {
  if (outputs.has(i)) return outputs.get(i);
  return (await ctx.runs.recordedStep(run.run_id, notebookNodeId(i)))?.output ?? null;
}

async function finalOutput(ctx: JobsContext, run: Run, r: RunResult, outputs: Map<number, unknown>): Promise<unknown> {
  if (run.job_type !== 'notebook') return r.output;
  const nb = run.spec as NotebookSpec;
  const cells: unknown[] = [];
  for (let i = 0; i < nb.cells.length; i++) cells.push(await cellOutput(ctx, run, outputs, i));
  return { cells };
}

const JOB_TOOL_DESCRIPTORS: Record<string, ToolDescriptor> = {
  [JOB_TOOLS.sql]: {
    name: JOB_TOOLS.sql,
    description: "The run's SQL statements on its workspace database",
    side_effects: true,
    // Its effect record, committed with its statements, makes a second issue return the first's result.
    idempotent: true,
    parameters: { type: 'object' },
  },
  [JOB_TOOLS.compute]: {
    name: JOB_TOOLS.compute,
    description: "The run's JavaScript in the QuickJS sandbox",
    side_effects: false,
    parameters: { type: 'object' },
  },
  [JOB_TOOLS.notebook]: {
    name: JOB_TOOLS.notebook,
    description: 'One notebook cell',
    side_effects: true,
    // SQL cells commit their effect record with their statements; compute and markdown cells act on nothing outside.
    idempotent: true,
    parameters: { type: 'object', properties: { index: { type: 'integer' } } },
  },
};

/**
 * The engine's tools port for one job run. Each call gets a signal that aborts when this process's driver of
 * the run stops (a cancel) or at the step's `timeout_ms` (the spec's): the sandbox stops the work (a compute
 * task is interrupted, an embedded SQL task's worker terminated, a PostgreSQL job's backend terminated, a
 * catalog tool's request aborted) and the step fails `step_timeout` at the deadline.
 */
export function jobToolsPort(ctx: JobsContext, run: Run, outputs: Map<number, unknown>): ToolsPort {
  const ws = run.workspace_id ?? 'default';
  return {
    describe(name) {
      const d = JOB_TOOL_DESCRIPTORS[name];
      if (d) return d;
      if (run.job_type !== 'single') return undefined;
      return ctx.tools.describe(name);
    },
    call(name, args, callCtx) {
      const deadline = stepDeadline(callCtx.timeout_ms, ctx.runs.driverSignal(run.run_id));
      return deadline.race(callTool(name, args, deadline.signal ?? new AbortController().signal, callCtx.effect_key));
    },
  };
  async function callTool(name: string, args: Record<string, unknown>, signal: AbortSignal, effectKey?: string): Promise<unknown> {
    switch (name) {
      case JOB_TOOLS.sql:
        return runSqlStep(ctx, ws, run.spec as SqlSpec, signal, await sqlStorageCaps(ctx, run.run_id, ws), {
          runId: run.run_id,
          stepId: 'sql',
        });
      case JOB_TOOLS.compute: {
        const spec = run.spec as ComputeSpec;
        return runComputeStep(ctx, spec, spec.input, signal);
      }
      case JOB_TOOLS.notebook: {
        const index = Number(args['index']);
        const prior: unknown[] = [];
        for (let i = 0; i < index; i++) prior.push(await cellOutput(ctx, run, outputs, i));
        const out = await runNotebookCell(ctx, run.run_id, ws, run.spec as NotebookSpec, index, prior, signal);
        outputs.set(index, out);
        return out;
      }
      default:
        if (run.job_type !== 'single') throw new JobStepFailure('tool_unknown', `tool ${name} is not part of this job`);
        return runSingleTool(ctx, ws, run.requester, { ...(run.spec as SingleSpec), tool: name, args }, signal, effectKey);
    }
  }
}
