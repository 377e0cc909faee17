/**
 * The runs module's API, as the other modules use it (Agent Teams' crew
 * runs, Jobs' job runs, the scheduler): the run table, the signed journal,
 * live events, control (drivers, cancel), driving a graph on the engine, and
 * the approval rules every waiting run shares. Names are those of the
 * functions it wraps (runs.ts, journal.ts, events.ts, control.ts, drive.ts,
 * approvals.ts), without their context argument.
 */
import type { ApprovalsPort, Graph, RecordedStep } from '../../core/engine/types.ts';
import type { JournalRecord, JsonObject } from '../../core/journal/record.ts';
import { copyReused, forkPoint, openFork, type ForkPoint } from './fork.ts';
import { afterCommit } from './opening.ts';
import type { Reader, Tx } from '../store/types.ts';
import {
  assertStorageRoom,
  cellRunBytes,
  storageLeft,
  storageRoomRefusal,
  workspaceUsage,
  type StorageLimit,
  type WorkspaceUsage,
} from './storage.ts';
import { approvalsPort, pendingApprovals, pendingApprovalsView, recordApproval, stepDecisions, type PendingApproval } from './approvals.ts';
import type { RunDeltaListener, RunEventListener, RunsContext } from './context.ts';
import { z } from '@hono/zod-openapi';
import { IsoTime, queryTime } from '../http/openapi.ts';
import { abortAllDrivers, driverSignal, isDriven, registerDriver, requestCancel, type DriverHandle } from './control.ts';
import { heldByLivePeer, markUnplaceable, orphanedRuns, orphanedWaitingRuns, placeOnPeer } from './lease.ts';
import { beforeItLeaves, driveRun, recordedStep, type DriveOptions, type DrivePorts, type DriveResult } from './drive.ts';
import { subscribe, subscriberCount } from './events.ts';
import {
  appendJournal,
  completeRefusal,
  finishRun,
  journalClosed,
  stageRunWrite,
  readJournal,
  type AppendBlobs,
  type AppendFields,
  type FinishOptions,
} from './journal.ts';
import {
  activeRuns,
  createRunTx,
  getRun,
  isStalled,
  listRuns,
  newRunId,
  pendingRefusal,
  pushRunFlag,
  recordRunTx,
  RUN_ID_PATTERN,
  RUN_STATES,
  setRunFlags,
  setRunState,
  type ListRunsOptions,
  type NewRun,
  type PendingRefusal,
  type Run,
  type RunKind,
  type RunState,
  type StatePatch,
} from './runs.ts';

export class Runs {
  constructor(private readonly ctx: RunsContext) {}

  // ------------------------------------------------------------ the run table

  /** Inserts a run inside the caller's transaction (state `queued` unless given); returns its id. */
  createRunTx(tx: Tx, r: NewRun): Promise<string> {
    // The creating cell holds the run's lease until it claims it to drive it (or, if it dies first, a peer does).
    return createRunTx(tx, { ...r, coordinator: r.coordinator ?? this.ctx.core.config.cellId });
  }

  /**
   * `createRunTx`, answering the run as inserted (its creating transaction's view of it, without a read:
   * a read of the runs table there makes runs created at once conflict on PostgreSQL).
   */
  recordRunTx(tx: Tx, r: NewRun): Promise<Run> {
    return recordRunTx(tx, { ...r, coordinator: r.coordinator ?? this.ctx.core.config.cellId });
  }

  /** A fresh run id, for a run whose id must be known before it is created (a scheduled team fire). */
  newRunId(): string {
    return newRunId();
  }

  /** The run, or undefined when this cell does not know it; pass a transaction as `db` to read it inside it. */
  getRun(runId: string, db?: Reader): Promise<Run | undefined> {
    return getRun(this.ctx, runId, db);
  }

  /**
   * Writes that follow a run's creating commit (its opening records), idempotent: tried now, and while
   * the store is unreachable again in the background; `then` (the drive) runs once they are written.
   * True when written now (opening.ts).
   */
  afterCommit(runId: string, write: (again: boolean) => Promise<void>, then?: () => void): Promise<boolean> {
    return afterCommit(this.ctx, runId, write, then);
  }

  /** The refusal the run was recorded with (`flags.refusal`): it is never driven, only ended `refused`; else null. */
  pendingRefusal(run: Run): PendingRefusal | null {
    return pendingRefusal(run);
  }

  /** Whether the run is queued or running with no journal progress for STALL_LEASES leases (the views' `stalled`). */
  isStalled(run: Run): boolean {
    return isStalled(run, this.ctx.core.clock.now(), this.ctx.core.config.leaseMs);
  }

