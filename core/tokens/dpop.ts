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
import {
  base64url,
  calculateJwkThumbprint,
  decodeProtectedHeader,
  EmbeddedJWK,
  jwtVerify,
  type JWSAlgorithm,
  type JWTVerifyGetKey,
} from 'jose';
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

type Signing = { name: string; hash?: string };

/** Web Crypto's parameters for verifying a signature of each accepted proof alg (as jose verifies them). */
const SIGNING: Record<string, Signing> = {
  EdDSA: { name: 'Ed25519' },
  Ed25519: { name: 'Ed25519' },
  ES256: { name: 'ECDSA', hash: 'SHA-256' },
  ES384: { name: 'ECDSA', hash: 'SHA-384' },
  RS256: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
};

/**
 * A host's own check of the signatures of one proof key, e.g. node:crypto's
 * (runtime/proof-signature.ts), cheaper than Web Crypto's promise and job:
 * given the alg and the embedded public JWK of a proof that verified, a check
 * of a signature (its base64url text as sent) over a signing input (ASCII
 * text); null when the host does not take that key (Web Crypto checks it).
 * It must accept exactly the signatures Web Crypto accepts for that alg and
 * key, and the texts jose's base64url decoding accepts.
 */
export type ProofSignatureCheck = (alg: string, jwk: Record<string, unknown>) => ((input: string, signature: string) => boolean) | null;

/** A proof key already verified once: the imported key, its thumbprint and how its signatures are checked. */
interface KnownProofKey {
  key: ProofKey;
  jkt: string;
  signing: Signing;
  /** The host's own check of this key's signatures, when it gave one. */
  check: ((input: string, signature: string) => boolean) | null;
}

/**
 * The public keys of proofs already verified, imported once, with their
 * thumbprints: a client signs every proof with the same key, and importing
 * it and hashing it again on each request cost as much as the signature
 * check. Keyed by the proof's protected header exactly as sent (its
 * base64url segment: alg, typ and the embedded JWK): a proof whose header is
 * byte for byte one that passed every header check skips decoding and
 * judging it again, and its signature and claims are checked directly (see
 * `verifyKnown`), with the host's `native` check when it has one. An entry
 * is added only after a proof with that header verified. Bounded (emptied
 * when full). One per verifier, never shared between hosts.
 */
