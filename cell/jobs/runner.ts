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
import { invalid } from '../../core/errors.ts';
import type { RunResult, ToolDescriptor, ToolsPort } from '../../core/engine/types.ts';
import type { JsonObject } from '../../core/journal/record.ts';
import type { AuthContext, Cell } from '../context.ts';
import { assertWithinCaller } from '../iam/containment.ts';
import { driverSignal, isDriven } from '../runs/control.ts';
import { driveRun, recordedStep, type DriveResult } from '../runs/drive.ts';
import { createRunTx, getRun, type Run, type RunError } from '../runs/runs.ts';
import { assertStorageRoom, byteSize } from '../runs/storage.ts';
import { validationError } from '../http/errors.ts';
import { recordAuditTx } from '../iam/audit.ts';
import { getTool } from '../tools/catalog.ts';
import { driveAgentRun } from './agent.ts';
import { JOB_TOOLS, jobGraph, notebookNodeId } from './graph.ts';
import type { SandboxPool } from './sandbox/pool.ts';
import { SPEC_BY_TYPE, type ComputeSpec, type NotebookSpec, type RunJobType, type SingleSpec, type SqlSpec } from './schemas.ts';
import { JobStepFailure, runComputeStep, runNotebookCell, runSingleTool, runSqlStep, singleAuthority, sqlStorageCaps } from './steps.ts';

export interface JobsService {
  pool: SandboxPool;
  /** Drives in flight in this process (shutdown waits for them). */
  inflight: Set<Promise<DriveResult>>;
}

export function jobsService(cell: Cell): JobsService {
  const s = cell.services.get('jobs') as JobsService | undefined;
  if (!s) throw new TypeError('jobs module not initialised');
  return s;
}

