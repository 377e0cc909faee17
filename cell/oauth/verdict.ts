/**
 * The one verdict on an access token this cell issued, shared by the bearer
 * path (authenticator.ts, which then checks the bindings against the request)
 * and introspection (routes-protocol.ts): a token the bearer path refuses is
 * never reported active.
 *
 * In order: signature, alg, typ, iss, aud, exp (core/tokens/access-token.ts,
 * cached per token until it expires); the token's own jti and its root's on
 * the denylist; the root API key still active (a token obtained or a SAT
 * minted with a key lives and is throttled with that key); the registered
 * client still exists; the subject still active. Authority is recomputed now:
 * effective = the subject's role permissions ∩ the token's scope; envelope =
 * the subject's ceiling ∩ the root key's cap.
 */
import { meetCeilings, type Ceiling } from '../../core/authority/ceiling.ts';
import { intersectSelectors } from '../../core/authority/scopes.ts';
import { verifyAccessToken, type AccessTokenClaims } from '../../core/tokens/access-token.ts';
import { TokenError } from '../../core/tokens/errors.ts';
import type { Cell } from '../context.ts';
import { getKeyRow, keyEnvelope } from '../iam/keys.ts';
import { getPrincipal, principalPermissions, type Principal } from '../iam/principals.ts';
import { getClient } from './clients.ts';
import { isRevoked } from './denylist.ts';
import { audienceOf, issuerOf, OAUTH } from './settings.ts';
import { keyring } from './signing-keys.ts';

export interface TokenVerdict {
  claims: AccessTokenClaims;
  subject: Principal;
  permissions: string[];
  scopes: string[];
  effective: string[];
  envelope: Ceiling;
  /** `api_key:<id>` or `token:<jti>`: what revoking or throttling applies to. */
  root: string;
  /** The root API key's rpm ceiling, when the root is a key that has one. */
  rateLimitRpm: number | null;
}

const KEY_ID = /^key_[0-9a-f]{20}$/;
const LEGACY_KEY_CLIENT = /^(?:sat:api_key:)?(key_[0-9a-f]{20})$/;

/** The root credential of a token: its `root` claim, else (tokens minted before the claim) what its client_id says, else itself. */
export function rootOf(claims: AccessTokenClaims): string {
  if (claims.root) return claims.root;
  const m = LEGACY_KEY_CLIENT.exec(claims.client_id);
  return m ? `api_key:${m[1]}` : `token:${claims.jti}`;
}

const caches = new WeakMap<Cell, Map<string, AccessTokenClaims>>();

/** Signature and claims, from the verified-token cache when seen before (exp re-checked on every hit). */
async function verified(cell: Cell, token: string): Promise<AccessTokenClaims> {
  let cache = caches.get(cell);
  if (!cache) { cache = new Map(); caches.set(cell, cache); }
  const hit = cache.get(token);
  if (hit) {
    if (hit.exp * 1000 <= cell.clock.now()) { cache.delete(token); throw new TokenError('expired', 'token expired'); }
    return hit;
  }
  const claims = await verifyAccessToken(token, { keys: keyring(cell).keySet, issuer: issuerOf(cell), audience: audienceOf(cell), now: cell.clock.now() });
  if (cache.size >= OAUTH.verifiedCacheSize) cache.clear();
  cache.set(token, claims);
  return claims;
}

/** Judges a token; returns the authority it carries now or throws a TokenError. */
export async function judgeToken(cell: Cell, token: string): Promise<TokenVerdict> {
  const claims = await verified(cell, token);
  if (isRevoked(cell, claims.jti)) throw new TokenError('revoked', 'token revoked');
  const root = rootOf(claims);
  let rootKeyCap: Ceiling | null = null;
  let rateLimitRpm: number | null = null;
  if (root.startsWith('api_key:')) {
    const keyId = root.slice('api_key:'.length);
    const k = KEY_ID.test(keyId) ? getKeyRow(cell.store, keyId) : undefined;
    if (!k || k.status !== 'active' || (k.expires_at !== null && k.expires_at <= cell.clock.now())) {
      throw new TokenError('revoked', 'the API key this token derives from is no longer active');
    }
    rateLimitRpm = k.rate_limit_rpm;
    if (k.authority !== null) rootKeyCap = keyEnvelope(k, { authority: 'unbounded' });
  } else if (root.startsWith('token:')) {
    if (isRevoked(cell, root.slice('token:'.length))) throw new TokenError('revoked', 'the token this token derives from was revoked');
  } else {
    throw new TokenError('malformed_token', 'unknown root credential');
  }
  if (claims.client_id.startsWith('ocl_') && !getClient(cell, claims.client_id)) {
    throw new TokenError('revoked', 'the client this token was issued to no longer exists');
  }
  const subject = getPrincipal(cell, claims.sub);
  if (!subject || subject.status !== 'active') throw new TokenError('revoked', 'the token subject is not active');
  const permissions = principalPermissions(cell, subject);
  const scopes = claims.scope.split(' ').filter(Boolean);
  return {
    claims, subject, permissions, scopes,
    // Never effectiveAuthority here: an empty scope must mean nothing, not everything.
    effective: intersectSelectors(permissions, scopes),
    envelope: rootKeyCap === null ? subject.authority : meetCeilings(subject.authority, rootKeyCap),
    root, rateLimitRpm,
  };
}
