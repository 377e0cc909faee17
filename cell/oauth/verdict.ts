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
 *
 * Every check but the signature reads state that other cells of a group may
 * change: the denylist mirror, the IAM caches and the client cache all follow
 * `store.onChange`, and the root key is read from the store, so a verdict
 * taken from the verified-token cache is as current as a fresh one.
 */
import { meetCeilings, type Ceiling } from '../../core/authority/ceiling.ts';
import { intersectSelectors } from '../../core/authority/scopes.ts';
import { verifyAccessToken, type AccessTokenClaims } from '../../core/tokens/access-token.ts';
import { TokenError } from '../../core/tokens/errors.ts';
import type { Principal } from '../iam/principals.ts';
import { getClient } from './clients.ts';
import type { OAuthContext } from './oauth-context.ts';
import { audienceOf, issuerOf, OAUTH } from './settings.ts';

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

/**
 * Signature and claims, from the verified-token cache when seen before (exp
 * re-checked on every hit). An entry never outlives its signing key: a
 * retired key stays published until every token it signed has expired.
 */
async function verified(ctx: OAuthContext, token: string): Promise<AccessTokenClaims> {
  const { core, verified: cache } = ctx;
  const hit = cache.get(token);
  if (hit) {
    if (hit.exp * 1000 <= core.clock.now()) { cache.delete(token); throw new TokenError('expired', 'token expired'); }
    return hit;
  }
  const claims = await verifyAccessToken(token, {
    keys: ctx.keys.current().keySet, issuer: issuerOf(core.config), audience: audienceOf(core.config), now: core.clock.now(),
  });
  if (cache.size >= OAUTH.verifiedCacheSize) cache.clear();
  cache.set(token, claims);
  return claims;
}

/** Judges a token; returns the authority it carries now or throws a TokenError. */
export async function judgeToken(ctx: OAuthContext, token: string): Promise<TokenVerdict> {
  const { core, iam, denylist } = ctx;
  const claims = await verified(ctx, token);
  if (denylist.isRevoked(claims.jti)) throw new TokenError('revoked', 'token revoked');
  const root = rootOf(claims);
  let rootKeyCap: Ceiling | null = null;
  let rateLimitRpm: number | null = null;
  if (root.startsWith('api_key:')) {
    const keyId = root.slice('api_key:'.length);
    const k = KEY_ID.test(keyId) ? await iam.keyRow(keyId) : undefined;
    if (!k || k.status !== 'active' || (k.expires_at !== null && k.expires_at <= core.clock.now())) {
      throw new TokenError('revoked', 'the API key this token derives from is no longer active');
    }
    rateLimitRpm = k.rate_limit_rpm;
    if (k.authority !== null) rootKeyCap = iam.keyEnvelope(k, { authority: 'unbounded' });
  } else if (root.startsWith('token:')) {
    if (denylist.isRevoked(root.slice('token:'.length))) throw new TokenError('revoked', 'the token this token derives from was revoked');
  } else {
    throw new TokenError('malformed_token', 'unknown root credential');
  }
  if (claims.client_id.startsWith('ocl_') && !(await getClient(ctx, claims.client_id))) {
    throw new TokenError('revoked', 'the client this token was issued to no longer exists');
  }
  const subject = await iam.principal(claims.sub);
  if (!subject || subject.status !== 'active') throw new TokenError('revoked', 'the token subject is not active');
  const permissions = await iam.permissionsOf(subject);
  const scopes = claims.scope.split(' ').filter(Boolean);
  return {
    claims, subject, permissions, scopes,
    // Never effectiveAuthority here: an empty scope must mean nothing, not everything.
    effective: intersectSelectors(permissions, scopes),
    envelope: rootKeyCap === null ? subject.authority : meetCeilings(subject.authority, rootKeyCap),
    root, rateLimitRpm,
  };
}
