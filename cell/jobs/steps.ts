/**
 * What each job step does, behind the engine's tools port (graph.ts names
 * the tools): `job.sql`, `job.compute`, `job.notebook` (one notebook cell) and,
 * for `single`, a tool of the governed catalog (cell/tools).
 *
 * A sandbox failure (time cap, memory cap, output cap, script or SQL error,
 * cancel) throws a JobStepFailure carrying a machine reason; the runner
 * (runner.ts) turns it into the run's error.
 *
 * Storage: a SQL step returns at most the bytes of rows the run can still
 * store twice (in its journal and as its output; cell/runs/storage.ts; rows
 * past it are dropped, `truncated_by: byte_limit`), and its database file, together with those rows, may take only
 * what the workspace's quota leaves after its runs (`sqlStorageCaps`).
 *
 * Where a workspace's SQL database is: on the embedded engine its SQLite file
 * (sandbox/sql.ts); on the PostgreSQL engine a database of its own on the
 * group's server, the same for every cell (sandbox/pg-workspace.ts). Either
 * way a SQL step commits its effect record with its statements (the effect
 * key is an HMAC, under the workspace's sealed secret, of the run and the
 * step: workspace-secrets.ts), out of the job's reach, so a step run again
 * after a crash before its journal record returns the recorded result and
 * applies nothing twice.
 */
import { createHmac } from 'node:crypto';
import { join } from 'node:path';
import type { JsonObject } from '../../core/journal/record.ts';
import { capToCeiling, withinCeiling, type Ceiling } from '../../core/authority/ceiling.ts';
import { isServiceError } from '../../core/errors.ts';
import type { WireReason } from '../../core/reasons.ts';
import type { JobsContext } from './context.ts';
import { outageWait } from '../runs/api.ts';
import type { SqlParam } from './sandbox/sql.ts';
import type { ComputeSpec, NotebookCell, NotebookSpec, SingleSpec, SqlSpec } from './shapes.ts';
import { workspaceSecrets, WorkspaceSecretUnreadable } from './workspace-secrets.ts';

/** A job step that did not produce an output, with a machine reason. */
export class JobStepFailure extends Error {
  constructor(
    readonly reason: WireReason,
    message: string,
    readonly details: JsonObject = {},
  ) {
    super(message);
    this.name = 'JobStepFailure';
  }
}

export function workspaceDbPath(dataDir: string, workspaceId: string): string {
  return join(dataDir, 'workspaces', workspaceId, 'sql.sqlite');
}

/** A SQL step on the workspace's file: its size as last measured is forgotten when the step starts and when it ends. */
async function sqlOnFile<T>(ctx: JobsContext, ws: string, fn: () => Promise<T>): Promise<T> {
  ctx.workspaceFileSizes.delete(ws);
  try {
    return await fn();
  } finally {
    ctx.workspaceFileSizes.delete(ws);
  }
}

/** Runs `fn` after the workspace's earlier SQL steps (single writer per database file). */
function inWorkspaceQueue<T>(ctx: JobsContext, ws: string, fn: () => Promise<T>): Promise<T> {
  const m = ctx.workspaceQueues;
  const prev = m.get(ws) ?? Promise.resolve();
  const next = prev.then(fn, fn);
  const settled = next.then(
    () => undefined,
    () => undefined,
  );
  m.set(ws, settled);
  void settled.then(() => {
    if (m.get(ws) === settled) m.delete(ws);
  });
  return next;
}

type SqlLike = Pick<SqlSpec, 'row_limit' | 'time_limit_ms'> & {
  sql?: string | undefined;
  params?: SqlSpec['params'];
  statements?: SqlSpec['statements'];
};

/** Room kept for a step's journal records and wrapper around its result, bytes. */
const STEP_RECORD_ROOM = 8 * 1024;

export interface SqlStorageCaps {
  maxResultBytes: number;
  maxDbBytes: number;
}

/**
 * What a SQL step of run `runId` may return and grow its database to: the
 * result gets half of what the run can still store, less the earlier notebook
 * cells' outputs `prior` (the run's output, kept on the run row, repeats the
 * result and those outputs once more); the database file and that result
 * together get what the workspace's quota leaves after its runs.
 */
