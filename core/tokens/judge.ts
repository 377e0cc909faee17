/**
 * The one judgement of a presented access token, shared by the cell's bearer
 * path (cell/oauth/authenticator.ts) and the edge's offline gateway
 * (edge/gateway.ts): the same code on both sides, so the same token and the
 * same request get the same answer, code for code.
 *
 * In order, each refusal with its own TokenError code:
 *   1. the token itself (core/tokens/access-token.ts): shape, alg (EdDSA
 *      only), typ, signature against the key set, iss, aud, exp, iat;
 *      verified once, then served from the verified-token cache until `exp`;
 *   2. the denylist (`revoked`);
 *   3. DPoP (RFC 9449): a token with `cnf.jkt` needs the DPoP scheme and a
 *      proof for this method and URI, fresh, unseen, with `ath` of this
 *      token; the DPoP scheme with an unbound token is refused;
 *   4. certificate binding (RFC 8705): `cnf["x5t#S256"]` needs the presented
 *      leaf with that thumbprint; with both bindings both must hold;
 *   5. the subject: it must exist and be active (`revoked` otherwise);
 *   6. a token obtained with an API key (client_id `key_…`, or a SAT minted
 *      with one, `sat:api_key:key_…`) lives with that key: refused once the
 *      key is not active or has expired.
 * Authority: effective = the subject's role permissions now ∩ the token's
 * scope (an empty scope grants nothing: never effectiveAuthority here).
 *
 * Everything about the host is passed in: the request facts (the host
 * derives the expected URI by its own rule), the clock reading, the key set,
 * and the lookups (store on the cell, the signed bundle on the edge). Lookups
 * may answer synchronously or with a promise.
 */
import type { JWTVerifyGetKey } from 'jose';
import { intersectSelectors } from '../authority/scopes.ts';
import { verifyAccessToken, type AccessTokenClaims } from './access-token.ts';
import type { VerifiedTokenCache } from './cache.ts';
import { checkConfirmation } from './cnf.ts';
import { verifyDpopProof, type DpopWindow } from './dpop.ts';
import { isTokenError, TokenError, type TokenErrorCode } from './errors.ts';
import type { ReplayCache } from './replay.ts';

type MaybePromise<T> = T | Promise<T>;

/** What the host observed about the request. */
export interface TokenRequestFacts {
  /** The Authorization scheme the token came with. */
  scheme: 'bearer' | 'dpop';
  /** HTTP method, for the proof's `htm`. */
  method: string;
  /** The expected `htu`: the cell's configured public URL + route; the edge's own scheme, Host and route. */
  uri: string;
  /** The DPoP header: null when absent, '' when several were sent (refused as invalid). */
  dpop: string | null;
  /** x5t#S256 of the CA-verified TLS client leaf, or null; asked only for a certificate-bound token. */
  certThumbprint: () => MaybePromise<string | null>;
  /** The host's clock, ms since the epoch. */
  now: number;
}

/** A token's subject as the host knows it. */
export interface TokenSubject {
  id: string;
  status: string;
  /** The subject's role permissions (selectors). */
  permissions: readonly string[];
}

/** The API key a key-derived token was obtained with, as the host knows it. */
export interface TokenKeyInfo {
  status: string;
  expires_at: number | null;
  rate_limit_rpm: number | null;
}

export interface TokenJudgeConfig<S extends TokenSubject = TokenSubject> {
  keys: JWTVerifyGetKey;
  issuer: string;
  audience: string;
  replay: ReplayCache;
  dpopWindow?: DpopWindow;
  cache?: VerifiedTokenCache;
  isRevoked(jti: string): MaybePromise<boolean>;
  subject(id: string): MaybePromise<S | null>;
  apiKey(keyId: string): MaybePromise<TokenKeyInfo | null>;
}

export interface TokenCredential {
  type: 'oauth' | 'sat';
  /** The key id for a key-derived token (its requests count against the key), else the token's jti. */
  id: string;
  clientId: string;
  /** The key's requests-per-minute ceiling, for a key-derived token. */
  rateLimitRpm: number | null;
}

