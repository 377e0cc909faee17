/**
 * The AI module: provider secrets (sealed at rest under the group's secrets
 * key, which the custody module keeps and proves at start), model providers under the
 * deployment posture, agent runtimes, the engine's model port (its calls run
 * under the runs module's drivers), and the catalog's view (from the tools
 * module). The runtime of `local-signed` providers (local-runtime.ts) is
 * there when node-llama-cpp is installed beside the program; the module
 * disposes of it on stop.
 */
import type { CellCore } from '../context.ts';
import type { Custody } from '../custody/api.ts';
import type { Iam } from '../iam/api.ts';
import type { CellModule } from '../module.ts';
import type { CellMetrics } from '../ops/api.ts';
import type { Runs } from '../runs/api.ts';
import type { Tools } from '../tools/api.ts';
import { Ai } from './api.ts';
import { localRuntime } from './local-runtime.ts';
import type { AiContext } from './providers.ts';
import { ChangeCache } from '../store/change-cache.ts';
import { providerLifecycleRoutes } from './routes-provider-lifecycle.ts';
import { aiRoutes } from './routes.ts';
import { secretRoutes } from './routes-secrets.ts';
import { sourceSecrets } from './secrets.ts';

export interface AiModule extends CellModule {
  ai: Ai;
}

export async function createAiModule(
  core: CellCore,
  deps: { custody: Custody; iam: Iam; tools: Tools; runs: Runs; metrics: CellMetrics },
): Promise<AiModule> {
  const runtime = localRuntime(core.config.dataDir) ?? undefined;
  const ctx: AiContext = {
    core,
    iam: deps.iam,
    runs: deps.runs,
    agents: undefined,
    localRuntime: runtime,
    custody: deps.custody,
    providerUserHooks: [],
    providerReachHooks: [],
    metrics: deps.metrics,
    callCache: {
      providers: new ChangeCache(core.store, ['ai_providers'], 10_000),
      secrets: new ChangeCache(core.store, ['ai_secrets'], 10_000),
    },
  };
  const ai = new Ai(ctx);
  // The catalog's sources send a stored secret as their client credentials: lent under the same rules as a provider's.
  deps.tools.useSecrets(sourceSecrets(ctx));
  return {
    name: 'ai',
    ai,
    routes(app) {
      aiRoutes(app, ctx, ai, deps.tools);
      secretRoutes(app, ctx, deps.tools);
      providerLifecycleRoutes(app, ctx);
    },
    async stop() {
      await runtime?.dispose();
    },
  };
}
