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
 */
import { join } from 'node:path';
import type { JsonObject } from '../../core/journal/record.ts';
import type { Cell } from '../context.ts';
import { getTool } from '../tools/catalog.ts';
import { capToCeiling, withinCeiling, type Ceiling } from '../../core/authority/ceiling.ts';
import { getPrincipal } from '../iam/principals.ts';
import { isServiceError } from '../../core/errors.ts';
import { byteSize, storageLeft, workspaceUsage } from '../runs/storage.ts';
import type { SandboxPool } from './sandbox/pool.ts';
import type { SqlParam } from './sandbox/sql.ts';
import type { ComputeSpec, NotebookCell, NotebookSpec, SingleSpec, SqlSpec } from './schemas.ts';

/** A job step that did not produce an output, with a machine reason. */
export class JobStepFailure extends Error {
  constructor(readonly reason: string, message: string, readonly details: JsonObject = {}) {
    super(message);
    this.name = 'JobStepFailure';
  }
}

export function workspaceDbPath(cell: Cell, workspaceId: string): string {
  return join(cell.config.dataDir, 'workspaces', workspaceId, 'sql.sqlite');
}

/** Per-workspace queue: SQL jobs of one workspace run one at a time (single writer per database file). */
const queues = new WeakMap<Cell, Map<string, Promise<unknown>>>();
function inWorkspaceQueue<T>(cell: Cell, ws: string, fn: () => Promise<T>): Promise<T> {
  let m = queues.get(cell);
  if (!m) { m = new Map(); queues.set(cell, m); }
  const prev = m.get(ws) ?? Promise.resolve();
  const next = prev.then(fn, fn);
  const settled = next.then(() => undefined, () => undefined);
  m.set(ws, settled);
  const mm = m;
  void settled.then(() => { if (mm.get(ws) === settled) mm.delete(ws); });
  return next;
}

type SqlLike = Pick<SqlSpec, 'row_limit' | 'time_limit_ms'> & { sql?: string | undefined; params?: SqlSpec['params']; statements?: SqlSpec['statements'] };

/** Room kept for a step's journal records and wrapper around its result, bytes. */
const STEP_RECORD_ROOM = 8 * 1024;

export interface SqlStorageCaps { maxResultBytes: number; maxDbBytes: number }

/**
 * What a SQL step of run `runId` may return and grow its database to: the
 * result gets half of what the run can still store, less the earlier notebook
 * cells' outputs `prior` (the run's output, kept on the run row, repeats the
 * result and those outputs once more); the database file and that result
 * together get what the workspace's quota leaves after its runs.
 */
export function sqlStorageCaps(cell: Cell, runId: string, workspaceId: string, prior: readonly unknown[] = []): SqlStorageCaps {
  const left = storageLeft(cell, runId);
  const forResult = (left - (prior.length ? byteSize(JSON.stringify(prior)) : 0)) / 2;
  const ws = workspaceUsage(cell, workspaceId);
  return {
    maxResultBytes: Math.max(0, Math.floor(forResult) - STEP_RECORD_ROOM),
    maxDbBytes: Math.max(0, ws.quota_bytes - ws.run_bytes - STEP_RECORD_ROOM),
  };
}

export async function runSqlStep(cell: Cell, pool: SandboxPool, workspaceId: string, spec: SqlLike, signal: AbortSignal, caps: SqlStorageCaps): Promise<unknown> {
  const statements = (spec.statements ?? [{ sql: spec.sql!, ...(spec.params !== undefined ? { params: spec.params } : {}) }])
    .map((s) => ({ sql: s.sql, ...(s.params !== undefined ? { params: s.params as SqlParam[] | Record<string, SqlParam> } : {}) }));
  const r = await inWorkspaceQueue(cell, workspaceId, () => pool.sql({
    dbPath: workspaceDbPath(cell, workspaceId), statements, rowLimit: spec.row_limit, maxResultBytes: caps.maxResultBytes, maxDbBytes: caps.maxDbBytes,
  }, spec.time_limit_ms, signal));
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

export async function runComputeStep(pool: SandboxPool, spec: ComputeLike, input: unknown, signal: AbortSignal): Promise<unknown> {
  const r = await pool.compute({
    code: spec.code, input: input ?? null,
    timeLimitMs: spec.time_limit_ms, memoryLimitBytes: spec.memory_limit_bytes, outputLimitBytes: spec.output_limit_bytes,
  }, signal);
  if (!r.ok) throw new JobStepFailure(r.reason, r.message, { logs: r.logs, duration_ms: r.duration_ms });
  return { result: r.output, logs: r.logs, duration_ms: r.duration_ms };
}

/** One notebook cell of run `runId`; `prior` are the outputs of the cells before it. */
export async function runNotebookCell(cell: Cell, pool: SandboxPool, runId: string, workspaceId: string, nb: NotebookSpec, index: number, prior: unknown[], signal: AbortSignal): Promise<unknown> {
  const c: NotebookCell | undefined = nb.cells[index];
  if (!c) throw new JobStepFailure('invalid_spec', `notebook has no cell ${index}`);
  switch (c.type) {
    case 'markdown':
      return { type: 'markdown', source: c.source };
    case 'sql':
      return { type: 'sql', ...(await runSqlStep(cell, pool, workspaceId, c, signal, sqlStorageCaps(cell, runId, workspaceId, prior)) as object) };
    case 'compute': {
      const input = c.input !== undefined ? c.input : { input: nb.input ?? null, cells: prior };
      return { type: 'compute', ...(await runComputeStep(pool, c, input, signal) as object) };
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
    egress_allowlist: capped.egress_allowlist ?? [], data_grant_ids: capped.data_grant_ids ?? [],
    clearance_level: capped.clearance_level ?? 0, compartments: capped.compartments ?? [],
  };
}

/**
 * A `single` job: one catalog tool, once, with the authority recorded at submit
 * (the requester's ∩ the spec's), narrowed again by the requester's ceiling now:
 * an archived requester or a lowered ceiling holds from the next step on.
 */
export async function runSingleTool(cell: Cell, workspaceId: string, requester: string, spec: SingleSpec): Promise<unknown> {
  const tool = getTool(spec.tool);
  if (!tool) throw new JobStepFailure('tool_unknown', `no tool named ${spec.tool} in the catalog`);
  const who = getPrincipal(cell, requester);
  if (!who || who.status !== 'active') throw new JobStepFailure('requester_inactive', 'the run\'s requester is no longer an active principal');
  if (!withinCeiling({ allowed_tools: [spec.tool] }, who.authority).ok) {
    throw new JobStepFailure('tool_not_granted', `the requester's authority no longer includes the tool ${spec.tool}`);
  }
  const authority = singleAuthority(spec, workspaceId, who.authority);
  try {
    return await tool.run({ cell, workspaceId, agentId: requester, authority }, spec.args);
  } catch (err) {
    if (isServiceError(err)) {
      const reason = typeof err.details?.['reason'] === 'string' ? err.details['reason'] : err.code;
      throw new JobStepFailure(reason, err.message, { code: err.code });
    }
    throw new JobStepFailure('tool_error', `the tool ${spec.tool} failed`);
  }
}
