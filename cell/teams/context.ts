/**
 * The Agent Teams module's instance state, which its functions take: the
 * core, the APIs of the modules it uses (IAM, AI, tools, runs), the crew-run
 * drives in flight in this process, and the timers it owns (the investigate
 * sweep, wake-ups of waiting runs), cleared on stop.
 */
import type { Ai } from '../ai/ai.ts';
import type { CellCore } from '../context.ts';
import type { Iam } from '../iam/iam.ts';
import type { Runs } from '../runs/api.ts';
import type { Tools } from '../tools/tools.ts';

export interface TeamsContext {
  core: CellCore;
  iam: Iam;
  ai: Ai;
  tools: Tools;
  runs: Runs;
  /** Crew-run drives in flight in this process, by run id. */
  inflight: Map<string, Promise<unknown>>;
  /** The investigate sweep in progress (one at a time), if any. */
  sweeping: Promise<void> | null;
  /** The periodic investigate sweep, while the module runs. */
  sweepTimer: ReturnType<typeof setInterval> | null;
  /** Pending wake-ups of waiting runs. */
  wakeTimers: Set<ReturnType<typeof setTimeout>>;
  /** Set on stop: no new drive or wake-up starts. */
  stopped: boolean;
}

export function createTeamsContext(core: CellCore, deps: { iam: Iam; ai: Ai; tools: Tools; runs: Runs }): TeamsContext {
  return { core, ...deps, inflight: new Map(), sweeping: null, sweepTimer: null, wakeTimers: new Set(), stopped: false };
}
