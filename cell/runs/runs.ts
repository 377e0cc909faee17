/**
 * The `runs` table: one row per orchestration run, crew runs and job runs
 * alike (one run id space). A run's identifier is `run_` + 80 random bits,
 * reused by its journal and its event stream.
 *
 * States: queued -> running -> (waiting <-> running) -> completed | failed |
 * refused | cancelled. The four last are terminal: once a run is terminal its
 * state never changes again and its journal is closed (see journal.ts).
 *
 * Writes go through `store.write` and are durable when they resolve.
 */
import { newId } from '../ids.ts';
import type { Reader, Tx } from '../store/types.ts';
import type { RunsContext } from './context.ts';
import { isoTime } from '../../core/iso-time.ts';
import type { JsonObject } from '../../core/journal/record.ts';
import { isReason, type Reason } from '../../core/reasons.ts';
import type { RunRequester } from '../../core/engine/approval-rule.ts';
import * as repo from './repository.ts';
import { TERMINAL_STATES, type Run, type RunError, type RunKind, type RunState } from './repository.ts';

export { RUN_STATES, TERMINAL_STATES, type Run, type RunError, type RunKind, type RunState } from './repository.ts';

export function isTerminal(state: string): boolean {
  return (TERMINAL_STATES as readonly string[]).includes(state);
}

/** A fresh run id: `run_` + 20 hex digits (80 random bits). */
export function newRunId(): string {
  return newId('run');
}

/**
 * A run queued or running whose journal has not grown for this many leases
 * (`--lease-ms`, default 2 s: 20 s) is `stalled` in its views and counted by
 * the `cell_runs_stalled` gauge: its driver is slow (a model call that takes
 * that long), blocked, or gone and not taken over. Waiting runs never are.
 */
export const STALL_LEASES = 10;

/** Whether a run is stalled at `now` (STALL_LEASES). */
export function isStalled(run: Run, now: number, leaseMs: number): boolean {
  if (run.state !== 'queued' && run.state !== 'running') return false;
  return now - (run.progress_at ?? run.created_at) > STALL_LEASES * leaseMs;
}

export interface NewRun {
  run_id?: string;
  kind: RunKind;
  job_type?: string | null;
  crew_id?: string | null;
  workspace_id?: string | null;
  requester: string;
  /**
   * The actors of the token the run was requested with (RFC 8693 `act`, current first), kept as
   * `flags.requester_actors`: no principal of the requester's chain approves its two-person steps.
   */
  requesterActors?: readonly string[] | undefined;
  state?: RunState;
  graph_hash?: string | null;
  spec: unknown;
  flags?: Record<string, unknown>;
  coordinator?: string | null;
  source?: string;
  /** Creation time (ms); pass `clock.now()`. */
  at: number;
  /** What the executing cell must meet (placement); every claim of the run enforces it. */
  placement?: { clearance: number; topology: Record<string, string> };
  /**
   * The run is refused at its start (decided before this commit): kept as `flags.refusal` in the creating
   * transaction, so the run is never driven, by anyone; whoever picks it up ends it `refused` with it
   * (completeRefusal, journal.ts).
   */
  refusal?: PendingRefusal;
}

/** A refusal decided before a run was recorded (its start's answer, 409): `flags.refusal` of the run until it ends with it. */
export interface PendingRefusal {
  reason: Reason;
  message: string;
  details: JsonObject;
}

/** The refusal a run was recorded with (`flags.refusal`): it is never driven, only ended `refused`; null for any other run. */
export function pendingRefusal(run: Pick<Run, 'flags'>): PendingRefusal | null {
  return refusalOf(run.flags);
}

/** `flags.refusal` as a PendingRefusal, or null. */
export function refusalOf(flags: Record<string, unknown> | undefined): PendingRefusal | null {
  const r = flags?.['refusal'];
  if (typeof r !== 'object' || r === null || Array.isArray(r)) return null;
  const { reason, message, details } = r as Record<string, unknown>;
  // Only this code writes the flag, with a declared reason (core/reasons.ts).
  if (!isReason(reason)) return null;
  return {
    reason,
    message: typeof message === 'string' ? message : `the run was refused: ${reason}`,
    details: typeof details === 'object' && details !== null && !Array.isArray(details) ? (details as JsonObject) : {},
  };
}

/** Inserts a run inside the caller's transaction; returns its id. State defaults to `queued`. */
export async function createRunTx(tx: Tx, r: NewRun): Promise<string> {
  return (await recordRunTx(tx, r)).run_id;
}

/**
 * Inserts a run inside the caller's transaction and answers it as inserted,
 * without reading it back (a read of the runs table in the creating
 * transaction makes runs created at once conflict: repo.insertRun).
 * `leaseEpoch` 1: the run is recorded claimed by its coordinator (opening.ts recordDrivenRunTx).
 */
