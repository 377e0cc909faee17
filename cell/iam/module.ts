/**
 * IAM: principals, roles, API keys, the audit trail, the cell's identity key
 * and the bootstrap owner. Contributes the API-key authenticator.
 */
import type { CellCore } from '../context.ts';
import type { CellModule } from '../module.ts';
import { bootstrapOwner } from './bootstrap.ts';
import { Iam } from './iam.ts';
import { Lifecycle } from './lifecycle.ts';
import { identityRoutes } from './routes-identity.ts';
import { keyRoutes } from './routes-keys.ts';
import { principalUpdateRoutes } from './routes-principal-update.ts';
import { principalRoutes } from './routes-principals.ts';
import { roleRoutes } from './routes-roles.ts';
import { whoamiRoutes } from './routes-whoami.ts';

/** How often the purge sweep runs while the cell is up. */
const SWEEP_INTERVAL_MS = 60 * 60 * 1000;

export interface IamModule extends CellModule {
  iam: Iam;
  lifecycle: Lifecycle;
  /** Creates the owner and its key on a fresh store; returns the secret then, else null. */
  bootstrap(): Promise<string | null>;
}

export async function createIamModule(core: CellCore): Promise<IamModule> {
  const iam = new Iam(core);
  const lifecycle = new Lifecycle(core, iam);
  await iam.ensureIdentity();
  let timer: NodeJS.Timeout | undefined;
  const sweep = () => lifecycle.sweep().catch((e: unknown) => core.log.error('purge sweep failed', { error: String(e) }));
  return {
    name: 'iam',
    iam,
    lifecycle,
    authenticators: [iam.keyAuthenticator()],
    bootstrap: () => bootstrapOwner(core, iam),
    routes(app) {
      identityRoutes(app, core, iam);
      principalRoutes(app, core, iam, lifecycle);
      principalUpdateRoutes(app, core, iam);
      roleRoutes(app, core, iam);
      keyRoutes(app, core, iam);
      whoamiRoutes(app, iam);
    },
    async start() {
      await sweep();
      timer = setInterval(() => void sweep(), SWEEP_INTERVAL_MS);
      timer.unref();
    },
    async stop() {
      clearInterval(timer);
    },
  };
}