export async function sqlStorageCaps(
  ctx: JobsContext,
  runId: string,
  workspaceId: string,
  prior: readonly unknown[] = [],
): Promise<SqlStorageCaps> {
  const left = await ctx.runs.storageLeft(runId);
  const forResult = (left - (prior.length ? Buffer.byteLength(JSON.stringify(prior), 'utf8') : 0)) / 2;
  const ws = await ctx.runs.workspaceUsage(workspaceId);
  return {
    maxResultBytes: Math.max(0, Math.floor(forResult) - STEP_RECORD_ROOM),
    maxDbBytes: Math.max(0, ws.quota_bytes - ws.run_bytes - STEP_RECORD_ROOM),
  };
}

/** Names the effect record of step `stepId` of run `runId` (sandbox/sql.ts): only the cell can compute it. */
export function effectKey(secret: string, runId: string, stepId: string): string {
  return createHmac('sha256', Buffer.from(secret, 'hex')).update(`${runId}\n${stepId}`).digest('hex');
}

/** The key of the workspace's effect records' MACs (sandbox/sql.ts), derived from its secret. */
export function effectMacKey(secret: string): string {
  return createHmac('sha256', Buffer.from(secret, 'hex')).update('agent-cell effect record mac v1').digest('hex');
}

/**
 * `true` only in the fault build of the cell (scripts/build.mjs: `dist/test/cell-crash-after-sql-effect.mjs`,
 * for the crash tests): the process SIGKILLs itself right after a SQL step's effect committed, before its
 * journal record. The shipped bundle defines it `false` and esbuild drops the branch: the program has no such hook.
 */
declare const AGENT_CELL_CRASH_AFTER_SQL_EFFECT: boolean | undefined;

/** The SQL step `step` (`run_id`, node id) on the workspace's database, once: a step run again returns its recorded result. */
export async function runSqlStep(
  ctx: JobsContext,
  workspaceId: string,
  spec: SqlLike,
  signal: AbortSignal,
  caps: SqlStorageCaps,
  step: { runId: string; stepId: string },
): Promise<unknown> {
  const statements = (spec.statements ?? [{ sql: spec.sql!, ...(spec.params !== undefined ? { params: spec.params } : {}) }]).map((s) => ({
    sql: s.sql,
    ...(s.params !== undefined ? { params: s.params as SqlParam[] | Record<string, SqlParam> } : {}),
  }));
  const secrets = await workspaceSecrets(ctx, workspaceId).catch((err: unknown) => {
    if (err instanceof WorkspaceSecretUnreadable) throw new JobStepFailure('secret_unreadable', err.message);
    throw err;
  });
  const common = {
    statements,
    rowLimit: spec.row_limit,
    maxResultBytes: caps.maxResultBytes,
    maxDbBytes: caps.maxDbBytes,
    effectKey: effectKey(secrets.effectKey, step.runId, step.stepId),
    effectMacKey: effectMacKey(secrets.effectKey),
    now: ctx.core.clock.now(),
  };
  const pgw = ctx.pgWorkspaces;
  const once = () =>
    inWorkspaceQueue(ctx, workspaceId, () =>
      pgw
        ? pgw.run({ ...common, workspaceId, rolePassword: secrets.rolePassword, timeLimitMs: spec.time_limit_ms }, signal)
        : sqlOnFile(ctx, workspaceId, () =>
            ctx.pool.sql({ ...common, dbPath: workspaceDbPath(ctx.core.config.dataDir, workspaceId) }, spec.time_limit_ms, signal),
          ),
    );
  let r = await once();
  // The workspace database went away (a PostgreSQL outage): the task is run again once it answers, while the
  // run is driven here. Its effect key makes that exactly once: a COMMIT that was kept is read back, not redone.
  for (let attempt = 0; !r.ok && 'unreachable' in r && r.unreachable && !signal.aborted; attempt++) {
    if (attempt === 0) ctx.core.log.warn('a SQL step waits for the workspace database', { run_id: step.runId, step_id: step.stepId });
    await outageWait(attempt);
    if (signal.aborted) break;
    r = await once();
  }
  if (typeof AGENT_CELL_CRASH_AFTER_SQL_EFFECT !== 'undefined' && AGENT_CELL_CRASH_AFTER_SQL_EFFECT && r.ok && !r.replayed)
    process.kill(process.pid, 'SIGKILL');
  if (!r.ok) {
    const details: JsonObject = { duration_ms: r.duration_ms };
    if ('statement' in r) details['statement'] = r.statement;
    if ('refused' in r && r.refused !== undefined) details['refused'] = r.refused;
    if (r.reason === 'workspace_quota') details['limit_bytes'] = caps.maxDbBytes;
    throw new JobStepFailure(r.reason, r.message, details);
  }
  return { results: r.results, duration_ms: r.duration_ms };
}

