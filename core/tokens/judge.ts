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
 *   6. the root credential (`rootOf`): a token that derives from an API key
 *      (obtained with it, or a SAT minted with it or with a token rooted in
 *      it) lives with that key, refused once the key is not active or has
 *      expired (or, where the host knows it, its owner is inactive); one that
 *      derives from a token dies when that token is revoked (`revoked`);
 *   7. the registered client the token was issued to still exists, where the
 *      host can tell (`revoked`);
 *   8. the delegation chain of an exchanged token (RFC 8693, core/tokens/
 *      delegation.ts): no deeper than the host's limit (`delegation_too_deep`),
 *      every actor active (`revoked`), every link it derives from alive: a
 *      token not revoked, a key active and unexpired, a client still
 *      registered (`revoked`).
 * Authority: effective = the subject's role permissions now ∩ the token's
 * scope (an empty scope grants nothing: never effectiveAuthority here) ∩,
 * for a key-rooted token where the host knows it, what the root key holds now
 * ∩ what every actor of its chain and every key it links holds now.
 *
 * Everything about the host is passed in: the request facts (the host
 * derives the expected URI by its own rule), the clock reading, the key set,
 * and the lookups (store on the cell, the signed bundle on the edge). Lookups
 * may answer synchronously or with a promise.
 */
import type { JWTVerifyGetKey } from 'jose';
import { intersectSelectors } from '../authority/scopes.ts';
import { issuerAccepted, verifyAccessToken, type AccessTokenClaims } from './access-token.ts';
import { accessTokenHash } from './ath.ts';
import type { VerifiedTokenCache } from './cache.ts';
import { checkConfirmation } from './cnf.ts';
import { actorsOf, DEFAULT_MAX_ACT_DEPTH, linksOf } from './delegation.ts';
import { verifyDpopProof, type DpopKeyCache, type DpopWindow } from './dpop.ts';
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
  /** The key's envelope cap (null: its owner's full ceiling); the host meets it with the subject's ceiling. */
  authority?: unknown;
  /** The key owner's status, where the host knows it: a token rooted in a key of an inactive owner is refused. */
  owner_status?: string;
  /** What the key holds now (its owner's role permissions ∩ its scopes), where the host knows it: the token never exceeds it. */
  permissions?: readonly string[];
}

export interface TokenJudgeConfig<S extends TokenSubject = TokenSubject> {
  keys: JWTVerifyGetKey;
  /** The accepted `iss`: one, or the group's set (core/tokens/access-token.ts issuerAccepted). */
  issuer: string | readonly string[];
  /** The expected `aud`, or a test of it (a group of cells accepts the API of every member). */
  audience: string | ((aud: string) => boolean);
  replay: ReplayCache;
  dpopWindow?: DpopWindow;
  /** Public keys of DPoP proofs already verified (imported once per client key). */
  dpopKeys?: DpopKeyCache;
  cache?: VerifiedTokenCache;
  isRevoked(jti: string): MaybePromise<boolean>;
  subject(id: string): MaybePromise<S | null>;
  apiKey(keyId: string): MaybePromise<TokenKeyInfo | null>;
  /** Whether the registered client `clientId` still exists; hosts that cannot tell omit it. */
  clientExists?(clientId: string): MaybePromise<boolean>;
  /** The longest `act` chain honoured (default DEFAULT_MAX_ACT_DEPTH). */
  maxActDepth?: number;
}

export interface TokenCredential {
  type: 'oauth' | 'sat';
  /** The token's jti. */
  id: string;
  /** `api_key:<key id>` or `token:<jti>`: what revoking and throttling apply to (see rootOf). */
  root: string;
  clientId: string;
  /** The root key's requests-per-minute ceiling, for a key-derived token. */
  rateLimitRpm: number | null;
  /** The root key as the host knows it, for a key-derived token. */
  rootKey: TokenKeyInfo | null;
  /** The actors of an exchanged token, the current one first (RFC 8693 `act`); [] for any other token. */
  actors: string[];
  /** The keys an exchanged token links besides its root, as the host knows them (each caps it). */
  linkKeys: TokenKeyInfo[];
}

