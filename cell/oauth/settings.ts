/**
 * Every OAuth default in one place, each with why. The access-token lifetime
 * itself is cell/config.ts `accessTokenTtlSeconds` (600 s).
 */
import type { DpopWindow } from '../../core/tokens/dpop.ts';
import type { Cell } from '../context.ts';

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
} as const;

/** The cell's public base URL, without a trailing slash: from configuration, never from request headers. */
export function publicBase(cell: Cell): string {
  const u = cell.config.publicUrl ?? `http://${cell.config.host.includes(':') ? `[${cell.config.host}]` : cell.config.host}:${cell.config.port}`;
  return u.replace(/\/+$/, '');
}

/** Token issuer: `service://<cell id>`. */
export function issuerOf(cell: Cell): string {
  return `service://${cell.config.cellId}`;
}

/** Token audience: the cell's public API base. */
export function audienceOf(cell: Cell): string {
  return `${publicBase(cell)}/api/public/v1`;
}

/** Longest lifetime of any token the cell signs, seconds: how long a retired signing key stays published. */
export function maxTokenLifetimeSeconds(cell: Cell): number {
  return Math.max(cell.config.accessTokenTtlSeconds, OAUTH.satMaxTtlSeconds);
}