/** Validates a run spec for its job type (defaults applied); 400 invalid_request naming the fields. */
export function parseRunSpec(jobType: RunJobType, spec: unknown): unknown {
  const r = SPEC_BY_TYPE[jobType].safeParse(spec);
  if (!r.success) {
    const e = validationError(r.error);
    throw invalid(`spec is not a valid ${jobType} spec`, { reason: 'invalid_spec', ...(e.details ?? {}) });
  }
  if (jobType === 'single' && !getTool((r.data as SingleSpec).tool)) {
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
export async function boundSingleSpec(cell: Cell, auth: AuthContext, workspaceId: string, spec: SingleSpec): Promise<SingleSpec> {
  await assertWithinCaller(cell, auth, { envelope: { allowed_tools: [spec.tool] } }, { action: 'jobs.run', target: workspaceId });
  return { ...spec, authority: singleAuthority(spec, workspaceId, auth.envelope) };
}

export interface SubmitJob {
  job_type: RunJobType;
  workspace_id: string;
  /** A spec already validated by parseRunSpec. */
  spec: unknown;
  /** Principal id from the authenticated session (or the definition's author for scheduled runs). */
  requester: string;
  source?: string;
  run_id?: string;
}

/**
 * Records a job run and starts driving it. A workspace (or a cell) whose runs
 * already keep as much as its storage quota allows is refused first (409,
 * cell/runs/storage.ts); nothing is written.
 */
export async function submitJobRun(cell: Cell, j: SubmitJob): Promise<{ run_id: string; done: Promise<DriveResult> }> {
  assertStorageRoom(cell, j.workspace_id, byteSize(JSON.stringify(j.spec ?? null)));
  const at = cell.clock.now();
  const runId = await cell.store.write((tx) => {
    const id = createRunTx(tx, {
      ...(j.run_id ? { run_id: j.run_id } : {}),
      kind: 'job', job_type: j.job_type, workspace_id: j.workspace_id, requester: j.requester, spec: j.spec,
      source: j.source ?? 'api', at,
    });
    recordAuditTx(tx, { at, actor: j.requester, action: 'jobs.run', target: id, outcome: 'ok', details: { job_type: j.job_type, workspace_id: j.workspace_id, source: j.source ?? 'api' } });
    return id;
  });
  return { run_id: runId, done: startJobDrive(cell, getRun(cell, runId)!) };
}

/** Drives a (new or recovered) job run in the background. */
export function startJobDrive(cell: Cell, run: Run): Promise<DriveResult> {
  const svc = jobsService(cell);
  const outputs = new Map<number, unknown>();
  const drive = run.job_type === 'agent'
    ? driveAgentRun(cell, run).then((r) => { if (r.state === 'waiting') wakeAgentRunAt(cell, run.run_id, r.result?.waiting?.wake_at ?? null); return r; })
    : driveRun(cell, run.run_id, jobGraph(run.job_type!, run.spec), { tools: jobToolsPort(cell, run, svc.pool, outputs) }, null, {
      requester: run.requester,
      context: { job_type: run.job_type, workspace_id: run.workspace_id },
      describeError,
      finalOutput: (r) => finalOutput(cell, run, r, outputs),
    });
  const p = drive.catch((err: unknown): DriveResult => {
    cell.log.error('job run drive failed', { run_id: run.run_id, error: err instanceof Error ? err.message : String(err) });
    return { state: 'failed', result: null };
  });
  svc.inflight.add(p);
  void p.finally(() => svc.inflight.delete(p));
  return p;
}

/**
 * Drives a waiting job run again (an approval decision arrived, its timer or
 * approval timeout is due, the cell started). No-op for a run that is not
 * waiting or is driven by this process now.
 */
export function resumeJobRun(cell: Cell, runId: string): Promise<DriveResult> | undefined {
  const run = getRun(cell, runId);
  if (!run || run.kind !== 'job' || run.state !== 'waiting' || isDriven(cell, runId)) return undefined;
  return startJobDrive(cell, run);
}

/** Re-drives a waiting agent job run when its timer (or approval timeout) is due. */
function wakeAgentRunAt(cell: Cell, runId: string, wakeAt: number | null): void {
  if (wakeAt === null) return;
  const delay = Math.min(Math.max(0, wakeAt - cell.clock.now()), 2 ** 31 - 1);
  const t = setTimeout(() => { void resumeJobRun(cell, runId); }, delay);
  t.unref();
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

function finalOutput(cell: Cell, run: Run, r: RunResult, outputs: Map<number, unknown>): unknown {
  if (run.job_type !== 'notebook') return r.output;
  const nb = run.spec as NotebookSpec;
  return { cells: nb.cells.map((_, i) => outputs.has(i) ? outputs.get(i) : (recordedStep(cell, run.run_id, notebookNodeId(i))?.output ?? null)) };
}

const JOB_TOOL_DESCRIPTORS: Record<string, ToolDescriptor> = {
  [JOB_TOOLS.sql]: { name: JOB_TOOLS.sql, description: 'The run\'s SQL statements on its workspace database', side_effects: true, parameters: { type: 'object' } },
  [JOB_TOOLS.compute]: { name: JOB_TOOLS.compute, description: 'The run\'s JavaScript in the QuickJS sandbox', side_effects: false, parameters: { type: 'object' } },
  [JOB_TOOLS.notebook]: { name: JOB_TOOLS.notebook, description: 'One notebook cell', side_effects: true, parameters: { type: 'object', properties: { index: { type: 'integer' } } } },
};

/** The engine's tools port for one job run. */
export function jobToolsPort(cell: Cell, run: Run, pool: SandboxPool, outputs: Map<number, unknown>): ToolsPort {
  const ws = run.workspace_id ?? 'default';
  const signal = () => driverSignal(cell, run.run_id) ?? new AbortController().signal;
  return {
    describe(name) {
      const d = JOB_TOOL_DESCRIPTORS[name];
      if (d) return d;
      if (run.job_type !== 'single') return undefined;
      const t = getTool(name);
      return t ? { name: t.name, description: t.description, side_effects: t.side_effects, parameters: t.parameters as JsonObject } : undefined;
    },
    async call(name, args) {
      switch (name) {
        case JOB_TOOLS.sql: return runSqlStep(cell, pool, ws, run.spec as SqlSpec, signal(), sqlStorageCaps(cell, run.run_id, ws));
        case JOB_TOOLS.compute: {
          const spec = run.spec as ComputeSpec;
          return runComputeStep(pool, spec, spec.input, signal());
        }
        case JOB_TOOLS.notebook: {
          const index = Number(args['index']);
          const prior: unknown[] = [];
          for (let i = 0; i < index; i++) prior.push(outputs.has(i) ? outputs.get(i) : (recordedStep(cell, run.run_id, notebookNodeId(i))?.output ?? null));
          const out = await runNotebookCell(cell, pool, run.run_id, ws, run.spec as NotebookSpec, index, prior, signal());
          outputs.set(index, out);
          return out;
        }
        default:
          if (run.job_type !== 'single') throw new JobStepFailure('tool_unknown', `tool ${name} is not part of this job`);
          return runSingleTool(cell, ws, run.requester, { ...(run.spec as SingleSpec), tool: name, args: args as Record<string, unknown> });
      }
    },
  };
}
