/**
 * The Agent Teams module: skills, blueprints, agents and their budget
 * ledgers, formations, billets, crews, governing contracts, and crew runs
 * (driven through the runs module, with models from the AI module and tools
 * from the tools module). Other modules use its API (`teams`). On start it
 * wakes waiting crew runs and starts the investigate sweep; on stop it ends
 * the sweep and pending wake-ups (the runs module aborts in-flight drives).
 */
import type { Ai } from '../ai/api.ts';
import type { GroupClock } from '../cluster/api.ts';
import type { CellCore } from '../context.ts';
import type { Iam, Lifecycle } from '../iam/api.ts';
import type { CellModule } from '../module.ts';
import type { Runs } from '../runs/api.ts';
import type { Tools } from '../tools/api.ts';
import { getAgent } from './resources/agents.ts';
import { createTeamsContext } from './context.ts';
import { formationLifecycleRoutes } from './formations/routes-formation-lifecycle.ts';
import { formationRoutes } from './formations/routes-formations.ts';
import { resourceLifecycleRoutes } from './resources/routes-resource-lifecycle.ts';
import { resourceRoutes } from './resources/routes-resources.ts';
import { runRoutes } from './crew-runs/routes-runs.ts';
import { outcomeRoutes } from './crew-runs/routes-outcomes.ts';
import { startSweep, stopSweep } from './crew-runs/runs.ts';
import { Teams } from './api.ts';
import { providerReach, toolReach } from './reach.ts';
import { providerUsers, toolUsers } from './usage.ts';

export interface TeamsModule extends CellModule {
  teams: Teams;
}

export async function createTeamsModule(
  core: CellCore,
  deps: { iam: Iam; lifecycle: Lifecycle; ai: Ai; tools: Tools; runs: Runs; standing: Pick<GroupClock, 'trusted'> },
): Promise<TeamsModule> {
  const ctx = createTeamsContext(core, deps);
  // The engine's model calls name the seat's agent: the AI module asks this module who it is (its provider, its name).
  deps.ai.resolveAgentsWith((agentId) => getAgent(ctx, agentId));
  // A provider an agent names is not deleted under it.
  deps.ai.onProviderUsers((db, providerId) => providerUsers(ctx, db, providerId));
  // A change of a provider's destination reaches the agents that call it.
  deps.ai.onProviderReach((db, providerId, isDefault) => providerReach(ctx, db, providerId, isDefault));
  // A catalog tool something names is not removed under it; a change of its source or its pin reaches the agents granted it.
  deps.tools.onToolUsers((db, names) => toolUsers(ctx, db, names));
  deps.tools.onToolReach((db, names) => toolReach(ctx, names, db));
  return {
    name: 'teams',
    teams: new Teams(ctx),
    routes(app) {
      resourceRoutes(app, ctx);
      resourceLifecycleRoutes(app, ctx);
      formationRoutes(app, ctx);
      formationLifecycleRoutes(app, ctx);
      runRoutes(app, ctx);
      outcomeRoutes(app, ctx);
    },
    async start() {
      await startSweep(ctx);
    },
    async stop() {
      await stopSweep(ctx);
    },
  };
}
