/**
 * The AI module: provider secrets (sealed at rest), model providers under the
 * deployment posture, agent runtimes, and the catalog's view (from the tools
 * module). The runtime of `local-signed` providers is an optional dependency
 * the wiring passes in (cell/edge/local-runtime.ts when node-llama-cpp is
 * installed); the module owns it from then on and disposes of it on stop.
 */
import type { CellCore } from '../context.ts';
import type { Iam } from '../iam/iam.ts';
import type { CellModule } from '../module.ts';
import type { CellMetrics } from '../ops/metrics.ts';
import type { Tools } from '../tools/tools.ts';
import { Ai } from './ai.ts';
import type { AiContext, LocalModelRuntime } from './providers.ts';
import { aiRoutes } from './routes.ts';
import { loadSecretsKey } from './secrets.ts';

export interface AiModule extends CellModule {
  ai: Ai;
}

export async function createAiModule(
  core: CellCore,
  deps: { iam: Iam; tools: Tools; metrics: CellMetrics; localRuntime?: LocalModelRuntime | undefined },
): Promise<AiModule> {
  let key: Buffer | null = null;
  const ctx: AiContext = {
    core,
    iam: deps.iam,
    localRuntime: deps.localRuntime,
    secretsKey: () => (key ??= loadSecretsKey(core.config.dataDir)),
    metrics: deps.metrics,
  };
  const ai = new Ai(ctx);
  return {
    name: 'ai',
    ai,
    routes(app) {
      aiRoutes(app, ctx, ai, deps.tools);
    },
    async stop() {
      await deps.localRuntime?.dispose?.();
    },
  };
}
