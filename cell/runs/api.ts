/**
 * The runs module's face (docs/architecture.md, "Faces"), as the other modules use it (Agent Teams'
 * crew runs, Jobs' job runs, the scheduler): the run table, the signed journal, live events,
 * control (drivers, cancel), driving a graph on the engine, the approval rules every waiting run
 * shares, storage limits; the run's types and constants; the run routes' shared declarations (the
 * run-id parameter, the list filters, the pending-approval view, the read-access sentence).
 *
 * `Runs`, the instance's API, is the module's functions (runs.ts, journal.ts, events.ts,
 * control.ts, lease.ts, drive.ts, approvals.ts, storage.ts, fork.ts) bound to the module's
 * context, not a forwarding layer: each is declared and documented once, where it is written.
 */
import { RUN_ID_PATTERN } from '../../core/run-id.ts';
import { copyReused, forkPoint, openFork, standingApprovals } from './fork.ts';
import { afterCommit, recordDrivenRunTx, type DrivenRun } from './opening.ts';
import type { Reader, Tx } from '../store/types.ts';
import { assertStorageRoom, cellRunBytes, storageLeft, storageRoomRefusal, workspaceUsage } from './storage.ts';
import { approvalsPort, pendingApprovals, pendingApprovalsView, recordApproval, runDecisions, stepDecisions } from './approvals.ts';
import type { FinishHook, RunsContext } from './context.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import { grants } from '../../core/authority/scopes.ts';
import type { Decider } from './approvals.ts';
import type { AuthContext } from '../context.ts';
import { z } from '@hono/zod-openapi';
import { IsoTime, queryTime } from '../http/openapi.ts';
import { abortAllDrivers, driverSignal, isDriven, registerDriver, requestCancel } from './control.ts';
import { heldByLivePeer, markUnplaceable, orphanedRuns, orphanedWaitingRuns, placeOnPeer } from './lease.ts';
import { beforeItLeaves, driveRun, recordedStep } from './drive.ts';
import { lostOutcome, lostOutcomeView, resolveOutcome } from './outcomes.ts';
import { subscribe, subscriberCount } from './events.ts';
import {
  appendJournal,
  completeRefusal,
  finishRun,
  getBlob,
  journalClosed,
  journalHead,
  readJournal,
  stageRunWrite,
  writeWithDriver,
  type AppendFields,
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
  RUN_STATES,
  setRunFlags,
  setRunState,
  type ListRunsOptions,
  type NewRun,
  type Run,
  type RunState,
} from './runs.ts';

export {
  RUN_STATES,
  TERMINAL_STATES,
  forksView,
  isTerminal,
  newRunId,
  requesterOf,
  type NewRun,
  type Run,
  type RunError,
  type RunKind,
  type RunState,
} from './runs.ts';
export { RunClosedError, type AppendBlobs, type AppendFields, type FinishOptions } from './journal.ts';
export type { DrivenRun } from './opening.ts';
export { outageWait, type DriveOptions, type DrivePorts, type DriveResult } from './drive.ts';
export type { Decider, DecisionView, PendingApproval } from './approvals.ts';
export type { LostOutcome, ResolutionAsk } from './outcomes.ts';
export type { DriverHandle } from './control.ts';
export type { FinishHook, RunDeltaListener, RunEventListener } from './context.ts';
export { nodeOfStep, type ForkFor, type ForkPoint } from './fork.ts';
export type { StorageLimit, WorkspaceUsage } from './storage.ts';
export { credentialWatch, type StreamCredential } from './sse.ts';

/** The runs module's API: what another module holds of it (cell/server.ts builds it once per cell). */
export type Runs = ReturnType<typeof runsApi>;

