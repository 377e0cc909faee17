/**
 * The JWT authenticator of the bearer path. Recognises compact JWTs and hands
 * them to core's one token judge (core/tokens/judge.ts), the same function
 * the edge runs offline and introspection runs without the request:
 * signature, alg, typ, iss, aud, exp, the denylist, the DPoP proof (expected
 * URI = the configured public URL + the route, never Host or X-Forwarded-*),
 * the certificate binding (the CA-verified TLS client leaf), the subject's
 * status now, the root credential (a key-derived token lives with its key; a
 * SAT of a token dies with that token) and the client. Authority = the
 * subject's role permissions now ∩ the token's scope; envelope = the subject's
 * ceiling ∩ the root key's cap. What the cell supplies are the lookups.
 */
import type { Context } from 'hono';
import { meetCeilings, toCeiling, type Ceiling } from '../../core/authority/ceiling.ts';
import { looksLikeJwt } from '../../core/tokens/access-token.ts';
import { VerifiedTokenCache } from '../../core/tokens/cache.ts';
import { judgeAccessToken, type NoRequestFacts, type TokenJudgeConfig, type TokenRequestFacts, type TokenSubject, type TokenVerdict } from '../../core/tokens/judge.ts';
import { tokenRefusal } from '../../core/tokens/refusal.ts';
import { dpopHeaderOf } from '../../core/tokens/request.ts';
import { verifiedLeafThumbprint } from '../../runtime/peer-certificate.ts';
import type { AppEnv, Authenticator, Cell } from '../context.ts';
import { getKeyRow } from '../iam/keys.ts';
import { getPrincipal, principalPermissions, type Principal } from '../iam/principals.ts';
import { getClient } from './clients.ts';
import { isRevoked } from './denylist.ts';
import { replayCache } from './dpop-check.ts';
import { audienceOf, issuerOf, OAUTH, publicBase } from './settings.ts';
import { keyring } from './signing-keys.ts';

interface CellSubject extends TokenSubject { principal: Principal }

type CellJudge = (token: string, facts: TokenRequestFacts | NoRequestFacts) => Promise<TokenVerdict<CellSubject>>;
const judges = new WeakMap<Cell, CellJudge>();

/** The cell's token judgement: core's judge with the cell's lookups (one per cell, sharing the verified-token cache). */
export function cellTokenJudge(cell: Cell): CellJudge {
  const existing = judges.get(cell);
  if (existing) return existing;
  const judge = judgeFor(cell, () => audienceOf(cell), new VerifiedTokenCache(OAUTH.verifiedCacheSize));
  judges.set(cell, judge);
  return judge;
}

/** The same judgement for a token addressed to another audience this cell issues for (one of its devices): introspection. */
export function cellTokenJudgeFor(cell: Cell, audience: string): CellJudge {
  return judgeFor(cell, () => audience);
}

function judgeFor(cell: Cell, audience: () => string, cache?: VerifiedTokenCache): CellJudge {
  // issuer, audience and keys are read per request: the port is known only once the cell listens, keys rotate.
  const lookups: Omit<TokenJudgeConfig<CellSubject>, 'keys' | 'issuer' | 'audience'> = {
    replay: replayCache(cell),
    dpopWindow: OAUTH.dpopWindow,
    ...(cache ? { cache } : {}),
    isRevoked: (jti) => isRevoked(cell, jti),
    subject(id) {
      const p = getPrincipal(cell, id);
      return p ? { id: p.id, status: p.status, permissions: p.status === 'active' ? principalPermissions(cell, p) : [], principal: p } : null;
    },
    apiKey(keyId) {
      const k = getKeyRow(cell.store, keyId);
      return k ? { status: k.status, expires_at: k.expires_at, rate_limit_rpm: k.rate_limit_rpm, authority: k.authority === null ? null : JSON.parse(k.authority) } : null;
    },
    clientExists: (clientId) => getClient(cell, clientId) !== undefined,
  };
  return (token, facts) => judgeAccessToken(token, facts, { ...lookups, keys: keyring(cell).keySet, issuer: issuerOf(cell), audience: audience() });
}

/** The envelope a token carries: its subject's ceiling, met with its root key's cap. */
function tokenEnvelope(p: Principal, rootKey: { authority?: unknown } | null): Ceiling {
  return rootKey?.authority ? meetCeilings(p.authority, toCeiling(rootKey.authority)) : p.authority;
}

export function jwtAuthenticator(cell: Cell): Authenticator {
  const judge = cellTokenJudge(cell);
  return {
    name: 'oauth_jwt',
    async authenticate({ scheme, token }, c: Context<AppEnv>) {
      if (!looksLikeJwt(token)) return null;
      const v = await judge(token, {
        scheme, method: c.req.method, uri: publicBase(cell) + c.req.path, dpop: dpopHeaderOf(c.req.raw.headers),
        certThumbprint: () => verifiedLeafThumbprint(c.env?.incoming?.socket), now: cell.clock.now(),
      });
      if (!v.ok) throw tokenRefusal(v, scheme, { realm: 'cell' });
      const p = v.subject.principal;
      const cred = v.credential;
      return {
        principal: { id: p.id, kind: p.kind, name: p.name, roles: p.roles },
        permissions: [...v.subject.permissions], scopes: v.scopes, effective: v.effective, envelope: tokenEnvelope(p, cred.rootKey),
        credential: {
          type: cred.type, id: cred.id, root: cred.root, clientId: cred.clientId,
          ...(cred.rateLimitRpm !== null ? { rateLimitRpm: cred.rateLimitRpm } : {}),
        },
      };
    },
  };
}