export type TokenVerdict<S extends TokenSubject = TokenSubject> =
  | {
      ok: true;
      claims: AccessTokenClaims;
      subject: S;
      /** The actors of the chain as the host knows them, the current one first. */
      actorSubjects: S[];
      scopes: string[];
      effective: string[];
      credential: TokenCredential;
    }
  | { ok: false; code: TokenErrorCode; message: string };

const LEGACY_KEY_CLIENT = /^(?:sat:api_key:)?(key_[0-9a-f]{20})$/;
const KEY_ID = /^key_[0-9a-f]{20}$/;

/**
 * Whether a token's `client_id` names a client the host keeps a registry of, whose tokens die with
 * it: registered by an admin (`ocl_…`), registered by itself (RFC 7591, `dcl_…`), or described by its
 * metadata document (an `https://` URL). Others (an API key acting as client, a SAT's
 * `sat:…`, the console's built-in client) live and die with their own credential.
 */
export function isRegisteredClientId(clientId: string): boolean {
  return clientId.startsWith('ocl_') || clientId.startsWith('dcl_') || clientId.startsWith('https://');
}

/**
 * The root credential of a token: its `root` claim, else (tokens minted before
 * the claim) what its client_id says (`key_…`, `sat:api_key:key_…`), else itself.
 */
export function rootOf(claims: Pick<AccessTokenClaims, 'root' | 'client_id' | 'jti'>): string {
  if (claims.root) return claims.root;
  const m = LEGACY_KEY_CLIENT.exec(claims.client_id);
  return m ? `api_key:${m[1]}` : `token:${claims.jti}`;
}

/** Facts of a judgement without a request (introspection): the bindings are reported, not judged. */
export interface NoRequestFacts {
  now: number;
}

async function verified(token: string, now: number, config: TokenJudgeConfig<TokenSubject>): Promise<AccessTokenClaims> {
  const hit = config.cache?.get(token);
  if (hit) {
    if (hit.exp * 1000 <= now) {
      config.cache!.delete(token);
      throw new TokenError('expired', 'token expired');
    }
    // The accepted issuers can narrow (a group retires an `--oauth-issuer` URL): checked on every hit.
    if (!issuerAccepted(hit.iss, config.issuer)) {
      config.cache!.delete(token);
      throw new TokenError('bad_issuer', 'unexpected issuer');
    }
    return hit;
  }
  const claims = await verifyAccessToken(token, { keys: config.keys, issuer: config.issuer, audience: config.audience, now });
  config.cache?.set(token, claims);
  return claims;
}