  /** A page of runs in the order they were recorded, and how many match in all. */
  listRuns(o: ListRunsOptions): Promise<{ items: Run[]; total: number }> {
    return listRuns(this.ctx, o);
  }

  /**
   * Runs in non-terminal states (recovery at start), in the order they were
   * recorded. Pass another module's transaction as `db` to read them inside it
   * (a delete that must see a run started concurrently).
   */
  activeRuns(kind?: RunKind, db?: Reader): Promise<Run[]> {
    return activeRuns(this.ctx, kind, db);
  }

  /** Moves a non-terminal run to `state` (false when unknown or terminal). Terminal states: use finishRun. */
  setRunState(runId: string, state: RunState, patch: StatePatch = {}): Promise<boolean> {
    return setRunState(this.ctx, runId, state, patch);
  }

  /** Appends `item` to the run's list flag `key` (a run's forks). */
  pushRunFlag(runId: string, key: string, item: unknown): Promise<void> {
    return pushRunFlag(this.ctx, runId, key, item);
  }

  /** Merges `flags` into the run's flags. */
  setRunFlags(runId: string, flags: Record<string, unknown>): Promise<void> {
    return setRunFlags(this.ctx, runId, flags);
  }

  // ------------------------------------------------------------ the journal

  /** Appends a sealed record (durable, then published); RunClosedError when the run is terminal or unknown. */
  appendJournal(runId: string, fields: AppendFields, blobs?: AppendBlobs): Promise<JournalRecord> {
    return appendJournal(this.ctx, runId, fields, blobs);
  }

  /**
   * Stages a write of the run's driver (this process) to commit in the run's
   * next journal append, in the same transaction (budget reservations and
   * commits: one commit per step).
   */
  stageRunWrite(runId: string, write: (tx: Tx) => Promise<void>): void {
    stageRunWrite(this.ctx, runId, write);
  }

  /** Ends a run with its `run_finished` record; false when it had ended already. */
  finishRun(
    runId: string,
    outcome: Extract<RunState, 'completed' | 'failed' | 'refused' | 'cancelled'>,
    o?: FinishOptions,
  ): Promise<boolean> {
    return finishRun(this.ctx, runId, outcome, o);
  }

  /** The run's records with seq > afterSeq, in order. */
  readJournal(runId: string, afterSeq?: number, limit?: number): Promise<JournalRecord[]> {
    return readJournal(this.ctx, runId, afterSeq, limit);
  }

  /** The fork point at `at` of a run's journal, or null when `at` names no record a fork may start at (fork.ts). */
  async forkPoint(runId: string, at: number): Promise<ForkPoint | null> {
    return forkPoint(await readJournal(this.ctx, runId, 0, 10_000_000), at);
  }

  /** Writes a fork's `forked` record (call first, right after creating the run). */
  openFork(runId: string, point: ForkPoint, extra?: JsonObject): Promise<void> {
    return openFork(this.ctx, runId, point, extra);
  }

  /** Copies the parent records a fork reuses into its journal. */
  copyReused(runId: string, point: ForkPoint): Promise<void> {
    return copyReused(this.ctx, runId, point);
  }

  /**
   * Ends a run recorded refused at its start (`flags.refusal`): its `refusal` and `run_finished` records
   * in one transaction, once (journal.ts). False when it has no pending refusal or has ended already.
   */
  completeRefusal(runId: string): Promise<boolean> {
    return completeRefusal(this.ctx, runId);
  }

  /** Whether the journal holds the run's terminal record. */
  journalClosed(runId: string): Promise<boolean> {
    return journalClosed(this.ctx, runId);
  }

  /** The recorded output of a completed step, from the journal. */
  recordedStep(runId: string, stepId: string): Promise<RecordedStep | undefined> {
    return recordedStep(this.ctx, runId, stepId);
  }

  // ------------------------------------------------------------ events

  /**
   * Delivers the run's records after `afterSeq`, then live ones; resolves (backlog delivered) with the
   * unsubscribe function. With `onDelta`, also the live deltas of model steps this cell drives (events.ts).
   */
  subscribe(runId: string, afterSeq: number, onEvent: RunEventListener, onDelta?: RunDeltaListener): Promise<() => void> {
    return subscribe(this.ctx, runId, afterSeq, onEvent, onDelta);
  }

  /** Live subscribers of a run (tests, metrics). */
  subscriberCount(runId: string): number {
    return subscriberCount(this.ctx, runId);
  }

