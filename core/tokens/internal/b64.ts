/** Private helpers: base64url and SHA-256. */
import { sha256 } from '@noble/hashes/sha2.js';

const enc = new TextEncoder();

export function b64urlBytes(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/**
 * BASE64URL(SHA-256(text)). Computed in place: Web Crypto's digest is a job
 * on the thread pool and a promise round trip, several times the cost of
 * hashing a token-sized input here (it was on every DPoP-bound request).
 */
export async function sha256B64url(text: string): Promise<string> {
  return b64urlBytes(sha256(enc.encode(text)));
}

/** Constant-time comparison of two strings of possibly different lengths. */
export function timingSafeEqualStr(a: string, b: string): boolean {
  const x = enc.encode(a);
  const y = enc.encode(b);
  let diff = x.length ^ y.length;
  for (let i = 0; i < x.length; i++) diff |= x[i]! ^ (y[i] ?? 0);
  return diff === 0;
}
