/**
 * Access tokens (RFC 9068): EdDSA-signed JWTs with `typ: at+jwt`. One
 * verification used by the cell's bearer path, introspection and the edge:
 * signature against the key set, alg allow-list (EdDSA only: `none`, HS*
 * and everything else refused), typ, iss (one issuer or a group's set), aud, exp, iat and the denylist,
 * each check with its own code. Bindings (`cnf`) are checked separately
 * (core/tokens/cnf.ts) because they need the request.
 */
import { decodeProtectedHeader, errors, jwtVerify, type JWTVerifyGetKey } from 'jose';
import { actorsOf, linksOf, mayActOf, type ActClaim } from './delegation.ts';
import { TokenError } from './errors.ts';

/** Claims of an access token issued by a cell. */
export interface AccessTokenClaims {
  iss: string;
  sub: string;
  aud: string;
  client_id: string;
  /** Space-separated permission selectors. */
  scope: string;
  iat: number;
  exp: number;
  jti: string;
  cnf?: { jkt?: string; 'x5t#S256'?: string };
  /** Present and true on scoped access tokens (SATs). */
  sat?: boolean;
  /**
   * The credential this token derives from, when it is not the token itself:
   * `api_key:<key id>` (obtained or minted with an API key) or `token:<jti>`
   * (a SAT minted with another token). Revoking or throttling the root applies to this token.
   */
  root?: string;
  /** RFC 8693 §4.1: the actor of an exchanged token (nested: earlier actors) (core/tokens/delegation.ts). */
  act?: ActClaim;
  /** RFC 8693 §4.4: who the subject lets act for it. */
  may_act?: { sub: string };
  /** Every credential an exchanged token derives from (`token:<jti>`, `api_key:<id>`, `client:<id>`): revoking one refuses it. */
  links?: string[];
}

export const ACCESS_TOKEN_TYP = 'at+jwt';
export const ACCESS_TOKEN_ALGS = ['EdDSA'] as const;

export interface VerifyAccessTokenOptions {
  /** Resolves the verification key by the token's header (e.g. jose's createLocalJWKSet). */
  keys: JWTVerifyGetKey;
  /** The accepted `iss`: one issuer, or every issuer of a group (`service://<group id>` and its declared URLs). */
  issuer: string | readonly string[];
  /** The expected `aud`, or a test of it (the authorization server accepts every audience it issues for). */
  audience: string | ((aud: string) => boolean);
  /** Current time, ms since the epoch. */
  now: number;
  /** Tolerated clock skew, seconds (default 0). */
  clockToleranceSeconds?: number;
  /** True when the jti was revoked. */
  isRevoked?: (jti: string) => boolean;
}

const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/** True when `s` looks like a compact JWS (three base64url segments). */
export function looksLikeJwt(s: string): boolean {
  return s.length < 16_384 && JWT_SHAPE.test(s);
}

/** Verifies an access token; returns its claims or throws a TokenError. */
export async function verifyAccessToken(token: string, opts: VerifyAccessTokenOptions): Promise<AccessTokenClaims> {
  if (!looksLikeJwt(token)) throw new TokenError('malformed_token', 'not a compact JWT');
  let header;
  try {
    header = decodeProtectedHeader(token);
  } catch {
    throw new TokenError('malformed_token', 'unreadable JWT header');
  }
  if (header.alg !== 'EdDSA') throw new TokenError('bad_alg', 'only EdDSA-signed access tokens are accepted');
  if (header.typ !== ACCESS_TOKEN_TYP) throw new TokenError('bad_typ', 'typ must be at+jwt');
  let payload: Record<string, unknown>;
  try {
    const r = await jwtVerify(token, opts.keys, {
      algorithms: [...ACCESS_TOKEN_ALGS],
      typ: ACCESS_TOKEN_TYP,
      currentDate: new Date(opts.now),
      clockTolerance: opts.clockToleranceSeconds ?? 0,
    });
    payload = r.payload as Record<string, unknown>;
  } catch (err) {
    throw mapJoseError(err);
  }
  const c = payload;
  for (const k of ['iss', 'sub', 'aud', 'client_id', 'scope', 'jti'] as const) {
    if (typeof c[k] !== 'string') throw new TokenError('missing_claim', `claim ${k} is missing or not a string`);
  }
  for (const k of ['iat', 'exp'] as const) {
    if (typeof c[k] !== 'number' || !Number.isFinite(c[k])) throw new TokenError('missing_claim', `claim ${k} is missing or not a number`);
  }
  if (!issuerAccepted(c['iss'] as string, opts.issuer)) throw new TokenError('bad_issuer', 'unexpected issuer');
  const audOk = typeof opts.audience === 'string' ? c['aud'] === opts.audience : opts.audience(c['aud'] as string);
  if (!audOk) throw new TokenError('bad_audience', 'unexpected audience');
  const nowS = Math.floor(opts.now / 1000);
  const tol = opts.clockToleranceSeconds ?? 0;
  if ((c['exp'] as number) <= nowS - tol) throw new TokenError('expired', 'token expired');
  if ((c['iat'] as number) > nowS + tol + 60) throw new TokenError('not_yet_valid', 'token issued in the future');
  if (c['root'] !== undefined && typeof c['root'] !== 'string') throw new TokenError('malformed_token', 'root must be a string');
  if (c['cnf'] !== undefined && (typeof c['cnf'] !== 'object' || c['cnf'] === null || Array.isArray(c['cnf']))) {
    throw new TokenError('malformed_token', 'cnf must be an object');
  }
  actorsOf(c['act']);
  linksOf(c['links']);
  mayActOf(c['may_act']);
  if (opts.isRevoked?.(c['jti'] as string)) throw new TokenError('revoked', 'token revoked');
  return c as unknown as AccessTokenClaims;
}

/** Whether `iss` is the accepted issuer or one of the accepted issuers (exact string comparison, RFC 9068 §4). */
export function issuerAccepted(iss: string, accepted: string | readonly string[]): boolean {
  return typeof accepted === 'string' ? iss === accepted : accepted.includes(iss);
}

function mapJoseError(err: unknown): TokenError {
  if (err instanceof errors.JWTExpired) return new TokenError('expired', 'token expired');
  if (err instanceof errors.JWTClaimValidationFailed) {
    return err.claim === 'nbf'
      ? new TokenError('not_yet_valid', 'token not yet valid')
      : new TokenError('missing_claim', `claim ${err.claim} failed`);
  }
  if (err instanceof errors.JOSEAlgNotAllowed) return new TokenError('bad_alg', 'algorithm not allowed');
  if (err instanceof errors.JWSSignatureVerificationFailed) return new TokenError('bad_signature', 'signature does not verify');
  if (err instanceof errors.JWKSNoMatchingKey) return new TokenError('bad_signature', 'no key in the key set matches');
  return new TokenError('malformed_token', 'token does not verify');
}
