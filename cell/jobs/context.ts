/**
 * The jobs module's instance state, which every function of the module takes:
 * the core and the APIs it uses (IAM, runs, Agent Teams, the tool catalog),
 * the sandbox pool, the workspaces' PostgreSQL databases, the key their secrets are sealed with, the drives in flight in this process, the per-workspace
 * SQL queues, the published endpoints' rate buckets, and the scheduler.
 */
import type { GroupClock } from '../cluster/api.ts';
import type { CellCore } from '../context.ts';
import type { Custody } from '../custody/api.ts';
import type { Iam } from '../iam/api.ts';
import type { CellMetrics } from '../ops/api.ts';
import type { Runs, DriveResult } from '../runs/api.ts';
import type { Teams } from '../teams/api.ts';
import type { Tools } from '../tools/api.ts';
import type { PgWorkspaces } from './sandbox/pg-workspace.ts';
import type { SandboxPool } from './sandbox/pool.ts';

export interface JobsContext {
  core: CellCore;
  iam: Iam;
  runs: Runs;
  teams: Teams;
  tools: Tools;
  pool: SandboxPool;
  /** Drives in flight in this process (shutdown waits for them). */
  inflight: Set<Promise<DriveResult>>;
  /** On the PostgreSQL engine: the workspaces' SQL databases, a database each on the group's server (absent: SQLite files). */
  pgWorkspaces?: PgWorkspaces;
  /** The group's secrets key, proven at start: it seals the workspaces' secrets (cell/custody). */
  custody: Custody;
  /** Per-workspace queue: SQL jobs of one workspace run one at a time (single writer per database file). */
  workspaceQueues: Map<string, Promise<unknown>>;
  /**
   * The embedded engine's workspace SQL files, their sizes as last measured (the runs' storage quota reads
   * them at every append); a size is forgotten when a SQL step on its workspace starts and when it ends.
   */
  workspaceFileSizes: Map<string, number>;
  /** Wake-up timers of waiting agent job runs (cleared on stop). */
  wakeTimers: Set<NodeJS.Timeout>;
  stopped: boolean;
  /** The cell's metrics (scheduler fires and lateness). */
  metrics: CellMetrics;
  /** The group's time (the database's clock, cell/cluster): the scheduler fires by it, and not while it is untrusted. */
  groupClock: GroupClock;
}