export class DpopKeyCache {
  readonly #map = new Map<string, KnownProofKey>();
  readonly #max: number;
  /** The host's own signature check (see ProofSignatureCheck), if any. */
  readonly native: ProofSignatureCheck | undefined;
  constructor(opts: { max?: number; native?: ProofSignatureCheck } = {}) {
    this.#max = opts.max ?? 10_000;
    this.native = opts.native;
  }
  get(header: string): KnownProofKey | undefined {
    return this.#map.get(header);
  }
  set(header: string, entry: KnownProofKey): void {
    if (this.#map.size >= this.#max) this.#map.clear();
    this.#map.set(header, entry);
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
  /** accessTokenHash(accessToken) when the caller already has it (the judge keeps it with the verified token). */
  accessTokenHash?: string;
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

const B64URL = /^[A-Za-z0-9_-]*$/;
/** The longest protected header kept in a key cache (an RSA-4096 key's is about 1,100 characters): bounds its memory. */
const MAX_CACHED_HEADER = 2048;
const utf8 = new TextDecoder('utf-8', { fatal: true });
const ascii = new TextEncoder();

/**
 * The payload of a proof whose protected header is `known`'s, after what jose's
 * jwtVerify checks past the header: the signature over the signing input, a
 * payload that is a JSON object, and `iat`, `nbf` and `exp` numbers when
 * present, `nbf` not after and `exp` after the current second. Null when
 * the proof is not in the plain form this path reads (three segments of
 * unpadded base64url): the caller then takes jose's path, which judges it as
 * it always did. Throws as jose would (the caller turns it into dpop_invalid).
 */
async function verifyKnown(proof: string, headerEnd: number, known: KnownProofKey, now: number): Promise<Record<string, unknown> | null> {
  const payloadEnd = proof.indexOf('.', headerEnd + 1);
  if (payloadEnd < 0 || proof.indexOf('.', payloadEnd + 1) >= 0) return null;
  const payloadPart = proof.slice(headerEnd + 1, payloadEnd);
  const signaturePart = proof.slice(payloadEnd + 1);
  if (!B64URL.test(payloadPart) || !B64URL.test(signaturePart)) return null;
  if (known.check) {
    if (!known.check(proof.slice(0, payloadEnd), signaturePart)) throw new Error('signature');
  } else {
    const signature = base64url.decode(signaturePart);
    const input = ascii.encode(proof.slice(0, payloadEnd));
    if (!(await crypto.subtle.verify(known.signing, known.key, signature as Uint8Array<ArrayBuffer>, input))) throw new Error('signature');
  }
  const claims = JSON.parse(utf8.decode(base64url.decode(payloadPart))) as unknown;
  if (typeof claims !== 'object' || claims === null || Array.isArray(claims)) throw new Error('claims');
  const c = claims as Record<string, unknown>;
  const nowS = Math.floor(now / 1000);
  for (const claim of ['iat', 'nbf', 'exp']) if (c[claim] !== undefined && typeof c[claim] !== 'number') throw new Error(claim);
  if (typeof c['nbf'] === 'number' && c['nbf'] > nowS) throw new Error('nbf');
  if (typeof c['exp'] === 'number' && c['exp'] <= nowS) throw new Error('exp');
  return c;
}

export async function verifyDpopProof(proof: string, opts: VerifyDpopOptions): Promise<VerifiedDpop> {
  const window = opts.window ?? DEFAULT_DPOP_WINDOW;
  if (proof.length > 8192) throw new TokenError('dpop_invalid', 'proof too large');
  const headerEnd = proof.indexOf('.');
  const headerPart = headerEnd < 0 ? proof : proof.slice(0, headerEnd);
  const known = opts.keys?.get(headerPart);
  let payload: Record<string, unknown> | null = null;
  if (known) {
    try {
      payload = await verifyKnown(proof, headerEnd, known, opts.now);
    } catch {
      throw new TokenError('dpop_invalid', 'proof signature or structure invalid');
    }
  }
  let jwk: Record<string, unknown> | undefined;
  let signing: Signing | undefined;
  let alg: string | undefined;
  let imported: ProofKey | undefined;
  if (payload === null) {
    let header;
    try {
      header = decodeProtectedHeader(proof);
    } catch {
      throw new TokenError('dpop_invalid', 'unreadable proof header');
    }
    if (header.typ !== 'dpop+jwt') throw new TokenError('dpop_invalid', 'proof typ must be dpop+jwt');
    if (typeof header.alg !== 'string' || !DPOP_ALGS.includes(header.alg)) throw new TokenError('dpop_bad_alg', 'proof alg not accepted');
    jwk = header.jwk as Record<string, unknown> | undefined;
    if (!jwk || typeof jwk !== 'object') throw new TokenError('dpop_bad_key', 'proof has no embedded jwk');
    if (jwk['kty'] === 'oct' || 'd' in jwk || 'p' in jwk || 'q' in jwk || 'k' in jwk) {
      throw new TokenError('dpop_bad_key', 'embedded jwk must be a public asymmetric key');
    }
    alg = header.alg;
    signing = SIGNING[alg];
    const embedded: JWTVerifyGetKey = async (h, t) => {
      imported = await EmbeddedJWK(h, t);
      return imported;
    };
    try {
      const options = { typ: 'dpop+jwt', algorithms: [...DPOP_ALGS], currentDate: new Date(opts.now) };
      const r = known ? await jwtVerify(proof, known.key, options) : await jwtVerify(proof, embedded, options);
      payload = r.payload as Record<string, unknown>;
    } catch {
      throw new TokenError('dpop_invalid', 'proof signature or structure invalid');
    }
  }
  const { htm, htu, iat, jti } = payload;
  if (typeof jti !== 'string' || jti.length < 8 || jti.length > 256) throw new TokenError('dpop_invalid', 'proof jti missing');
  if (typeof htm !== 'string' || htm !== opts.htm.toUpperCase())
    throw new TokenError('dpop_htm_mismatch', 'proof htm does not match the request method');
  const want = normalizeHtu(opts.htu);
  // A normalised URI normalises to itself: a proof whose htu is exactly the expected one needs no parse.
  if (typeof htu !== 'string' || want === null || (htu !== want && normalizeHtu(htu) !== want))
    throw new TokenError('dpop_htu_mismatch', 'proof htu does not match the request URI');
  if (typeof iat !== 'number' || !Number.isFinite(iat)) throw new TokenError('dpop_stale', 'proof iat missing');
  const nowS = opts.now / 1000;
  if (iat < nowS - window.pastSeconds || iat > nowS + window.futureSeconds)
    throw new TokenError('dpop_stale', 'proof iat outside the freshness window');
  if (opts.accessToken !== undefined) {
    const ath = opts.accessTokenHash ?? (await accessTokenHash(opts.accessToken));
    if (typeof payload['ath'] !== 'string' || payload['ath'] !== ath) {
      throw new TokenError('dpop_ath_mismatch', 'proof ath does not bind the access token');
    }
  }
  let jkt = known?.jkt;
  if (jkt === undefined) {
    jkt = await calculateJwkThumbprint(jwk as Parameters<typeof calculateJwkThumbprint>[0], 'sha256');
    if (opts.keys && imported && signing && headerPart.length <= MAX_CACHED_HEADER) {
      const check = opts.keys.native?.(alg!, jwk!) ?? null;
      opts.keys.set(headerPart, { key: imported, jkt, signing, check });
    }
  }
  // The proof can only pass the iat check until iat + pastSeconds: remember it that long.
  const expiresAt = (iat + window.pastSeconds) * 1000 + 1000;
  if (!(await opts.replay.remember(`${jkt}:${jti}`, expiresAt, opts.now, iat * 1000)))
    throw new TokenError('dpop_replay', 'proof jti already used');
  return { jkt, jti, iat };
}
