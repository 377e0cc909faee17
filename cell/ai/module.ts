/**
 * The AI module: provider secrets (sealed at rest), model providers under the
 * deployment posture, agent runtimes, the engine's model port (its calls run
 * under the runs module's drivers), and the catalog's view (from the tools
 * module). The runtime of `local-signed` providers (local-runtime.ts) is
 * there when node-llama-cpp is installed beside the program; the module
 * disposes of it on stop.
 */
import type { CellCore } from '../context.ts';
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
import { checkSecretsKeyAtStart, keyMatchesStore, SECRETS_KEY_HINT, secretsKeyLoader } from './secrets-key.ts';
import { sourceSecrets } from './secrets.ts';

export interface AiModule extends CellModule {
  ai: Ai;
}

export async function createAiModule(
  core: CellCore,
  deps: { iam: Iam; tools: Tools; runs: Runs; metrics: CellMetrics },
): Promise<AiModule> {
  const secretsKey = secretsKeyLoader(core.config);
  // A group (PostgreSQL): refuses to start with a key that does not open the secrets already in the store (a
  // member given another key). The embedded engine is one cell with its own key: a lost key file is answered
  // as before, secret by secret at the provider call (503 secret_unreadable).
  if (core.store.engine === 'postgres') await checkSecretsKeyAtStart(core, secretsKey);
  // A key file given is read now on either engine: a wrong path or size is refused before the cell serves anything.
  else if (core.config.secretsKeyFile) secretsKey();
  const runtime = localRuntime(core.config.dataDir) ?? undefined;
  const ctx: AiContext = {
    core,
    iam: deps.iam,
    runs: deps.runs,
    agents: undefined,
    localRuntime: runtime,
    secretsKey,
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
  // Another cell of the group sealed the first secret: say so at once if it did with another key than this cell's.
  const unsubscribe = core.store.onChange((c) => {
    if (!c.remote || !c.tables.has('ai_secrets_key_check')) return;
    keyMatchesStore(core, secretsKey()).then(
      (ok) => {
        if (!ok) core.log.error(`the secrets key of this cell does not open the provider secrets of the store; ${SECRETS_KEY_HINT}`);
      },
      () => undefined,
    );
  });
  return {
    name: 'ai',
    ai,
    routes(app) {
      aiRoutes(app, ctx, ai, deps.tools);
      secretRoutes(app, ctx, deps.tools);
      providerLifecycleRoutes(app, ctx);
    },
    async stop() {
      unsubscribe();
      await runtime?.dispose();
    },
  };
}