/** The API of the runs module's instance: its functions with their context argument given. */
export function runsApi(ctx: RunsContext) {
  const on =
    <A extends unknown[], R>(fn: (ctx: RunsContext, ...args: A) => R) =>
    (...args: A): R =>
      fn(ctx, ...args);
  return {
    // ---------------------------------------------------------- the run table (runs.ts, opening.ts)
    /** Inserts a run inside the caller's transaction (state `queued` unless given); returns its id. */
    createRunTx: (tx: Tx, r: NewRun): Promise<string> =>
      // The creating cell holds the run's lease until it claims it to drive it (or, if it dies first, a peer does).
      createRunTx(tx, { ...r, coordinator: r.coordinator ?? ctx.core.config.cellId }),
    /**
     * `createRunTx`, answering the run as inserted (its creating transaction's view of it, without a read:
     * a read of the runs table there makes runs created at once conflict on PostgreSQL).
     */
    recordRunTx: (tx: Tx, r: NewRun): Promise<Run> => recordRunTx(tx, { ...r, coordinator: r.coordinator ?? ctx.core.config.cellId }),
    /**
     * Records, inside the caller's transaction, a run this cell drives at once: claimed (epoch 1, `running`),
     * with its first record if given (opening.ts). Hand the answer's `fence` to driveRun (DriveOptions.claimed).
     */
    recordDrivenRunTx: (tx: Tx, r: NewRun, opening?: AppendFields): Promise<DrivenRun> => recordDrivenRunTx(ctx, tx, r, opening),
    /** A fresh run id, for a run whose id must be known before it is created (a scheduled team fire). */
    newRunId,
    getRun: on(getRun),
    afterCommit: on(afterCommit),
    pendingRefusal,
    /** Whether the run is queued or running with no journal progress for STALL_LEASES leases (the views' `stalled`). */
    isStalled: (run: Run): boolean => isStalled(run, ctx.core.clock.now(), ctx.core.config.leaseMs),
    listRuns: on(listRuns),
    activeRuns: on(activeRuns),
    setRunState: on(setRunState),
    pushRunFlag: on(pushRunFlag),
    setRunFlags: on(setRunFlags),

    // ---------------------------------------------------------- the journal (journal.ts, fork.ts, drive.ts)
    appendJournal: on(appendJournal),
    stageRunWrite: on(stageRunWrite),
    /** A write committed now with the run's driver's held-back records, answering what it returned (a budget reservation). */
    writeWithDriver: <T>(runId: string, write: (tx: Tx) => Promise<T>, opts?: { readBack?: (db: Reader) => Promise<T> }): Promise<T> =>
      writeWithDriver(ctx, runId, write, opts),
    finishRun: on(finishRun),
    readJournal: on(readJournal),
    journalHead: on(journalHead),
    /** A step value stored by content hash (journal.ts), or undefined. */
    getBlob: on(getBlob),
    /** The fork point at `at` of a run's journal, or null when `at` names no record a fork may start at (fork.ts). */
    forkPoint: async (runId: string, at: number) => forkPoint(await readJournal(ctx, runId, 0, 10_000_000), at),
    /** The fork point without the parent's approvals that do not stand for the new run (they are asked again). */
    standingApprovals,
    openFork: on(openFork),
    copyReused: on(copyReused),
    completeRefusal: on(completeRefusal),
    journalClosed: on(journalClosed),
    recordedStep: on(recordedStep),

    /**
     * Adds a write to the transaction that ends every run (its `run_finished` record), given the run's
     * head: run id, the hash of that last record, the graph hash. The run log's entry (cell/receipts).
     */
    onRunFinishedTx: (hook: FinishHook): void => {
      ctx.finishHooks.push(hook);
    },

    // ---------------------------------------------------------- events (events.ts)
    subscribe: on(subscribe),
    subscriberCount: on(subscriberCount),

    // ---------------------------------------------------------- control and driving (control.ts, lease.ts, drive.ts)
    registerDriver: on(registerDriver),
    driverSignal: on(driverSignal),
    beforeItLeaves: on(beforeItLeaves),
    isDriven: on(isDriven),
    abortAllDrivers: on(abortAllDrivers),
    requestCancel: on(requestCancel),
    orphanedRuns: on(orphanedRuns),
    orphanedWaitingRuns: on(orphanedWaitingRuns),
    markUnplaceable: on(markUnplaceable),
    placeOnPeer: on(placeOnPeer),
    heldByLivePeer: on(heldByLivePeer),
    /** Live (or suspect) members that meet `need`, this cell first when it does (the cluster's). */
    qualifyingMembers: (need: { clearance: number; topology: Record<string, string> }) => ctx.cluster.qualifyingMembers(need),
    /** Runs `fn` after each heartbeat of this cell (the takeover sweeps of crew and job runs). */
    onHeartbeat: (fn: () => Promise<void>): void => ctx.cluster.onTick(fn),
    driveRun: on(driveRun),

    // ---------------------------------------------------------- approvals, crew runs and agent job runs (approvals.ts)
    approvalsPort: on(approvalsPort),
    pendingApprovals: on(pendingApprovals),
    stepDecisions: on(stepDecisions),
    runDecisions: on(runDecisions),
    pendingApprovalsView: on(pendingApprovalsView),
    recordApproval: on(recordApproval),

    // ---------------------------------------------------------- lost outcomes of side-effecting calls (outcomes.ts)
    lostOutcome: on(lostOutcome),
    lostOutcomeView: on(lostOutcomeView),
    resolveOutcome: on(resolveOutcome),

    // ---------------------------------------------------------- storage limits (storage.ts)
    assertStorageRoom: on(assertStorageRoom),
    storageRoomRefusal: on(storageRoomRefusal),
    storageLeft: on(storageLeft),
    workspaceUsage: on(workspaceUsage),
    cellRunBytes: on(cellRunBytes),
    /** Registers how big a workspace's files are (the jobs module: its SQL databases). */
    registerWorkspaceFiles: (bytesOf: (workspaceId: string) => number): void => {
      ctx.workspaceFiles = bytesOf;
    },
  };
}