  // ------------------------------------------------------------ control and driving

  /** Registers this process as the run's driver (its signal aborts on cancel or shutdown). */
  registerDriver(runId: string): DriverHandle {
    return registerDriver(this.ctx, runId);
  }

  /** The abort signal of this process's driver of the run, if any. */
  driverSignal(runId: string): AbortSignal | undefined {
    return driverSignal(this.ctx, runId);
  }

  /**
   * Runs `fn` (a call's reads after its intent is journaled, before its request
   * leaves) again while the store is unreachable and this process drives the
   * run, so an outage there never makes a call that did not leave look in flight.
   */
  beforeItLeaves<T>(runId: string, fn: () => Promise<T>): Promise<T> {
    return beforeItLeaves(this.ctx, runId, fn);
  }

  /** True when this process drives the run now. */
  isDriven(runId: string): boolean {
    return isDriven(this.ctx, runId);
  }

  /** Aborts every drive of this process and waits for them (shutdown; the runs stay for recovery). */
  abortAllDrivers(): Promise<void> {
    return abortAllDrivers(this.ctx);
  }

  /** Cancels a run, idempotently; undefined when the run is unknown. */
  requestCancel(runId: string, actor: string): Promise<Run | undefined> {
    return requestCancel(this.ctx, runId, actor);
  }

  /** Queued or running runs of `kind` whose lease holder died, that this cell qualifies to execute (takeover sweeps). */
  orphanedRuns(kind: RunKind): Promise<Run[]> {
    return orphanedRuns(this.ctx, kind);
  }

  /** Waiting runs of `kind` whose last driver died (its wake-up timer with it) and that this cell may execute. */
  orphanedWaitingRuns(kind: RunKind): Promise<Run[]> {
    return orphanedWaitingRuns(this.ctx, kind);
  }

  /** Marks `flags.unplaceable` on orphaned runs no live member qualifies to execute. */
  markUnplaceable(kind: RunKind): Promise<void> {
    return markUnplaceable(this.ctx, kind);
  }

  /** Releases a run this cell created but does not qualify to execute, for a qualifying peer to claim. */
  placeOnPeer(runId: string): Promise<boolean> {
    return placeOnPeer(this.ctx, runId);
  }

  /** Live (or suspect) members that meet `need`, this cell first when it does. */
  qualifyingMembers(need: { clearance: number; topology: Record<string, string> }): Promise<{ cell_id: string }[]> {
    return this.ctx.cluster.qualifyingMembers(need);
  }

  /** True when another cell that is not dead holds the run's lease. */
  heldByLivePeer(run: Run): Promise<boolean> {
    return heldByLivePeer(this.ctx, run);
  }

  /** Runs `fn` after each heartbeat of this cell (the takeover sweeps of crew and job runs). */
  onHeartbeat(fn: () => Promise<void>): void {
    this.ctx.cluster.onTick(fn);
  }

  /** Drives the run's graph on the engine until it ends or waits (journal, clock, cancel and recorded steps bound here). */
  driveRun(runId: string, graph: Graph, ports: DrivePorts, input: unknown, opts: DriveOptions): Promise<DriveResult> {
    return driveRun(this.ctx, runId, graph, ports, input, opts);
  }

  // ------------------------------------------------------------ approvals (crew runs, agent job runs)

  /** The engine's approvals port of a run. */
  approvalsPort(runId: string): ApprovalsPort {
    return approvalsPort(this.ctx, runId);
  }

  /** Approvals the run waits on (steps not completed yet). */
  pendingApprovals(runId: string): Promise<PendingApproval[]> {
    return pendingApprovals(this.ctx, runId);
  }

  /** Decisions recorded so far for a step. */
  stepDecisions(runId: string, stepId: string): Promise<{ principal: string; decision: string; at: string }[]> {
    return stepDecisions(this.ctx, runId, stepId);
  }

  /** The run's pending approvals as run views show them (none for a terminal run). */
  pendingApprovalsView(run: Run): Promise<PendingApprovalView[]> {
    return pendingApprovalsView(this.ctx, run);
  }

  /**
   * Records a decision under the shared rules (pending step, run not terminal,
   * two-person rule, named approvers, one decision per principal), audited as
   * `action`; true when the caller should wake the run.
   */
  recordApproval(
    actor: string,
    run: Run,
    stepId: string,
    decision: 'approve' | 'reject',
    comment: string | undefined,
    action: string,
  ): Promise<boolean> {
    return recordApproval(this.ctx, actor, run, stepId, decision, comment, action);
  }

