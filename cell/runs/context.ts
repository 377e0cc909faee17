/**
 * The runs module's instance state, which every function of the module
 * takes: the core and IAM (journals are signed with the cell identity key,
 * approvals are audited), each active run's journal tail and append queue,
 * the live event subscribers, and the runs this process drives now.
 */
import type { LiveAnswers } from '../../core/engine/live-answers.ts';
import type { StepDelta } from '../../core/engine/types.ts';
import type { JournalRecord } from '../../core/journal/record.ts';
import type { CellCore } from '../context.ts';
import type { Iam } from '../iam/api.ts';
import type { Cluster } from '../cluster/api.ts';
import type { CellMetrics } from '../ops/api.ts';
import type { Reader, Tx } from '../store/types.ts';
import type { AppendQueue } from './group-commit.ts';

export interface JournalTail {
  seq: number;
  hash: string;
  /** The run's graph hash as the append that left this tail read it under the run's lock (null: none); unset when not read. */
  graph?: string | null;
}

export type RunEventListener = (rec: JournalRecord) => void;

/** A live fragment of a model step's answer on the event stream (events.ts): one object handed to every subscriber. */
export interface DeltaEvent {
  kind: 'delta';
  data: StepDelta;
}
export type RunDeltaListener = (ev: DeltaEvent) => void;

/**
 * One subscriber of a run's events: its high-water mark, live records held back until its backlog is
 * delivered, and (when it wants them) its receiver of live deltas, which start after the backlog.
 */
export interface Subscriber {
  high: number;
  fn: RunEventListener;
  held: JournalRecord[] | null;
  delta: RunDeltaListener | null;
}

/**
 * A run this process drives. `wake`: a decision was recorded while it drove, so
 * the drive looks again before it leaves the run waiting (approvals.ts).
 */
export interface Driving {
  controller: AbortController;
  done: Promise<void>;
  resolve: () => void;
  cancelledBy: string | null;
  wake: boolean;
}

/** What a run keeps in the store, as this process has counted it (storage.ts). */
export interface RunMeter {
  workspace: string | null;
  bytes: number;
  hashes: Set<string>;
  /** The spec's bytes, until the run's first metered write counts them. */
  spec: number;
}

/**
 * A write of a run's driver that rides in the run's next journal append (journal.ts stageRunWrite).
 * `atOnce`: it issues every statement it will ever issue before its first await (one statement, its
 * answer only read), and nothing it does after that can fail once they succeeded, so it may be sent
 * together with the append's COMMIT (group-commit.ts, one round trip). Its answer may then be lost
 * with the connection although the transaction committed (journal.ts writeWithDriver `readBack`). A
 * write without it may read an answer before it decides what to write next.
 */
export interface StagedWrite {
  (tx: Tx): Promise<void>;
  atOnce?: true;
  /**
   * Whether this write was kept by a transaction whose COMMIT's outcome is unknown, read once the
   * store answers (journal.ts writeWithDriver `readBack`): a driver's commit of staged writes alone,
   * with no record to look for in the journal, is then known kept or written again (drive.ts).
   */
  kept?: (db: Reader) => Promise<boolean>;
}

export interface RunsContext {
  core: CellCore;
  iam: Iam;
  /** The last record of each run this process appended to (until it finishes). */
  tails: Map<string, JournalTail>;
  /** Per-run append queue: appends to one run are serialised. */
  queues: Map<string, Promise<unknown>>;
  /** Live subscribers of each run's events. */
  bus: Map<string, Set<Subscriber>>;
  /** Model steps in flight on this cell, by run and step id: the answer so far (events.ts publishDelta). */
  live: Map<string, LiveAnswers>;
  drivers: Map<string, Driving>;
  /** Storage meters of runs this process writes to. */
  meters: Map<string, RunMeter>;
  /** How big a workspace's files are (the jobs module registers its SQL databases); none: 0. */
  workspaceFiles: ((workspaceId: string) => number) | null;
  /** The group's membership: whose leases lapsed, this cell's placement attributes (lease.ts). */
  cluster: Cluster;
  /** The epoch of each run lease this process holds (lease.ts); a driver's writes are fenced by it. */
  leases: Map<string, number>;
  /** The catch-up of records other cells appended, while it runs (events.ts), and the runs it still has to read ('all': every run followed here). */
  catchingUp: Promise<void> | null;
  catchUpPending: Set<string> | 'all' | null;
  /** The cell's metrics (journal records, finished runs, SSE subscribers). */
  metrics: CellMetrics;
  /** Writes waiting for each run's next journal append (a budget reservation, its commit, the final output). */
  staged: Map<string, StagedWrite[]>;
  /**
   * The driver of each run this process drives now: writes its held-back records and the writes staged
   * for the run, in one transaction (drive.ts StepWriter.flush; journal.ts writeWithDriver).
   */
  writers: Map<string, () => Promise<void>>;
  /** Drivers' journal appends waiting to share a transaction, and the groups in flight (group-commit.ts). */
  appends: AppendQueue;
  /** Runs this process has claimed since it started, with the epoch (a takeover of one of them would be a self-takeover). */
  claimedHere: Map<string, number>;
  /** Set when the module stops: a drive waiting out a store outage gives up (the run is recovered later). */
  stopping: boolean;
  /** Writes another module adds to every run's finishing transaction (the run log's entry: onRunFinishedTx). */
  finishHooks: FinishHook[];
}

/** A write in the transaction that ends a run, given the run's head (the run log records it: cell/receipts). */
export type FinishHook = (tx: Tx, head: { run_id: string; journal_head: string; graph_hash: string }) => Promise<void>;

export function createRunsContext(core: CellCore, iam: Iam, cluster: Cluster, metrics: CellMetrics): RunsContext {
  return {
    core,
    iam,
    cluster,
    tails: new Map(),
    queues: new Map(),
    bus: new Map(),
    live: new Map(),
    drivers: new Map(),
    meters: new Map(),
    leases: new Map(),
    staged: new Map(),
    writers: new Map(),
    appends: { waiting: [], inflight: 0, scheduled: false, lingering: null, lastAppend: new Map() },
    claimedHere: new Map(),
    catchingUp: null,
    catchUpPending: null,
    workspaceFiles: null,
    metrics,
    stopping: false,
    finishHooks: [],
  };
}
