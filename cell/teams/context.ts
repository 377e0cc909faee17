/**
 * The Agent Teams module's instance state, which its functions take: the
 * core, the APIs of the modules it uses (IAM, AI, tools, runs), the crew-run
 * drives in flight in this process, and the timers it owns (the investigate
 * sweep, wake-ups of waiting runs), cleared on stop, and who else reports
 * using a crew (the jobs module's definitions).
 */
import type { Ai } from '../ai/api.ts';
import type { GroupClock } from '../cluster/api.ts';
import type { CellCore } from '../context.ts';
import type { Iam, Lifecycle } from '../iam/api.ts';
import type { Runs } from '../runs/api.ts';
import { ChangeCache } from '../store/change-cache.ts';
import type { Tools } from '../tools/api.ts';
import type { Compiled } from './formations/compile.ts';
import type { Billet, Crew, Formation } from './formations/types.ts';
import type { Agent } from './resources/types.ts';
import type { CrewUsersHook } from './types.ts';

export interface TeamsContext {
  core: CellCore;
  iam: Iam;
  /** The owner lifecycle of principals (deleting an agent soft-deletes its principal). */
  lifecycle: Lifecycle;
  ai: Ai;
  tools: Tools;
  runs: Runs;
  /** Crew-run drives in flight in this process, by run id. */
  inflight: Map<string, Promise<unknown>>;
  /** The investigate sweep in progress (one at a time), if any. */
  sweeping: Promise<void> | null;
  /** The ledger fold in progress in this process (one at a time), if any (resources/agents.ts foldLedgers). */
  folding: Promise<number> | null;
  /** Reservations this process made since its last fold began: past FOLD_AFTER the next fold starts at once. */
  reservedSinceFold: number;
  /** The periodic investigate sweep, while the module runs. */
  sweepTimer: ReturnType<typeof setInterval> | null;
  /** Pending wake-ups of waiting runs. */
  wakeTimers: Set<ReturnType<typeof setTimeout>>;
  /** Set on stop: no new drive or wake-up starts. */
  stopped: boolean;
  /** Other modules' users of a crew (a crew they use is not deleted or changed under them). */
  crewUserHooks: CrewUsersHook[];
  /** Agents seen to have a budget ledger (a ledger is never deleted): a run's checks read each once per process. */
  ledgersSeen: Set<string>;
  /**
   * Agents by id, read by every model call and every compile, kept while the
   * store says `team_agents` did not change (store/change-cache.ts).
   */
  agents: ChangeCache<string, Agent | null>;
  /**
   * What a run of a crew compiles, by crew id: the crew, the formation version it pins and that
   * version's billets (undefined: gone), read by every run's start, kept while the store says none of
   * their tables changed (store/change-cache.ts). Frozen: shared by every start that reads it.
   */
  crewInputs: ChangeCache<string, CrewInputs>;
  /**
   * The graphs crew runs' starts compiled, by the catalog's pins (replaced whole when they change) and
   * the compiler's input as text (formations/compile.ts compileForRun).
   */
  compiledRuns: WeakMap<object, Map<string, Compiled>>;
  /** Graph hashes this process found kept in team_graphs (a kept graph is never deleted): a start reads each once. */
  graphsKept: Set<string>;
  /** Whether this cell stands as a member (its clock within the bound): a member that stood down makes no background writes. */
  standing: Pick<GroupClock, 'trusted'>;
}

/** A crew, the formation version it pins and its billets, as one read found them (undefined: gone). */
export interface CrewInputs {
  crew: Crew | undefined;
  formation: Formation | undefined;
  billets: readonly Billet[];
}

export function createTeamsContext(
  core: CellCore,
  deps: { iam: Iam; lifecycle: Lifecycle; ai: Ai; tools: Tools; runs: Runs; standing: Pick<GroupClock, 'trusted'> },
): TeamsContext {
  return {
    core,
    ...deps,
    inflight: new Map(),
    sweeping: null,
    folding: null,
    reservedSinceFold: 0,
    sweepTimer: null,
    wakeTimers: new Set(),
    stopped: false,
    crewUserHooks: [],
    ledgersSeen: new Set(),
    agents: new ChangeCache(core.store, ['team_agents'], 10_000),
    compiledRuns: new WeakMap(),
    graphsKept: new Set(),
    crewInputs: new ChangeCache(core.store, ['team_crews', 'team_formations', 'team_formation_versions', 'team_billet_versions'], 1_000),
  };
}