  // ------------------------------------------------------------ storage limits (storage.ts)

  /** Refuses (400 run_storage_cap, 409 workspace_quota / cell_storage_quota) a new run with no room; nothing written. */
  assertStorageRoom(workspaceId: string, specBytes: number): Promise<void> {
    return assertStorageRoom(this.ctx, workspaceId, specBytes);
  }

  /** Why a new run of `specBytes` has no room, or null (read through `db`, e.g. a transaction). */
  storageRoomRefusal(
    workspaceId: string,
    specBytes: number,
    db?: Reader,
  ): Promise<{ reason: StorageLimit; used_bytes: number; quota_bytes: number } | null> {
    return storageRoomRefusal(this.ctx, workspaceId, specBytes, db);
  }

  /** Bytes a run may still store before a limit refuses it. */
  storageLeft(runId: string): Promise<number> {
    return storageLeft(this.ctx, runId);
  }

  /** What a workspace uses now. */
  workspaceUsage(workspaceId: string): Promise<WorkspaceUsage> {
    return workspaceUsage(this.ctx, workspaceId);
  }

  /** What the cell's runs keep in the store, all workspaces together (the cell's storage quota counts it). */
  cellRunBytes(): Promise<number> {
    return cellRunBytes(this.ctx);
  }

  /** Registers how big a workspace's files are (the jobs module: its SQL databases). */
  registerWorkspaceFiles(bytesOf: (workspaceId: string) => number): void {
    this.ctx.workspaceFiles = bytesOf;
  }
}

/**
 * The filters of a run list (issue 25), for the list routes' query: each
 * narrows, all combine; times are RFC 3339 and exclusive.
 */
export const runFilterQuery = {
  state: z
    .enum(RUN_STATES as [RunState, ...RunState[]])
    .optional()
    .openapi({ description: 'Only runs in this state' }),
  job_type: z
    .string()
    .min(1)
    .max(64)
    .optional()
    .openapi({ description: 'Only job runs of this job_type (sql, compute, notebook, single, agent)' }),
  crew_id: z.string().min(1).max(200).optional().openapi({ description: 'Only runs of this crew' }),
  source: z.string().min(1).max(200).optional().openapi({
    description: 'Only runs started this way: `api`, `schedule` (or `schedule:<definition id>`), `endpoint` (or `endpoint:<id>`)',
  }),
  created_after: queryTime('Only runs created after this time (exclusive)'),
  created_before: queryTime('Only runs created before this time (exclusive)'),
};

/**
 * The run id as a path parameter named `name` (`run_` + 20 lower-case hex digits: runs.ts `newRunId`,
 * bundles/run-id.ts for a device's runs): the one declaration of every run route of every module, as
 * jobs, crews and imported device journals share one run id space. A malformed id is 400
 * invalid_request before any lookup.
 */
export function runIdPath(name = 'run_id') {
  return z
    .string()
    .regex(RUN_ID_PATTERN)
    .openapi({ param: { name, in: 'path' }, example: 'run_0123456789abcdef0123' });
}

/** The `{run_id}` path parameter of a run route. */
export const RunIdParam = z.object({ run_id: runIdPath() });

/** A step of a run waiting on a human decision, as run views show it (crew runs, agent job runs). */
export const PendingApprovalSchema = z.object({
  step_id: z.string(),
  kind: z.string(),
  rule: z.string(),
  approvers: z.array(z.string()),
  quorum: z.number(),
  prompt: z.string().nullable(),
  due: IsoTime.nullable(),
  requested_at: IsoTime,
  decisions: z.array(z.object({ principal: z.string(), decision: z.string(), comment: z.string().nullable(), at: IsoTime })),
});

export type PendingApprovalView = z.infer<typeof PendingApprovalSchema>;

/** The ListRunsOptions of a query validated with `runFilterQuery`. */
export function runFilterOf(q: {
  state?: RunState | undefined;
  job_type?: string | undefined;
  crew_id?: string | undefined;
  source?: string | undefined;
  created_after?: number | undefined;
  created_before?: number | undefined;
}): Pick<ListRunsOptions, 'state' | 'jobType' | 'crewId' | 'source' | 'createdAfter' | 'createdBefore'> {
  return {
    state: q.state,
    jobType: q.job_type,
    crewId: q.crew_id,
    source: q.source,
    createdAfter: q.created_after,
    createdBefore: q.created_before,
  };
}

export type { ForkPoint } from './fork.ts';
