/**
 * Ed25519 signing and verification (RFC 8032) behind one small module.
 *
 * Two paths, same answers:
 * - async, WebCrypto (`crypto.subtle`, native in Node, browsers and workers):
 *   the hot path, ~15x faster than pure JS for verification. Imported
 *   CryptoKeys are cached per JWK.
 * - sync, @noble/ed25519 with @noble/hashes' SHA-512: for code that must stay
 *   synchronous or pure.
 *
 * Both paths apply ONE verification rule, so a signature never verifies on
 * one and fails on the other (checked against the ed25519-speccheck edge
 * cases): RFC 8032 section 5.1.7 with the cofactorless equation, as OpenSSL
 * (Node's WebCrypto) does it: S < L, and encode([S]B - [k]A) must equal the
 * R bytes exactly (so a non-canonical R never verifies). On top of that, a
 * public key must be a canonical encoding (y < p, no "negative zero" x) of a
 * point that is not of small order; such keys are refused on both paths
 * (decoded once per key and cached).
 *
 * Keys travel as JWKs (RFC 8037: `{ kty: 'OKP', crv: 'Ed25519', x, d? }`) and
 * are named by their RFC 7638 thumbprint. Verification never throws on bad
 * input (a malformed key or signature is simply `false`); signing with a
 * malformed private key is a programming mistake and throws `TypeError`.
 */
import * as ed from '@noble/ed25519';
import { sha256, sha512 } from '@noble/hashes/sha2.js';
import { b64url, canonicalJson, fromB64url, utf8 } from '../canonical.ts';

ed.hashes.sha512 = sha512;

const ALG = { name: 'Ed25519' } as const;

/** A freshly generated Ed25519 key pair as JWKs, named by the public key's RFC 7638 thumbprint. */
export interface Ed25519KeyPair {
  privateJwk: JsonWebKey;
  publicJwk: JsonWebKey;
  kid: string;
}

function b64field(jwk: JsonWebKey, name: 'x' | 'd'): Uint8Array | null {
  const v = jwk[name];
  if (typeof v !== 'string') return null;
  try {
    const bytes = fromB64url(v);
    return bytes.length === 32 ? bytes : null;
  } catch {
    return null; // malformed base64url: the caller decides (false or TypeError)
  }
}

function isOkpEd25519(jwk: unknown): jwk is JsonWebKey {
  return typeof jwk === 'object' && jwk !== null && (jwk as JsonWebKey).kty === 'OKP' && (jwk as JsonWebKey).crv === 'Ed25519';
}

/** Minimal JWKs (no alg/key_ops/ext/kid), so importKey never trips on metadata. */
function minimalPublic(jwk: JsonWebKey): JsonWebKey {
  return { kty: 'OKP', crv: 'Ed25519', x: jwk.x as string };
}

const CACHE_LIMIT = 4096;
const publicKeys = new Map<string, Promise<CryptoKey>>();
const privateKeys = new Map<string, Promise<CryptoKey>>();
/** Private JWKs whose x was checked against d on the sync path. */
const checkedPairs = new Set<string>();

function cached(map: Map<string, Promise<CryptoKey>>, id: string, load: () => Promise<CryptoKey>): Promise<CryptoKey> {
  let p = map.get(id);
  if (p === undefined) {
    if (map.size >= CACHE_LIMIT) map.clear();
    p = load();
    map.set(id, p);
    p.catch(() => map.delete(id));
  }
  return p;
}

