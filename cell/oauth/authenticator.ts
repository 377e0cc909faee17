/**
 * The JWT authenticator of the bearer path. Recognises compact JWTs and
 * judges them: signature, alg, typ, iss, aud, exp (core/tokens), the
 * denylist, then the bindings (DPoP proof for cnf.jkt, TLS client
 * certificate for cnf x5t#S256). Authority is recomputed from the subject
 * now: effective = the subject's role permissions ∩ the token's scope, so a
 * demoted or archived principal loses authority at once. Verified tokens are
 * cached until they expire; the denylist and bindings are checked on every use.
 */
import type { Context } from 'hono';
import { intersectSelectors } from '../../core/authority/scopes.ts';
import { ServiceError } from '../../core/errors.ts';
import { looksLikeJwt, verifyAccessToken, type AccessTokenClaims } from '../../core/tokens/access-token.ts';
import { checkConfirmation, certThumbprint } from '../../core/tokens/cnf.ts';
import { isTokenError, TokenError } from '../../core/tokens/errors.ts';
import type { AppEnv, AuthContext, Authenticator, Cell } from '../context.ts';
import { getKeyRow } from '../iam/keys.ts';
import { getPrincipal, principalPermissions } from '../iam/principals.ts';
import { peerCertificate } from './clients.ts';
import { isRevoked } from './denylist.ts';
import { checkRequestProof, dpopHeader } from './dpop-check.ts';
import { audienceOf, issuerOf, OAUTH } from './settings.ts';
import { keyring } from './signing-keys.ts';

function refuse(e: TokenError, dpop: boolean): ServiceError {
  const scheme = dpop ? 'DPoP' : 'Bearer';
  const err = e.code.startsWith('dpop_') ? 'invalid_dpop_proof' : 'invalid_token';
  return new ServiceError('unauthorized', `access token refused: ${e.message}`, {
    details: { reason: e.code },
    headers: { 'WWW-Authenticate': `${scheme} realm="cell", error="${err}", algs="EdDSA Ed25519 ES256 ES384 RS256"` },
  });
}

/**
 * A token obtained with an API key as the client secret (client_id = key id),
 * or a SAT minted with an API key (client_id `sat:api_key:<key id>`), lives
 * and is throttled with that key: refused once the key is revoked or expired,
 * and counted against the key's requests-per-minute ceiling (bucket per key).
 */
function keyDerivedLimits(cell: Cell, claims: AccessTokenClaims): { keyId: string; rpm: number | null } | null {
  const m = /^(?:sat:api_key:)?(key_[0-9a-f]{20})$/.exec(claims.client_id);
  if (!m) return null;
  const k = getKeyRow(cell.store, m[1]!);
  if (!k || k.status !== 'active' || (k.expires_at !== null && k.expires_at <= cell.clock.now())) {
    throw new TokenError('revoked', 'the API key this token was obtained with is no longer active');
  }
  return { keyId: k.id, rpm: k.rate_limit_rpm };
}

export function jwtAuthenticator(cell: Cell): Authenticator {
  const cache = new Map<string, AccessTokenClaims>();
  async function verified(token: string): Promise<AccessTokenClaims> {
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

  async function judge(scheme: 'bearer' | 'dpop', token: string, c: Context<AppEnv>): Promise<AuthContext> {
    const claims = await verified(token);
    if (isRevoked(cell, claims.jti)) throw new TokenError('revoked', 'token revoked');
    const bound = claims.cnf?.jkt !== undefined;
    const proof = dpopHeader(c);
    let dpopJkt: string | null = null;
    if (bound) {
      if (scheme !== 'dpop') throw new TokenError('dpop_required', 'a DPoP-bound token is presented with the DPoP scheme');
      if (proof === null) throw new TokenError('dpop_required', 'a DPoP-bound token needs a DPoP proof');
      dpopJkt = await checkRequestProof(cell, c, proof, token);
    } else if (scheme === 'dpop') {
      throw new TokenError('dpop_invalid', 'the DPoP scheme needs a DPoP-bound token');
    }
    let certTp: string | null = null;
    if (claims.cnf?.['x5t#S256'] !== undefined) {
      const peer = peerCertificate(c);
      certTp = peer ? await certThumbprint(peer.der) : null;
    }
    checkConfirmation(claims.cnf, { dpopJkt, certThumbprint: certTp });
    const p = getPrincipal(cell, claims.sub);
    if (!p || p.status !== 'active') throw new TokenError('revoked', 'the token subject is not active');
    const limits = keyDerivedLimits(cell, claims);
    const permissions = principalPermissions(cell, p);
    const scopes = claims.scope.split(' ').filter(Boolean);
    return {
      principal: { id: p.id, kind: p.kind, name: p.name, roles: p.roles },
      permissions, scopes,
      // Never effectiveAuthority here: an empty scope must mean nothing, not everything.
      effective: intersectSelectors(permissions, scopes),
      credential: {
        type: claims.sat ? 'sat' : 'oauth', id: limits?.keyId ?? claims.jti, clientId: claims.client_id,
        ...(limits?.rpm != null ? { rateLimitRpm: limits.rpm } : {}),
      },
    };
  }

  return {
    name: 'oauth_jwt',
    async authenticate({ scheme, token }, c) {
      if (!looksLikeJwt(token)) return null;
      try {
        return await judge(scheme, token, c);
      } catch (e) {
        if (isTokenError(e)) throw refuse(e, scheme === 'dpop');
        throw e;
      }
    },
  };
}