async function judge<S extends TokenSubject>(
  token: string,
  facts: TokenRequestFacts | NoRequestFacts,
  config: TokenJudgeConfig<S>,
): Promise<TokenVerdict<S>> {
  const claims = await verified(token, facts.now, config as TokenJudgeConfig<TokenSubject>);
  if (await config.isRevoked(claims.jti)) throw new TokenError('revoked', 'token revoked');

  if ('method' in facts) {
    let dpopJkt: string | null = null;
    if (claims.cnf?.jkt !== undefined) {
      if (facts.scheme !== 'dpop') throw new TokenError('dpop_required', 'a DPoP-bound token is presented with the DPoP scheme');
      if (facts.dpop === null) throw new TokenError('dpop_required', 'a DPoP-bound token needs a DPoP proof');
      let ath = config.cache?.ath(token);
      if (ath === undefined) {
        ath = await accessTokenHash(token);
        config.cache?.setAth(token, ath);
      }
      const proof = await verifyDpopProof(facts.dpop, {
        htm: facts.method,
        htu: facts.uri,
        now: facts.now,
        replay: config.replay,
        accessToken: token,
        accessTokenHash: ath,
        ...(config.dpopWindow ? { window: config.dpopWindow } : {}),
        ...(config.dpopKeys ? { keys: config.dpopKeys } : {}),
      });
      dpopJkt = proof.jkt;
    } else if (facts.scheme === 'dpop') {
      throw new TokenError('dpop_invalid', 'the DPoP scheme needs a DPoP-bound token');
    }
    const certTp = claims.cnf?.['x5t#S256'] !== undefined ? await facts.certThumbprint() : null;
    checkConfirmation(claims.cnf, { dpopJkt, certThumbprint: certTp });
  }

  const subject = await config.subject(claims.sub);
  if (subject?.status !== 'active') throw new TokenError('revoked', 'the token subject is not active');

  const root = rootOf(claims);
  let rootKey: TokenKeyInfo | null = null;
  if (root.startsWith('api_key:')) {
    rootKey = await liveKey(root.slice('api_key:'.length), facts.now, config, 'the API key this token derives from is no longer active');
  } else if (root.startsWith('token:')) {
    const rootJti = root.slice('token:'.length);
    if (rootJti !== claims.jti && (await config.isRevoked(rootJti)))
      throw new TokenError('revoked', 'the token this token derives from was revoked');
  } else {
    throw new TokenError('malformed_token', 'unknown root credential');
  }
  if (config.clientExists && isRegisteredClientId(claims.client_id) && !(await config.clientExists(claims.client_id))) {
    throw new TokenError('revoked', 'the client this token was issued to no longer exists');
  }
  // The delegation chain: each actor and each link must still stand, and each caps the token.
  const actors = actorsOf(claims.act);
  if (actors.length > (config.maxActDepth ?? DEFAULT_MAX_ACT_DEPTH))
    throw new TokenError('delegation_too_deep', 'the delegation chain is longer than this host honours');
  const actorSubjects: S[] = [];
  for (const id of actors) {
    const a = await config.subject(id);
    if (a?.status !== 'active') throw new TokenError('revoked', 'an actor of this token is not active');
    actorSubjects.push(a);
  }
  const linkKeys: TokenKeyInfo[] = [];
  for (const link of linksOf(claims.links)) {
    if (link.startsWith('token:')) {
      if (await config.isRevoked(link.slice('token:'.length)))
        throw new TokenError('revoked', 'a token this token derives from was revoked');
    } else if (link.startsWith('api_key:')) {
      linkKeys.push(
        await liveKey(link.slice('api_key:'.length), facts.now, config, 'an API key this token derives from is no longer active'),
      );
    } else if (config.clientExists && !(await config.clientExists(link.slice('client:'.length)))) {
      throw new TokenError('revoked', 'a client this token derives from no longer exists');
    }
  }
  const scopes = claims.scope.split(' ').filter(Boolean);
  // Never more than the root key holds now (a key-rooted token is capped by its root at every use), nor
  // more than any actor or linked key of its chain holds now.
  let effective = intersectSelectors(subject.permissions, scopes);
  for (const k of [rootKey, ...linkKeys]) if (k?.permissions !== undefined) effective = intersectSelectors(effective, k.permissions);
  for (const a of actorSubjects) effective = intersectSelectors(effective, a.permissions);
  return {
    ok: true,
    claims,
    subject,
    actorSubjects,
    scopes,
    effective,
    credential: {
      type: claims.sat ? 'sat' : 'oauth',
      id: claims.jti,
      root,
      clientId: claims.client_id,
      rateLimitRpm: rootKey?.rate_limit_rpm ?? null,
      rootKey,
      actors,
      linkKeys,
    },
  };
}

/** The key `keyId` as the host knows it when it is active, unexpired and its owner active; else `revoked`. */
async function liveKey(keyId: string, now: number, config: Pick<TokenJudgeConfig, 'apiKey'>, why: string): Promise<TokenKeyInfo> {
  const k = KEY_ID.test(keyId) ? await config.apiKey(keyId) : null;
  if (
    k?.status !== 'active' ||
    (k.expires_at !== null && k.expires_at <= now) ||
    (k.owner_status !== undefined && k.owner_status !== 'active')
  ) {
    throw new TokenError('revoked', why);
  }
  return k;
}

/**
 * Judges a presented access token for one request: the verdict with the
 * effective authority, or the coded refusal. Anything that is not a token
 * refusal (a lookup or the replay cache failing) is thrown: the host fails
 * closed. Without request facts (introspection), everything but the
 * bindings is judged: the same verdict the bearer path would give.
 */
export async function judgeAccessToken<S extends TokenSubject>(
  token: string,
  facts: TokenRequestFacts | NoRequestFacts,
  config: TokenJudgeConfig<S>,
): Promise<TokenVerdict<S>> {
  try {
    return await judge(token, facts, config);
  } catch (e) {
    if (isTokenError(e)) return { ok: false, code: e.code, message: e.message };
    throw e;
  }
}
