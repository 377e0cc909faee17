/**
 * Every OAuth default in one place, each with why. The access-token lifetime
 * itself is cell/config.ts `accessTokenTtlSeconds` (600 s).
 */
import type { DpopWindow } from '../../core/tokens/dpop.ts';
import type { CellCore } from '../context.ts';
import { MCP_TOOL_PERMISSIONS } from '../../core/permissions.ts';

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
  /**
   * Dynamic registrations per client IP: a burst of 10, then one every 6 minutes (10 an hour). A client
   * registers once per installation; a loop registering clients is refused within seconds.
   */
  registrationBurst: 10,
  registrationRefillPerSecond: 10 / 3600,
  /** Most clients that registered themselves the cell keeps (an admin deletes stale ones); then registration is refused. */
  maxSelfRegisteredClients: 1000,
  /** Client ID Metadata Documents: fetched again after an hour; at most 16 KiB, 5 s, no redirects. */
  clientDocumentTtlMs: 60 * 60 * 1000,
  clientDocumentMaxBytes: 16 * 1024,
  clientDocumentTimeoutMs: 5000,
  /** A document that could not be fetched is not asked for again for a minute (no amplification). */
  clientDocumentFailureTtlMs: 60 * 1000,
  /**
   * Refresh tokens: each one is good for 14 days unused (a client that sleeps longer signs in again),
   * and the family one consent started for 30 days in all (then the user consents again).
   */
  refreshIdleTtlMs: 14 * 24 * 3600 * 1000,
  refreshFamilyTtlMs: 30 * 24 * 3600 * 1000,
} as const;

/** The cell's public base URL, without a trailing slash: from configuration, never from request headers. */
export function publicBase(config: Config): string {
  const u = config.publicUrl ?? `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${config.port}`;
  return u.replace(/\/+$/, '');
}

/**
 * This cell's token issuer: the operator's `--oauth-issuer` URL when given (for RFC 8414 clients, which
 * require the issuer to be the URL its metadata is fetched from), else the spec's `service://<group id>`
 * (a single cell's group id is its cell id; cell/migrations.ts settleGroupId). Either way every cell of
 * the group accepts both (cell/oauth/issuers.ts).
 */
export function issuerOf(config: Config): string {
  return config.oauthIssuer ?? groupIssuerOf(config);
}

/** The spec's issuer of the group, `service://<group id>`: accepted by every cell whatever its flags. */
export function groupIssuerOf(config: Config): string {
  return `service://${config.groupId}`;
}

const LOOPBACK_HOST = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/;

/**
 * Checks an `--oauth-issuer` value: an https URL (http only on a loopback host, for local work), with
 * no user, query or fragment (RFC 8414 §2). Returns the issuer as the cell will publish it (a bare
 * origin without its trailing slash), or what to fix.
 */
export function parseOAuthIssuer(input: string): { ok: true; issuer: string } | { ok: false; error: string } {
  let u: URL;
  try {
    u = new URL(input);
  } catch {
    return { ok: false, error: `--oauth-issuer: '${input}' is not a URL; give https://host[:port][/path]` };
  }
  if (u.protocol !== 'https:' && !(u.protocol === 'http:' && LOOPBACK_HOST.test(u.hostname))) {
    return { ok: false, error: `--oauth-issuer: '${input}' must use https (http only on a loopback host: 127.0.0.1, [::1], localhost)` };
  }
  if (u.username || u.password) return { ok: false, error: `--oauth-issuer: '${input}' must not carry a user or password` };
  if (u.search || u.hash || input.includes('?') || input.includes('#')) {
    return { ok: false, error: `--oauth-issuer: '${input}' must have no query or fragment (RFC 8414 §2)` };
  }
  return { ok: true, issuer: u.pathname === '/' ? u.origin : u.href };
}

/** Token audience: the cell's public API base. */
export function audienceOf(config: Config): string {
  return `${publicBase(config)}/api/public/v1`;
}

/** The path of the cell's MCP endpoint (cell/mcp), a protected resource of its own. */
export const MCP_PATH = '/mcp';

/** The audience of tokens for the cell's MCP endpoint: its URL (RFC 8707 resource of MCP clients). */
export function mcpAudienceOf(config: Config): string {
  return `${publicBase(config)}${MCP_PATH}`;
}

/** The scopes `/.well-known/oauth-protected-resource/mcp` lists: what the MCP endpoint's tools need. */
export const MCP_SCOPES: readonly string[] = MCP_TOOL_PERMISSIONS;

/** Longest lifetime of any token the cell signs, seconds: how long a retired signing key stays published. */
export function maxTokenLifetimeSeconds(config: Config): number {
  return Math.max(config.accessTokenTtlSeconds, OAUTH.satMaxTtlSeconds);
}