type ComputeLike = Pick<ComputeSpec, 'code' | 'time_limit_ms' | 'memory_limit_bytes' | 'output_limit_bytes'>;

export async function runComputeStep(ctx: JobsContext, spec: ComputeLike, input: unknown, signal: AbortSignal): Promise<unknown> {
  const r = await ctx.pool.compute(
    {
      code: spec.code,
      input: input ?? null,
      timeLimitMs: spec.time_limit_ms,
      memoryLimitBytes: spec.memory_limit_bytes,
      outputLimitBytes: spec.output_limit_bytes,
    },
    signal,
  );
  if (!r.ok) throw new JobStepFailure(r.reason, r.message, { logs: r.logs, duration_ms: r.duration_ms });
  return { result: r.output, logs: r.logs, duration_ms: r.duration_ms };
}

/** One notebook cell of run `runId`; `prior` are the outputs of the cells before it. */
export async function runNotebookCell(
  ctx: JobsContext,
  runId: string,
  workspaceId: string,
  nb: NotebookSpec,
  index: number,
  prior: unknown[],
  signal: AbortSignal,
): Promise<unknown> {
  const c: NotebookCell | undefined = nb.cells[index];
  if (!c) throw new JobStepFailure('invalid_spec', `notebook has no cell ${index}`);
  switch (c.type) {
    case 'markdown':
      return { type: 'markdown', source: c.source };
    case 'sql':
      return {
        type: 'sql',
        ...((await runSqlStep(ctx, workspaceId, c, signal, await sqlStorageCaps(ctx, runId, workspaceId, prior), {
          runId,
          stepId: `cell-${index}`,
        })) as object),
      };
    case 'compute': {
      const input = c.input !== undefined ? c.input : { input: nb.input ?? null, cells: prior };
      return { type: 'compute', ...((await runComputeStep(ctx, c, input, signal)) as object) };
    }
  }
}

/** What a `single` job's tool may reach: what the spec asks (default: its workspace only) within `ceiling`. */
export function singleAuthority(spec: SingleSpec, workspaceId: string, ceiling: Ceiling): NonNullable<SingleSpec['authority']> {
  const asked = {
    egress_allowlist: spec.authority?.egress_allowlist ?? [`kv:${workspaceId}`],
    data_grant_ids: spec.authority?.data_grant_ids ?? [`kv:${workspaceId}`],
    clearance_level: spec.authority?.clearance_level ?? 0,
    compartments: spec.authority?.compartments ?? [],
  };
  const capped = capToCeiling(asked, ceiling);
  return {
    egress_allowlist: capped.egress_allowlist ?? [],
    data_grant_ids: capped.data_grant_ids ?? [],
    clearance_level: capped.clearance_level ?? 0,
    compartments: capped.compartments ?? [],
  };
}

/**
 * A `single` job: one catalog tool, once, with the authority recorded at submit
 * (the requester's ∩ the spec's), narrowed again by the requester's ceiling now:
 * an archived requester or a lowered ceiling holds from the next step on.
 */
export async function runSingleTool(
  ctx: JobsContext,
  workspaceId: string,
  requester: string,
  spec: SingleSpec,
  signal?: AbortSignal,
  effectKey?: string,
): Promise<unknown> {
  if (!ctx.tools.has(spec.tool)) throw new JobStepFailure('tool_unknown', `no tool named ${spec.tool} in the catalog`);
  const who = await ctx.iam.principal(requester);
  if (who?.status !== 'active') throw new JobStepFailure('requester_inactive', "the run's requester is no longer an active principal");
  if (!withinCeiling({ allowed_tools: [spec.tool] }, who.authority).ok) {
    throw new JobStepFailure('tool_not_granted', `the requester's authority no longer includes the tool ${spec.tool}`);
  }
  const authority = singleAuthority(spec, workspaceId, who.authority);
  try {
    return await ctx.tools.run(
      spec.tool,
      { workspaceId, agentId: requester, authority, ...(effectKey !== undefined ? { effectKey } : {}) },
      spec.args,
      signal,
    );
  } catch (err) {
    // A call that may have acted and got no answer stays what it is: the engine waits for an operator.
    if (isServiceError(err) && err.details?.['reason'] === 'outcome_unknown') throw err;
    if (isServiceError(err)) {
      const reason = typeof err.details?.['reason'] === 'string' ? err.details['reason'] : err.code;
      throw new JobStepFailure(reason, err.message, { code: err.code });
    }
    throw new JobStepFailure('tool_error', `the tool ${spec.tool} failed`);
  }
}
