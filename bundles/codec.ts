/**
 * Private helpers of the bundle formats, over the shared core pieces:
 * RFC 8785 canonical JSON and base64url (core/canonical.ts), Ed25519
 * (core/crypto/ed25519.ts, Web Crypto). SHA-256 of large payloads uses Web
 * Crypto's digest (native) rather than the pure-JS hash. Pure: no node: imports.
 */
import { b64url, canonicalJson, fromB64url as strictFromB64url, utf8 } from '../core/canonical.ts';
import { generateEd25519 as coreGenerate, signEd25519, verifyEd25519 as coreVerify } from '../core/crypto/ed25519.ts';

export { b64url, canonicalJson, utf8 };

const dec = new TextDecoder('utf-8', { fatal: true });
export const fromUtf8 = (b: Uint8Array): string => dec.decode(b);

/** Decodes unpadded base64url; null when the text is not base64url. */
export function fromB64url(s: string): Uint8Array | null {
  try {
    return strictFromB64url(s);
  } catch {
    return null; // malformed: the caller refuses with its own reason
  }
}

export function hex(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += b.toString(16).padStart(2, '0');
  return s;
}

/** Lower-case hex SHA-256 via Web Crypto (native; fast on multi-megabyte payloads). */
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

/** Ed25519 verification (RFC 8032); false on any malformed input. */
export function verifyEd25519(jwk: JsonWebKey, signature: Uint8Array, message: Uint8Array): Promise<boolean> {
  return coreVerify(jwk, message, signature);
}

/** A signer over an Ed25519 private JWK (devices, publishers, tests). */
export function signerFromJwk(kid: string, privateJwk: JsonWebKey): Signer {
  return { kid, sign: (bytes) => signEd25519(privateJwk, bytes) };
}

/** A fresh Ed25519 key pair as JWKs, kid = RFC 7638 thumbprint. */
export function generateEd25519(): Promise<{ kid: string; publicJwk: JsonWebKey; privateJwk: JsonWebKey }> {
  return coreGenerate();
}
