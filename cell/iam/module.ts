/**
 * IAM: principals, roles, API keys, the audit trail, the cell's identity key
 * and the bootstrap owner. Contributes the API-key authenticator.
 */
import type { GroupClock } from '../cluster/api.ts';
import type { CellCore } from '../context.ts';
import type { Custody } from '../custody/api.ts';
import type { CellModule } from '../module.ts';
import { bootstrapOwner } from './bootstrap.ts';
import { resetOwner, type OwnerReset } from './reset-owner.ts';
import { Iam } from './iam.ts';
import { Lifecycle } from './lifecycle.ts';
import { identityRoutes } from './routes-identity.ts';
import { keyRoutes } from './routes-keys.ts';
import { principalUpdateRoutes } from './routes-principal-update.ts';
import { principalRoutes } from './routes-principals.ts';
import { roleRoutes } from './routes-roles.ts';
import { whoamiRoutes } from './routes-whoami.ts';
import { StoreBuckets } from './rate-buckets.ts';
import type { SharedBuckets } from '../../runtime/gateway.ts';

/** How often the purge sweep runs while the cell is up. */
const SWEEP_INTERVAL_MS = 60 * 60 * 1000;
/** How often full rpm buckets are pruned from the store. */
const BUCKET_PRUNE_INTERVAL_MS = 60 * 1000;

export interface IamModule extends CellModule {
  iam: Iam;
  lifecycle: Lifecycle;
  /** Creates the owner and its key on a fresh store; returns the secret then, else null. */
  bootstrap(): Promise<string | null>;
  /** Mints a new owner key for an operator who lost the owner's keys (`admin reset-owner`; cell/iam/reset-owner.ts). */
  resetOwner(opts: { principalId?: string }): Promise<OwnerReset>;
  /**
   * The rpm buckets a group of cells shares (in the store) on PostgreSQL; null
   * on the embedded engine, one cell, whose buckets stay in memory.
   */
  sharedBuckets: SharedBuckets | null;
}

export interface IamDeps {
  /** The group's secrets key: the cell's identity keys are sealed under it. */
  custody: Custody;
  /** Whether this cell stands as a member (its clock within the bound): a member that stood down makes no background writes. */
  standing: Pick<GroupClock, 'trusted'>;
}

export async function createIamModule(core: CellCore, deps: IamDeps): Promise<IamModule> {
  const iam = new Iam(core, deps.custody);
  const lifecycle = new Lifecycle(core, iam);
  await iam.ensureIdentity();
  let timer: NodeJS.Timeout | undefined;
  let pruneTimer: NodeJS.Timeout | undefined;
  const sweep = async () => {
    if (!deps.standing.trusted()) return;
    await lifecycle.sweep().catch((e: unknown) => core.log.error('purge sweep failed', { error: e }));
  };
  const buckets = core.store.engine === 'postgres' ? new StoreBuckets(core) : null;
  return {
    name: 'iam',
    iam,
    lifecycle,
    authenticators: [iam.keyAuthenticator()],
    bootstrap: () => bootstrapOwner(core, iam),
    resetOwner: (opts) => resetOwner(core, iam, opts),
    sharedBuckets: buckets,
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
      if (buckets) {
        pruneTimer = setInterval(() => {
          if (!deps.standing.trusted()) return;
          buckets.prune().catch((e: unknown) => core.log.error('rate bucket prune failed', { error: e }));
        }, BUCKET_PRUNE_INTERVAL_MS);
        pruneTimer.unref();
      }
    },
    async stop() {
      clearInterval(timer);
      clearInterval(pruneTimer);
    },
  };
}