/** Generates an Ed25519 key pair with WebCrypto. */
export async function generateEd25519(): Promise<Ed25519KeyPair> {
  const pair = (await crypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as CryptoKeyPair;
  const priv = await crypto.subtle.exportKey('jwk', pair.privateKey);
  const publicJwk: JsonWebKey = { kty: 'OKP', crv: 'Ed25519', x: priv.x as string };
  const privateJwk: JsonWebKey = { kty: 'OKP', crv: 'Ed25519', x: priv.x as string, d: priv.d as string };
  return { privateJwk, publicJwk, kid: jwkThumbprint(publicJwk) };
}

function checkPrivate(privateJwk: JsonWebKey): { d: Uint8Array; x: Uint8Array } {
  const d = isOkpEd25519(privateJwk) ? b64field(privateJwk, 'd') : null;
  const x = isOkpEd25519(privateJwk) ? b64field(privateJwk, 'x') : null;
  if (d === null || x === null) throw new TypeError('signEd25519: not an Ed25519 private JWK (kty OKP, crv Ed25519, 32-byte x and d)');
  return { d, x };
}

/** Signs `data` with an Ed25519 private JWK (WebCrypto). Returns the 64-byte signature. */
export async function signEd25519(privateJwk: JsonWebKey, data: Uint8Array): Promise<Uint8Array> {
  checkPrivate(privateJwk);
  let key: CryptoKey;
  try {
    key = await cached(privateKeys, `${privateJwk.d as string}.${privateJwk.x as string}`, () =>
      crypto.subtle.importKey('jwk', { kty: 'OKP', crv: 'Ed25519', x: privateJwk.x as string, d: privateJwk.d as string }, ALG, false, [
        'sign',
      ]),
    );
  } catch {
    // WebCrypto's DataError (e.g. x is not d's public key) becomes the same TypeError as the sync path
    throw new TypeError('signEd25519: private JWK refused (x does not match d?)');
  }
  return new Uint8Array(await crypto.subtle.sign(ALG, key, data as Uint8Array<ArrayBuffer>));
}

/** Verifies an Ed25519 signature with WebCrypto. Any malformed input gives `false`, never an exception. */
export async function verifyEd25519(publicJwk: JsonWebKey, data: Uint8Array, sig: Uint8Array): Promise<boolean> {
  try {
    if (!isOkpEd25519(publicJwk) || b64field(publicJwk, 'x') === null) return false;
    if (!(sig instanceof Uint8Array) || sig.length !== 64 || !(data instanceof Uint8Array)) return false;
    if (strictPublicPoint(publicJwk.x as string) === null) return false;
    if (smallOrderR(sig)) return false;
    const key = await cached(publicKeys, publicJwk.x as string, () =>
      crypto.subtle.importKey('jwk', minimalPublic(publicJwk), ALG, false, ['verify']),
    );
    return await crypto.subtle.verify(ALG, key, sig as Uint8Array<ArrayBuffer>, data as Uint8Array<ArrayBuffer>);
  } catch {
    return false; // a key WebCrypto refuses (e.g. not a curve point) verifies nothing
  }
}

/** Signs `data` with an Ed25519 private JWK, synchronously (@noble/ed25519). */
export function signEd25519Sync(privateJwk: JsonWebKey, data: Uint8Array): Uint8Array {
  const { d, x } = checkPrivate(privateJwk);
  const id = `${privateJwk.d as string}.${privateJwk.x as string}`;
  if (!checkedPairs.has(id)) {
    const pub = ed.getPublicKey(d);
    if (pub.length !== x.length || pub.some((b, i) => b !== x[i])) {
      throw new TypeError('signEd25519Sync: private JWK refused (x does not match d)');
    }
    if (checkedPairs.size >= CACHE_LIMIT) checkedPairs.clear();
    checkedPairs.add(id);
  }
  return ed.sign(data, d);
}

/** Order of the Ed25519 base point (RFC 8032 section 5.1). */
const L = 2n ** 252n + 27742317777372353535851937790883648493n;

function littleEndian(bytes: Uint8Array): bigint {
  let n = 0n;
  for (let i = bytes.length - 1; i >= 0; i--) n = (n << 8n) | BigInt(bytes[i]!);
  return n;
}

/**
 * Canonical encodings of the eight points of small order (the 8-torsion),
 * computed once from an order-8 point. A signature whose R is one of them is
 * refused on both paths, as libsodium does: OpenSSL's answer on such
 * signatures changed between releases (Node 20 accepts ed25519-speccheck case
 * 2, Node 24 refuses it), and the cell and the edge must agree on every runtime.
 */
let smallOrderEncodings: Uint8Array[] | undefined;

function smallOrderR(sig: Uint8Array): boolean {
  if (!smallOrderEncodings) {
    const t = ed.Point.fromBytes(fromHexString('c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a'), false);
    const out: Uint8Array[] = [];
    let p = ed.Point.ZERO;
    for (let k = 0; k < 8; k++) {
      out.push(p.toBytes());
      p = p.add(t);
    }
    smallOrderEncodings = out;
  }
  for (const e of smallOrderEncodings) {
    let diff = 0;
    for (let i = 0; i < 32; i++) diff |= e[i]! ^ sig[i]!;
    if (diff === 0) return true;
  }
  return false;
}

function fromHexString(h: string): Uint8Array {
  return Uint8Array.from({ length: h.length / 2 }, (_, i) => parseInt(h.slice(2 * i, 2 * i + 2), 16));
}

const points = new Map<string, ed.Point | null>();

/**
 * The public key point, or null when `x` is not the canonical encoding of a
 * curve point or the point has small order. Cached per key (decoding costs a
 * square root).
 */
function strictPublicPoint(x: string): ed.Point | null {
  let p = points.get(x);
  if (p === undefined) {
    p = null;
    try {
      const bytes = fromB64url(x);
      if (bytes.length === 32) {
        const point = ed.Point.fromBytes(bytes, false); // strict: y < p, no negative zero x
        if (!point.isSmallOrder()) p = point;
      }
    } catch {
      p = null; // not a point: verifies nothing
    }
    if (points.size >= CACHE_LIMIT) points.clear();
    points.set(x, p);
  }
  return p;
}

/** Verifies an Ed25519 signature synchronously (pure JS, same rule as the WebCrypto path). Never throws. */
export function verifyEd25519Sync(publicJwk: JsonWebKey, data: Uint8Array, sig: Uint8Array): boolean {
  try {
    if (!isOkpEd25519(publicJwk) || typeof publicJwk.x !== 'string') return false;
    if (!(sig instanceof Uint8Array) || sig.length !== 64 || !(data instanceof Uint8Array)) return false;
    const A = strictPublicPoint(publicJwk.x);
    if (A === null) return false;
    if (smallOrderR(sig)) return false;
    const r = sig.subarray(0, 32);
    const s = littleEndian(sig.subarray(32, 64));
    if (s >= L) return false;
    const pub = A.toBytes();
    const h = new Uint8Array(64 + data.length);
    h.set(r, 0);
    h.set(pub, 32);
    h.set(data, 64);
    const k = littleEndian(sha512(h)) % L;
    // cofactorless: R' = [S]B - [k]A, and its encoding must equal R exactly
    const check = ed.Point.BASE.multiply(s, false).subtract(A.multiply(k, false)).toBytes();
    let diff = 0;
    for (let i = 0; i < 32; i++) diff |= check[i]! ^ r[i]!;
    return diff === 0;
  } catch {
    return false; // any arithmetic refusal from noble: not a valid signature
  }
}

/** Public JWK of an Ed25519 private JWK (drops `d`). */
export function publicJwkOf(privateJwk: JsonWebKey): JsonWebKey {
  if (!isOkpEd25519(privateJwk) || typeof privateJwk.x !== 'string') throw new TypeError('publicJwkOf: not an Ed25519 JWK');
  return minimalPublic(privateJwk);
}

const THUMBPRINT_MEMBERS: Record<string, readonly string[]> = {
  OKP: ['crv', 'kty', 'x'],
  EC: ['crv', 'kty', 'x', 'y'],
  RSA: ['e', 'kty', 'n'],
};

/**
 * RFC 7638 JWK thumbprint (SHA-256, base64url) over the required members of
 * an OKP (RFC 8037), EC or RSA key.
 * @throws TypeError for another key type or a missing member.
 */
export function jwkThumbprint(jwk: JsonWebKey): string {
  const kty = (jwk as { kty?: unknown }).kty;
  const members = typeof kty === 'string' ? THUMBPRINT_MEMBERS[kty] : undefined;
  if (members === undefined) throw new TypeError(`jwkThumbprint: unsupported kty ${String(kty)}`);
  const picked: Record<string, string> = {};
  for (const m of members) {
    const v = (jwk as Record<string, unknown>)[m];
    if (typeof v !== 'string' || v.length === 0) throw new TypeError(`jwkThumbprint: missing member ${m}`);
    picked[m] = v;
  }
  // Members are ASCII strings, so RFC 8785 output equals RFC 7638's required form.
  return b64url(sha256(utf8(canonicalJson(picked))));
}