/**
 * The permission that reads a run whole, its step values included (the values route,
 * routes-values.ts): a fork hands the forker the parent's results, so forking needs it too.
 */
export const READS_RUN_VALUES = PERMISSIONS.jobsRead;

/** Whether a request may read a run whole, values included (READS_RUN_VALUES). */
export function mayReadRunWhole(auth: Pick<AuthContext, 'effective'>): boolean {
  return grants(auth.effective, READS_RUN_VALUES);
}

/** What the jobs read permission reads, said wherever it is required. */
export const READS_ALL_RUNS =
  ' Read access: `system.orchestration.admin.read` reads every orchestration run of every principal, crew runs included (specs, outputs, journals); hand it out as read access to all runs (docs/security.md).';

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
  reason: z
    .string()
    .regex(/^[a-z][a-z0-9_]{0,63}$/, 'a reason: lower-case letters, digits and _')
    .optional()
    .openapi({
      description:
        'Only runs that ended badly with this reason: `error.reason` (core/reasons.ts: `model_error`, `step_timeout`, `budget_ceiling_exceeded`, `gate_declined`, `approval_rejected`, `sql_error`, …), or `error.code` for an error that names none',
      example: 'approval_rejected',
    }),
};

/**
 * The run id as a path parameter named `name` (core/run-id.ts: runs.ts `newRunId`, bundles/run-id.ts for
 * a device's runs): the one declaration of every run route of every module, as
 * jobs, crews and imported device journals share one run id space. A malformed id is 400
 * invalid_request before any lookup.
 */
export function runIdPath(name = 'run_id') {
  return z
    .string()
    .regex(RUN_ID_PATTERN)
    .openapi({ param: { name, in: 'path' }, example: 'run_0123456789abcdef0123' });
}

/** The `{step_id}` path parameter of a route on one step of a run (its id URL-encoded: it contains `/`). */
export function stepIdPath() {
  return z
    .string()
    .min(1)
    .max(300)
    .openapi({ param: { name: 'step_id', in: 'path' } });
}