export function recordRunTx(tx: Tx, r: NewRun, leaseEpoch = 0): Promise<Run> {
  const id = r.run_id ?? newRunId();
  return repo.insertRun(tx, {
    run_id: id,
    kind: r.kind,
    job_type: r.job_type ?? null,
    crew_id: r.crew_id ?? null,
    workspace_id: r.workspace_id ?? null,
    requester: r.requester,
    state: r.state ?? 'queued',
    graph_hash: r.graph_hash ?? null,
    spec: r.spec ?? null,
    flags: {
      ...r.flags,
      ...(r.requesterActors?.length ? { requester_actors: [...r.requesterActors] } : {}),
      ...(r.refusal ? { refusal: { ...r.refusal } } : {}),
    },
    coordinator: r.coordinator ?? null,
    source: r.source ?? 'api',
    at: r.at,
    lease_epoch: leaseEpoch,
    need_clearance: r.placement?.clearance ?? 0,
    need_topology: r.placement?.topology ?? {},
  });
}

/** The run, or undefined when this cell does not know it; pass a transaction as `db` to read it inside it. */
export function getRun(ctx: RunsContext, runId: string, db: Reader = ctx.core.store): Promise<Run | undefined> {
  return repo.runById(db, runId);
}

/** A page of the runs a filter selects. */
export interface ListRunsOptions extends repo.RunFilter {
  limit: number;
  offset: number;
}

/**
 * Runs in a stable order: the order they were recorded (oldest first). New
 * runs only ever append, so a page that was read stays the same page.
 */
export async function listRuns(ctx: RunsContext, o: ListRunsOptions): Promise<{ items: Run[]; total: number }> {
  const { limit, offset, ...f } = o;
  const total = await repo.countRuns(ctx.core.store, f);
  const items = await repo.listRuns(ctx.core.store, f, limit, offset);
  return { items, total };
}

/** Runs in non-terminal states (recovery sweeps), in the order they were recorded; `db`: read inside a caller's transaction. */
export function activeRuns(ctx: RunsContext, kind?: RunKind, db: Reader = ctx.core.store): Promise<Run[]> {
  return repo.activeRuns(db, kind);
}

export interface StatePatch {
  output?: unknown;
  error?: RunError | null;
  graph_hash?: string;
  coordinator?: string;
}

/**
 * Moves a non-terminal run to `state` inside a transaction. Returns false (and
 * changes nothing) when the run is unknown or already terminal: terminal
 * states are final. Prefer `finishRun` (journal.ts) for terminal states: it
 * also writes the terminal journal record in the same transaction.
 */
export function setRunStateTx(tx: Tx, runId: string, state: RunState, at: number, patch: StatePatch = {}): Promise<boolean> {
  return repo.updateRunState(tx, runId, {
    state,
    at,
    terminal: isTerminal(state),
    ...('output' in patch ? { output: JSON.stringify(patch.output ?? null) } : {}),
    ...('error' in patch ? { error: patch.error ?? null } : {}),
    ...(patch.graph_hash !== undefined ? { graph_hash: patch.graph_hash } : {}),
    ...(patch.coordinator !== undefined ? { coordinator: patch.coordinator } : {}),
  });
}

/** Durable `setRunStateTx` of its own. */
export function setRunState(ctx: RunsContext, runId: string, state: RunState, patch: StatePatch = {}): Promise<boolean> {
  const at = ctx.core.clock.now();
  return ctx.core.store.write((tx) => setRunStateTx(tx, runId, state, at, patch));
}

/** Appends `item` to the list flag `key` of a run (read and written under the run's row lock: concurrent appends all stay). */
export async function pushRunFlag(ctx: RunsContext, runId: string, key: string, item: unknown): Promise<void> {
  const at = ctx.core.clock.now();
  await ctx.core.store.write(
    async (tx) => {
      if (!(await repo.lockRunRow(tx, runId, at))) return;
      const current = await repo.runFlags(tx, runId);
      if (current === undefined) return;
      const list = Array.isArray(current[key]) ? (current[key] as unknown[]) : [];
      await repo.updateRunFlags(tx, runId, { ...current, [key]: [...list, item] }, at);
    },
    { isolation: 'row-locks' },
  );
}

/** Merges `flags` into the run's flags (e.g. `{ investigate: {...} }`); nothing for an unknown run. */
export async function setRunFlags(ctx: RunsContext, runId: string, flags: Record<string, unknown>): Promise<void> {
  const at = ctx.core.clock.now();
  // The run's row is locked first: its journal appends lock it too, and neither waits for a serialization retry.
  await ctx.core.store.write(
    async (tx) => {
      if (!(await repo.lockRunRow(tx, runId, at))) return;
      const current = await repo.runFlags(tx, runId);
      if (current === undefined) return;
      await repo.updateRunFlags(tx, runId, { ...current, ...flags }, at);
    },
    { isolation: 'row-locks' },
  );
}

/** Who requested a run: the principal and the actors of the token it requested it with (`flags.requester_actors`). */
export function requesterOf(run: Pick<Run, 'requester' | 'flags'>): RunRequester {
  const actors = run.flags['requester_actors'];
  return {
    id: run.requester,
    actors: Array.isArray(actors) ? actors.filter((a): a is string => typeof a === 'string') : [],
  };
}

/** A run's forks and reruns as its views show them (`flags.forks`, the time as ISO 8601), oldest first. */
export function forksView(run: Run): { run_id: string; seq: number; by: string; at: string }[] {
  const forks = run.flags['forks'];
  if (!Array.isArray(forks)) return [];
  return forks.map((f: { run_id: string; seq: number; by: string; at: number }) => ({
    run_id: f.run_id,
    seq: f.seq,
    by: f.by,
    at: isoTime(f.at),
  }));
}
