/**
 * The JWT authenticator of the bearer path. Recognises compact JWTs and hands
 * them to core's one token judge (core/tokens/judge.ts), the same function
 * the edge runs offline: signature, alg, typ, iss, aud, exp, the denylist,
 * the DPoP proof (expected URI = the configured public URL + the route, never
 * Host or X-Forwarded-*), the certificate binding (the CA-verified TLS client
 * leaf), the subject's status now and, for a token obtained with an API key,
 * that key's status. Authority = the subject's role permissions now ∩ the
 * token's scope, so a demoted or archived principal loses authority at once.
 * What the cell supplies are the lookups: its store, its denylist, its
 * replay cache, its keyring.
 */
import type { Context } from 'hono';
import { looksLikeJwt } from '../../core/tokens/access-token.ts';
import { VerifiedTokenCache } from '../../core/tokens/cache.ts';
import { judgeAccessToken, type TokenJudgeConfig, type TokenSubject } from '../../core/tokens/judge.ts';
import { tokenRefusal } from '../../core/tokens/refusal.ts';
import { dpopHeaderOf } from '../../core/tokens/request.ts';
import { verifiedLeafThumbprint } from '../../runtime/peer-certificate.ts';
import type { AppEnv, Authenticator, Cell } from '../context.ts';
import { getKeyRow } from '../iam/keys.ts';
import { getPrincipal, principalPermissions, type Principal } from '../iam/principals.ts';
import { isRevoked } from './denylist.ts';
import { replayCache } from './dpop-check.ts';
import { audienceOf, issuerOf, OAUTH, publicBase } from './settings.ts';
import { keyring } from './signing-keys.ts';

interface CellSubject extends TokenSubject { principal: Principal }

export function jwtAuthenticator(cell: Cell): Authenticator {
  const cache = new VerifiedTokenCache(OAUTH.verifiedCacheSize);
  // issuer, audience and keys are read per request: the port is known only once the cell listens, keys rotate.
  const lookups: Omit<TokenJudgeConfig<CellSubject>, 'keys' | 'issuer' | 'audience'> = {
    replay: replayCache(cell),
    dpopWindow: OAUTH.dpopWindow,
    cache,
    isRevoked: (jti) => isRevoked(cell, jti),
    subject(id) {
      const p = getPrincipal(cell, id);
      return p ? { id: p.id, status: p.status, permissions: p.status === 'active' ? principalPermissions(cell, p) : [], principal: p } : null;
    },
    apiKey(keyId) {
      const k = getKeyRow(cell.store, keyId);
      return k ? { status: k.status, expires_at: k.expires_at, rate_limit_rpm: k.rate_limit_rpm } : null;
    },
  };

  return {
    name: 'oauth_jwt',
    async authenticate({ scheme, token }, c: Context<AppEnv>) {
      if (!looksLikeJwt(token)) return null;
      const v = await judgeAccessToken(token, {
        scheme, method: c.req.method, uri: publicBase(cell) + c.req.path, dpop: dpopHeaderOf(c.req.raw.headers),
        certThumbprint: () => verifiedLeafThumbprint(c.env?.incoming?.socket), now: cell.clock.now(),
      }, { ...lookups, keys: keyring(cell).keySet, issuer: issuerOf(cell), audience: audienceOf(cell) });
      if (!v.ok) throw tokenRefusal(v, scheme, { realm: 'cell' });
      const p = v.subject.principal;
      const cred = v.credential;
      return {
        principal: { id: p.id, kind: p.kind, name: p.name, roles: p.roles },
        permissions: [...v.subject.permissions], scopes: v.scopes, effective: v.effective,
        credential: { type: cred.type, id: cred.id, clientId: cred.clientId, ...(cred.rateLimitRpm !== null ? { rateLimitRpm: cred.rateLimitRpm } : {}) },
      };
    },
  };
}