export type TokenVerdict<S extends TokenSubject = TokenSubject> =
  | { ok: true; claims: AccessTokenClaims; subject: S; scopes: string[]; effective: string[]; credential: TokenCredential }
  | { ok: false; code: TokenErrorCode; message: string };

const KEY_DERIVED = /^(?:sat:api_key:)?(key_[0-9a-f]{20})$/;

async function verified(token: string, now: number, config: TokenJudgeConfig<TokenSubject>): Promise<AccessTokenClaims> {
  const hit = config.cache?.get(token);
  if (hit) {
    if (hit.exp * 1000 <= now) { config.cache!.delete(token); throw new TokenError('expired', 'token expired'); }
    return hit;
  }
  const claims = await verifyAccessToken(token, { keys: config.keys, issuer: config.issuer, audience: config.audience, now });
  config.cache?.set(token, claims);
  return claims;
}

async function judge<S extends TokenSubject>(token: string, facts: TokenRequestFacts, config: TokenJudgeConfig<S>): Promise<TokenVerdict<S>> {
  const claims = await verified(token, facts.now, config as TokenJudgeConfig<TokenSubject>);
  if (await config.isRevoked(claims.jti)) throw new TokenError('revoked', 'token revoked');

  let dpopJkt: string | null = null;
  if (claims.cnf?.jkt !== undefined) {
    if (facts.scheme !== 'dpop') throw new TokenError('dpop_required', 'a DPoP-bound token is presented with the DPoP scheme');
    if (facts.dpop === null) throw new TokenError('dpop_required', 'a DPoP-bound token needs a DPoP proof');
    const proof = await verifyDpopProof(facts.dpop, {
      htm: facts.method, htu: facts.uri, now: facts.now, replay: config.replay, accessToken: token,
      ...(config.dpopWindow ? { window: config.dpopWindow } : {}),
    });
    dpopJkt = proof.jkt;
  } else if (facts.scheme === 'dpop') {
    throw new TokenError('dpop_invalid', 'the DPoP scheme needs a DPoP-bound token');
  }
  const certTp = claims.cnf?.['x5t#S256'] !== undefined ? await facts.certThumbprint() : null;
  checkConfirmation(claims.cnf, { dpopJkt, certThumbprint: certTp });

  const subject = await config.subject(claims.sub);
  if (!subject || subject.status !== 'active') throw new TokenError('revoked', 'the token subject is not active');

  let keyId: string | null = null;
  let rpm: number | null = null;
  const m = KEY_DERIVED.exec(claims.client_id);
  if (m) {
    const k = await config.apiKey(m[1]!);
    if (!k || k.status !== 'active' || (k.expires_at !== null && k.expires_at <= facts.now)) {
      throw new TokenError('revoked', 'the API key this token was obtained with is no longer active');
    }
    keyId = m[1]!;
    rpm = k.rate_limit_rpm;
  }
  const scopes = claims.scope.split(' ').filter(Boolean);
  return {
    ok: true, claims, subject, scopes,
    effective: intersectSelectors(subject.permissions, scopes),
    credential: { type: claims.sat ? 'sat' : 'oauth', id: keyId ?? claims.jti, clientId: claims.client_id, rateLimitRpm: rpm },
  };
}

/**
 * Judges a presented access token for one request: the verdict with the
 * effective authority, or the coded refusal. Anything that is not a token
 * refusal (a lookup or the replay cache failing) is thrown: the host fails closed.
 */
export async function judgeAccessToken<S extends TokenSubject>(token: string, facts: TokenRequestFacts, config: TokenJudgeConfig<S>): Promise<TokenVerdict<S>> {
  try {
    return await judge(token, facts, config);
  } catch (e) {
    if (isTokenError(e)) return { ok: false, code: e.code, message: e.message };
    throw e;
  }
}
