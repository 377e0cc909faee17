/**
 * Every OAuth default in one place, each with why. The access-token lifetime
 * itself is cell/config.ts `accessTokenTtlSeconds` (600 s).
 */
import type { DpopWindow } from '../../core/tokens/dpop.ts';
import type { CellCore } from '../context.ts';

/** The configuration these are derived from (read on every call: the public URL is settled once the cell listens). */
type Config = CellCore['config'];

export const OAUTH = {
  /** DPoP proofs: 60 s old at most (clock drift + latency), 5 s in the future. The replay cache keeps a jti that long. */
  dpopWindow: { pastSeconds: 60, futureSeconds: 5 } satisfies DpopWindow,
  /** Authorization codes live 60 s and are single use (RFC 6749 §4.1.2 recommends at most 10 minutes). */
  codeTtlSeconds: 60,
  /** Device codes: 10 minutes to walk to another screen and approve; poll no faster than every 5 s. */
  deviceCodeTtlSeconds: 600,
  deviceIntervalSeconds: 5,
  /** Login sessions for the authorization and device pages: 1 hour. */
  sessionTtlSeconds: 3600,
  /** SATs: 15 minutes unless asked shorter; never more than 1 hour. */
  satDefaultTtlSeconds: 900,
  satMaxTtlSeconds: 3600,
  /** Verified-token cache entries (tokens are immutable; exp, denylist and bindings are checked on every hit). */
  verifiedCacheSize: 20_000,
  /** Registered clients cached by id (every write to oauth_clients, on any cell of the group, empties the cache). */
  clientCacheSize: 10_000,
  /** How often expired denylist entries are dropped and retired signing keys past their overlap leave the key set. */
  sweepIntervalMs: 10 * 60 * 1000,
  /** How often each cell of a group drops the DPoP proofs of the group's replay cache that expired (they live 65 s). */
  proofPruneIntervalMs: 60 * 1000,
} as const;

/** The cell's public base URL, without a trailing slash: from configuration, never from request headers. */
export function publicBase(config: Config): string {
  const u = config.publicUrl ?? `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${config.port}`;
  return u.replace(/\/+$/, '');
}

/** Token issuer: `service://<group id>` (a single cell's group id is its cell id; cell/migrations.ts settleGroupId). */
export function issuerOf(config: Config): string {
  return `service://${config.groupId}`;
}

/** Token audience: the cell's public API base. */
export function audienceOf(config: Config): string {
  return `${publicBase(config)}/api/public/v1`;
}

/** Longest lifetime of any token the cell signs, seconds: how long a retired signing key stays published. */
export function maxTokenLifetimeSeconds(config: Config): number {
  return Math.max(config.accessTokenTtlSeconds, OAUTH.satMaxTtlSeconds);
}
