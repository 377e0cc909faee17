/**
 * DPoP proof verification (RFC 9449 §4.3), each check on its own code:
 * typ `dpop+jwt`; asymmetric alg from the allow-list; embedded public JWK
 * (private or symmetric keys refused); valid signature; `htm` and `htu`
 * equal to the request's method and URI (query and fragment ignored; the
 * verifier derives the URI by its own rule, never from X-Forwarded-*: the cell
 * from its configured public URL, the edge from the request's own scheme, Host
 * and route);
 * `iat` within the freshness window; `jti` unseen (replay cache); `ath` equal
 * to the hash of the presented access token when there is one.
 */
import { calculateJwkThumbprint, decodeProtectedHeader, EmbeddedJWK, jwtVerify, type JWSAlgorithm, type JWTVerifyGetKey } from 'jose';
import { accessTokenHash } from './ath.ts';
import { TokenError } from './errors.ts';
import type { ReplayCache } from './replay.ts';

/** Proof algorithms accepted and advertised (`Ed25519` is RFC 9864's name for EdDSA over Ed25519). */
export const DPOP_ALGS: readonly JWSAlgorithm[] = ['EdDSA', 'Ed25519', 'ES256', 'ES384', 'RS256'];

export interface DpopWindow {
  /** How old a proof's iat may be, seconds. */
  pastSeconds: number;
  /** How far in the future a proof's iat may be, seconds. */
  futureSeconds: number;
}

/** 60 s in the past, 5 s in the future. */
export const DEFAULT_DPOP_WINDOW: DpopWindow = { pastSeconds: 60, futureSeconds: 5 };

type ProofKey = Awaited<ReturnType<typeof EmbeddedJWK>>;

/**
 * The public keys of proofs already verified, imported once, with their
 * thumbprints: a client signs every proof with the same key, and importing
 * it and hashing it again on each request cost as much as the signature
 * check. Keyed by the proof's alg and its embedded JWK exactly as sent; an
 * entry is added only after a proof signed with that key verified.
 * Bounded (emptied when full). One per verifier, never shared between hosts.
 */
export class DpopKeyCache {
  readonly #map = new Map<string, { key: ProofKey; jkt: string }>();
  constructor(private readonly max = 10_000) {}
  get(id: string): { key: ProofKey; jkt: string } | undefined {
    return this.#map.get(id);
  }
  set(id: string, entry: { key: ProofKey; jkt: string }): void {
    if (this.#map.size >= this.max) this.#map.clear();
    this.#map.set(id, entry);
  }
}

export interface VerifyDpopOptions {
  htm: string;
  /** The expected request URI (scheme, host, path), derived by the verifier (see the module header). */
  htu: string;
  now: number;
  replay: ReplayCache;
  window?: DpopWindow;
  /** When present, the proof must carry `ath` for this token. */
  accessToken?: string;
  /** Keys of earlier proofs (see DpopKeyCache); without it each proof's key is imported and hashed anew. */
  keys?: DpopKeyCache;
}

export interface VerifiedDpop {
  /** RFC 7638 SHA-256 thumbprint of the proof's public key. */
  jkt: string;
  jti: string;
  iat: number;
}

/** Normalises a URI for htu comparison: scheme, host (lowercase), port and path; no query or fragment. */
export function normalizeHtu(uri: string): string | null {
  try {
    const u = new URL(uri);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return null;
  }
}

export async function verifyDpopProof(proof: string, opts: VerifyDpopOptions): Promise<VerifiedDpop> {
  const window = opts.window ?? DEFAULT_DPOP_WINDOW;
  if (proof.length > 8192) throw new TokenError('dpop_invalid', 'proof too large');
  let header;
  try {
    header = decodeProtectedHeader(proof);
  } catch {
    throw new TokenError('dpop_invalid', 'unreadable proof header');
  }
  if (header.typ !== 'dpop+jwt') throw new TokenError('dpop_invalid', 'proof typ must be dpop+jwt');
  if (typeof header.alg !== 'string' || !DPOP_ALGS.includes(header.alg)) throw new TokenError('dpop_bad_alg', 'proof alg not accepted');
  const jwk = header.jwk as Record<string, unknown> | undefined;
  if (!jwk || typeof jwk !== 'object') throw new TokenError('dpop_bad_key', 'proof has no embedded jwk');
  if (jwk['kty'] === 'oct' || 'd' in jwk || 'p' in jwk || 'q' in jwk || 'k' in jwk) {
    throw new TokenError('dpop_bad_key', 'embedded jwk must be a public asymmetric key');
  }
  const keyId = opts.keys ? `${header.alg}:${JSON.stringify(jwk)}` : '';
  const known = opts.keys?.get(keyId);
  let imported: ProofKey | undefined;
  const embedded: JWTVerifyGetKey = async (h, t) => {
    imported = await EmbeddedJWK(h, t);
    return imported;
  };
  let payload: Record<string, unknown>;
  try {
    const options = { typ: 'dpop+jwt', algorithms: [...DPOP_ALGS], currentDate: new Date(opts.now) };
    const r = known ? await jwtVerify(proof, known.key, options) : await jwtVerify(proof, embedded, options);
    payload = r.payload as Record<string, unknown>;
  } catch {
    throw new TokenError('dpop_invalid', 'proof signature or structure invalid');
  }
  const { htm, htu, iat, jti } = payload;
  if (typeof jti !== 'string' || jti.length < 8 || jti.length > 256) throw new TokenError('dpop_invalid', 'proof jti missing');
  if (typeof htm !== 'string' || htm !== opts.htm.toUpperCase())
    throw new TokenError('dpop_htm_mismatch', 'proof htm does not match the request method');
  const want = normalizeHtu(opts.htu);
  if (typeof htu !== 'string' || want === null || normalizeHtu(htu) !== want)
    throw new TokenError('dpop_htu_mismatch', 'proof htu does not match the request URI');
  if (typeof iat !== 'number' || !Number.isFinite(iat)) throw new TokenError('dpop_stale', 'proof iat missing');
  const nowS = opts.now / 1000;
  if (iat < nowS - window.pastSeconds || iat > nowS + window.futureSeconds)
    throw new TokenError('dpop_stale', 'proof iat outside the freshness window');
  if (opts.accessToken !== undefined) {
    if (typeof payload['ath'] !== 'string' || payload['ath'] !== (await accessTokenHash(opts.accessToken))) {
      throw new TokenError('dpop_ath_mismatch', 'proof ath does not bind the access token');
    }
  }
  let jkt = known?.jkt;
  if (jkt === undefined) {
    jkt = await calculateJwkThumbprint(jwk as Parameters<typeof calculateJwkThumbprint>[0], 'sha256');
    if (opts.keys && imported) opts.keys.set(keyId, { key: imported, jkt });
  }
  // The proof can only pass the iat check until iat + pastSeconds: remember it that long.
  const expiresAt = (iat + window.pastSeconds) * 1000 + 1000;
  if (!(await opts.replay.remember(`${jkt}:${jti}`, expiresAt, opts.now, iat * 1000)))
    throw new TokenError('dpop_replay', 'proof jti already used');
  return { jkt, jti, iat };
}
