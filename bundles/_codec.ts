/**
 * Private helpers of the bundle formats: UTF-8, base64url, SHA-256, RFC 8785
 * canonical JSON, and Ed25519 over Web Crypto (native in Node, browsers and
 * workers). Pure: no node: imports.
 */
import canonicalize from 'canonicalize';

const enc = new TextEncoder();
const dec = new TextDecoder('utf-8', { fatal: true });

export const utf8 = (s: string): Uint8Array => enc.encode(s);
export const fromUtf8 = (b: Uint8Array): string => dec.decode(b);

/** RFC 8785 canonical JSON text of a JSON value. */
export function canonicalJson(value: unknown): string {
  const s = canonicalize(value);
  if (typeof s !== 'string') throw new TypeError('value has no canonical JSON form');
  return s;
}

export function b64url(bytes: Uint8Array): string {
  let bin = '';
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** Decodes base64url; null when the text is not base64url. */
export function fromB64url(s: string): Uint8Array | null {
  if (!/^[A-Za-z0-9_-]*$/.test(s) || s.length % 4 === 1) return null;
  const bin = atob(s.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (s.length % 4)) % 4));
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function hex(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += b.toString(16).padStart(2, '0');
  return s;
}

export async function sha256Hex(data: Uint8Array | string): Promise<string> {
  const bytes = typeof data === 'string' ? utf8(data) : data;
  return hex(new Uint8Array(await globalThis.crypto.subtle.digest('SHA-256', bytes as Uint8Array<ArrayBuffer>)));
}

/** A public key a verifier trusts: its id and its JWK (OKP / Ed25519). */
export interface TrustedKey {
  kid: string;
  jwk: JsonWebKey;
}

/** Whatever signs bundles: the cell's identity, a device key, a model publisher. */
export interface Signer {
  kid: string;
  sign(bytes: Uint8Array): Promise<Uint8Array>;
}

const importCache = new WeakMap<JsonWebKey, Promise<CryptoKey>>();

function importEd25519Public(jwk: JsonWebKey): Promise<CryptoKey> {
  let p = importCache.get(jwk);
  if (!p) {
    if (jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519' || typeof jwk.x !== 'string') {
      return Promise.reject(new TypeError('not an Ed25519 public JWK'));
    }
    p = globalThis.crypto.subtle.importKey('jwk', { kty: 'OKP', crv: 'Ed25519', x: jwk.x }, { name: 'Ed25519' }, false, ['verify']);
    importCache.set(jwk, p);
  }
  return p;
}

/** Ed25519 verification (RFC 8032) with a public JWK; false on any malformed input. */
export async function verifyEd25519(jwk: JsonWebKey, signature: Uint8Array, message: Uint8Array): Promise<boolean> {
  try {
    const key = await importEd25519Public(jwk);
    return await globalThis.crypto.subtle.verify('Ed25519', key, signature as Uint8Array<ArrayBuffer>, message as Uint8Array<ArrayBuffer>);
  } catch {
    // A malformed key or signature is a failed verification, never an exception.
    return false;
  }
}

/** A signer over an Ed25519 private JWK (devices, publishers, tests). */
export async function signerFromJwk(kid: string, privateJwk: JsonWebKey): Promise<Signer> {
  const key = await globalThis.crypto.subtle.importKey('jwk', privateJwk, { name: 'Ed25519' }, false, ['sign']);
  return {
    kid,
    sign: async (bytes) => new Uint8Array(await globalThis.crypto.subtle.sign('Ed25519', key, bytes as Uint8Array<ArrayBuffer>)),
  };
}

/** A fresh Ed25519 key pair as JWKs, with kid = RFC 7638 thumbprint (base64url SHA-256). */
export async function generateEd25519(): Promise<{ kid: string; publicJwk: JsonWebKey; privateJwk: JsonWebKey }> {
  const pair = (await globalThis.crypto.subtle.generateKey({ name: 'Ed25519' }, true, ['sign', 'verify'])) as CryptoKeyPair;
  const pub = await globalThis.crypto.subtle.exportKey('jwk', pair.publicKey);
  const priv = await globalThis.crypto.subtle.exportKey('jwk', pair.privateKey);
  const publicJwk: JsonWebKey = { kty: 'OKP', crv: 'Ed25519', x: pub.x! };
  const privateJwk: JsonWebKey = { kty: 'OKP', crv: 'Ed25519', x: pub.x!, d: priv.d! };
  return { kid: await jwkThumbprint(publicJwk), publicJwk, privateJwk };
}

/** RFC 7638 / RFC 8037 thumbprint of an Ed25519 public JWK. */
export async function jwkThumbprint(jwk: JsonWebKey): Promise<string> {
  const digest = await globalThis.crypto.subtle.digest('SHA-256', utf8(`{"crv":"Ed25519","kty":"OKP","x":"${jwk.x}"}`) as Uint8Array<ArrayBuffer>);
  return b64url(new Uint8Array(digest));
}
