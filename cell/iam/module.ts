/**
 * IAM: principals, roles, API keys, the audit trail, the cell's identity key
 * and the bootstrap owner. Registers the API-key authenticator.
 */
import type { CellModule } from '../module.ts';
import { bootstrapOwner } from './bootstrap.ts';
import { ensureIdentityKey } from './identity.ts';
import { apiKeyAuthenticator } from './keys.ts';
import { purgeSweep } from './lifecycle.ts';
import { identityRoutes } from './routes-identity.ts';
import { principalRoutes } from './routes-principals.ts';
import { keyRoutes } from './routes-keys.ts';
import { IAM_MIGRATIONS } from './schema.ts';

/** How often the purge sweep runs while the cell is up. */
const SWEEP_INTERVAL_MS = 60 * 60 * 1000;
const timers = new WeakMap<object, NodeJS.Timeout>();

export const iamModule: CellModule = {
  name: 'iam',
  migrations: IAM_MIGRATIONS,
  async init(cell) {
    await ensureIdentityKey(cell);
    const secret = await bootstrapOwner(cell);
    if (secret) {
      cell.services.set('iam.bootstrapKey', secret);
      process.stdout.write(`bootstrap admin key (shown once, also in ${cell.config.dataDir}/bootstrap-admin.key):\n${secret}\n`);
    }
    cell.authenticators.push(apiKeyAuthenticator(cell));
  },
  routes(app, cell) {
    identityRoutes(app, cell);
    principalRoutes(app, cell);
    keyRoutes(app, cell);
  },
  async start(cell) {
    await purgeSweep(cell);
    const t = setInterval(() => { purgeSweep(cell).catch((e: unknown) => cell.log.error('purge sweep failed', { error: String(e) })); }, SWEEP_INTERVAL_MS);
    t.unref();
    timers.set(cell, t);
  },
  stop(cell) {
    clearInterval(timers.get(cell));
  },
};
