/**
 * Standard base64 with padding (RFC 4648 section 4): the encoding of the C2SP
 * signed notes and checkpoints, and of DSSE envelopes as their reference
 * implementations write them. Strict on input, so every byte string has one
 * accepted spelling. (Unpadded base64url, the JOSE encoding, is in canonical.ts.)
 */
import { b64url, fromB64url } from './canonical.ts';

/** Standard, padded base64 of bytes. */
export function b64std(bytes: Uint8Array): string {
  const u = b64url(bytes).replace(/-/g, '+').replace(/_/g, '/');
  return u + '='.repeat((4 - (u.length % 4)) % 4);
}

/**
 * Bytes of a standard, padded base64 string. Refuses a missing or extra pad,
 * characters outside the alphabet and non-zero trailing bits.
 * @throws TypeError on a malformed string.
 */
export function fromB64std(s: string): Uint8Array {
  if (typeof s !== 'string' || s.length % 4 !== 0) throw new TypeError('fromB64std: invalid length');
  const pad = s.endsWith('==') ? 2 : s.endsWith('=') ? 1 : 0;
  const body = s.slice(0, s.length - pad);
  if (/[-_=]/.test(body)) throw new TypeError('fromB64std: invalid character');
  return fromB64url(body.replace(/\+/g, '-').replace(/\//g, '_'));
}
