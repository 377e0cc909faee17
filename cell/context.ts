/**
 * What every module is built from (`CellCore`: config, store, clock, log),
 * the request's authority as the gateway established it, and the Hono
 * environment of the app.
 */
import type { Context } from 'hono';
import type { IncomingMessage } from 'node:http';
import type { Ceiling } from '../core/authority/ceiling.ts';
import type { CellConfig } from './config.ts';
import type { CredentialLimits } from '../runtime/gateway.ts';
import type { Change, Store } from './store/types.ts';
import { dbNow, type DbNow } from './store/db-clock.ts';
import type { RequestTraces } from './http/trace.ts';
import type { Logger } from '../runtime/log.ts';

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/**
 * Now as a statement on what the group shares judges it (prunes of shared
 * records, sweeps): the database's clock on PostgreSQL, so a member whose own
 * clock strays never drops what the others still need; the cell's clock on the
 * embedded engine (one cell), and under an injected clock (in-process tests,
 * which judge on it on both engines, as the cluster module does).
 */
export function sharedNow(core: { store: Pick<Store, 'engine'>; clock: Clock }): DbNow {
  return dbNow(core.store.engine === 'postgres' && core.clock === systemClock ? 'postgres' : 'embedded', core.clock.now());
}

/** A clock tests move by hand. */
export function manualClock(start = Date.UTC(2026, 0, 1)): Clock & { advance(ms: number): void; set(ms: number): void } {
  let t = start;
  return {
    now: () => t,
    advance: (ms) => {
      t += ms;
    },
    set: (ms) => {
      t = ms;
    },
  };
}

/** The operator log (runtime/log.ts: pino, shared with the edge). */
export type { Logger } from '../runtime/log.ts';

/**
 * The cell's config (with its settled id and its group's id, cell/migrations.ts
 * settleGroupId), its store, clock and log: what every module factory takes.
 */
export interface CellCore {
  config: CellConfig & { cellId: string; groupId: string };
  store: Store;
  clock: Clock;
  log: Logger;
  /** The W3C trace of the request the current code runs for (cell/http/trace.ts). */
  traces: RequestTraces;
}

export interface AuthContext {
  principal: { id: string; kind: string; name: string; roles: string[] };
  /** The owner's role permissions (selectors). */
  permissions: string[];
  /** The credential's scopes ([] or ['*'] = full authority of the owner). */
  scopes: string[];
  /** permissions ∩ scopes: what this request may do. */
  effective: string[];
  /** The envelope authority this request holds: the principal's ceiling met with the credential's cap. */
  envelope: Ceiling;
  credential: {
    type: 'api_key' | 'oauth' | 'sat';
    id: string;
    /**
     * The credential everything derives from (`api_key:<key id>`, or `token:<jti>` for a
     * token minted with no key behind it): revoking or throttling it applies to all that derive from it.
     */
    root: string;
    /** Per-credential requests-per-minute ceiling, when it has one. */
    rateLimitRpm?: number;
    clientId?: string;
    /** An exchanged token's actors (RFC 8693 `act`), the current one first: the principal is the subject they act for. */
    actors?: string[];
  };
}

export interface Authenticator {
  name: string;
  /**
   * Returns null when the credential is not of this kind; throws
   * ServiceError('unauthorized' | 'forbidden') when it is but is refused.
   * May answer without a promise (a cached credential).
   */
  authenticate(cred: { scheme: 'bearer' | 'dpop'; token: string }, c: Context<AppEnv>): AuthContext | null | Promise<AuthContext | null>;
  /**
   * Judges again, now, a credential this authenticator accepted for a request that is still being answered
   * (an event stream): revoked, expired, its subject or root credential stopped. The request's single-use
   * parts (a DPoP proof, spent when it was accepted) are not judged again. Absent: `authenticate` again.
   */
  recheck?(cred: { scheme: 'bearer' | 'dpop'; token: string }, c: Context<AppEnv>): AuthContext | null | Promise<AuthContext | null>;
  /** The tables whose changes may revoke or narrow a credential it accepted (they prompt a recheck). */
  tables?: readonly string[];
}

/** What a long-lived answer (an event stream) uses to keep judging the credential that opened it (cell/http/gateway.ts). */
export interface CredentialCheck {
  /** The request's credential judged again now: its authority, or the refusal thrown. */
  recheck(c: Context<AppEnv>): Promise<AuthContext>;
  /** Whether a change of the store may have revoked or narrowed a credential (or the store may have missed one). */
  concerns(change: Change): boolean;
}

export type AppEnv = {
  Bindings: { incoming?: IncomingMessage };
  Variables: { auth: AuthContext; requestId: string; credentialLimits: CredentialLimits; credentialCheck: CredentialCheck };
};
