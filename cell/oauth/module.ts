/**
 * The OAuth 2.1 authorization server: signing keys, clients, the token,
 * device, introspection and revocation endpoints, the authorization, login
 * and device pages, SATs, and the JWT authenticator of the bearer path.
 */
import type { CellModule } from '../module.ts';
import { jwtAuthenticator } from './authenticator.ts';
import { sweepDenylist } from './denylist.ts';
import { pageRoutes } from './routes-pages.ts';
import { adminRoutes } from './routes-admin.ts';
import { metadataRoutes } from './routes-metadata.ts';
import { protocolRoutes } from './routes-protocol.ts';
import { OAUTH_MIGRATIONS } from './schema.ts';
import { ensureSigningKey, refreshKeyring } from './signing-keys.ts';

const SWEEP_MS = 10 * 60 * 1000;
const timers = new WeakMap<object, NodeJS.Timeout>();

export const oauthModule: CellModule = {
  name: 'oauth',
  migrations: OAUTH_MIGRATIONS,
  async init(cell) {
    await ensureSigningKey(cell);
    cell.authenticators.push(jwtAuthenticator(cell));
  },
  routes(app, cell) {
    metadataRoutes(app, cell);
    protocolRoutes(app, cell);
    pageRoutes(app, cell);
    adminRoutes(app, cell);
  },
  start(cell) {
    const t = setInterval(() => {
      Promise.all([sweepDenylist(cell), refreshKeyring(cell)]).catch((e: unknown) => cell.log.error('oauth sweep failed', { error: String(e) }));
    }, SWEEP_MS);
    t.unref();
    timers.set(cell, t);
  },
  stop(cell) {
    clearInterval(timers.get(cell));
  },
};