/** A step id as given (the router already decoded the path); decoded once more only when that is well-formed. */
export function stepIdOf(v: string): string {
  try {
    return decodeURIComponent(v);
  } catch {
    return v;
  }
}

/** The `{run_id}` path parameter of a run route. */
export const RunIdParam = z.object({ run_id: runIdPath() });

/**
 * A human decision on a run's step, as run views show it: who decided (`principal`, and `chain`: the
 * principal then the actors of the token it decided with), approve or reject, the comment, the
 * digest of the step input it approved, and when.
 */
export const DecisionSchema = z
  .object({
    principal: z.string(),
    chain: z.array(z.string()),
    decision: z.string(),
    comment: z.string().nullable(),
    input_hash: z.string().nullable(),
    at: IsoTime,
  })
  .openapi('ApprovalDecisionRecord');

/** Every decision of a run, decided steps included (the run view's `decisions`). */
export const RunDecisionSchema = DecisionSchema.extend({ step_id: z.string() }).openapi('RunApprovalDecision');

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
  input_hash: z.string().nullable().openapi({ description: 'The digest of the step input a decision approves (the journal input hash)' }),
  decisions: z.array(DecisionSchema),
});

export type PendingApprovalView = z.infer<typeof PendingApprovalSchema>;

/** A human decision on a run's approval step, the body of every run's approval route (crew runs, agent job runs). */
export const ApprovalDecisionSchema = z
  .object({
    decision: z.enum(['approve', 'reject']),
    comment: z.string().max(2000).optional(),
  })
  .strict()
  .openapi('ApprovalDecision');

/** Who decides through a request: its principal and the actors of its credential (an exchanged token's `act`). */
export function deciderOf(auth: Pick<AuthContext, 'principal' | 'credential'>): Decider {
  return { principal: auth.principal.id, actors: auth.credential.actors ?? [] };
}

/** The call a run in state `outcome_unknown` waits on, as run views show it (`unknown_outcome`; null otherwise). */
export const UnknownOutcomeSchema = z
  .object({
    step_id: z.string(),
    tool: z.string().nullable(),
    seat: z.string().nullable(),
    effect_key: z.string().openapi({ description: "The call's effect key: sent as `Idempotency-Key`, the same on a retry" }),
    attempt: z.number().int().openapi({ description: 'The issue of the call whose outcome was lost (1 for the first)' }),
    since: IsoTime,
  })
  .openapi('UnknownOutcome');

/**
 * An operator's resolution of a run's lost outcome, the body of every run's resolution route (crew runs,
 * job runs): `retry` issues the call again with the same effect key, `record` makes `result` its result,
 * `fail` fails the run.
 */
export const OutcomeResolutionSchema = z
  .object({
    resolution: z.enum(['retry', 'record', 'fail']),
    result: z.unknown().optional().openapi({ description: 'For `record` (required there, any JSON): the result of the call' }),
    comment: z.string().max(2000).optional(),
  })
  .strict()
  .refine((b) => (b.resolution === 'record') === (b.result !== undefined), {
    message: '`result` is required with `record` and refused otherwise',
    path: ['result'],
  })
  .openapi('OutcomeResolution');

/** The ListRunsOptions of a query validated with `runFilterQuery`. */
export function runFilterOf(q: {
  state?: RunState | undefined;
  job_type?: string | undefined;
  crew_id?: string | undefined;
  source?: string | undefined;
  created_after?: number | undefined;
  created_before?: number | undefined;
  reason?: string | undefined;
}): Pick<ListRunsOptions, 'state' | 'jobType' | 'crewId' | 'source' | 'createdAfter' | 'createdBefore' | 'errorReason'> {
  return {
    state: q.state,
    jobType: q.job_type,
    crewId: q.crew_id,
    source: q.source,
    createdAfter: q.created_after,
    createdBefore: q.created_before,
    errorReason: q.reason,
  };
}
