/**
 * Standard base64 with padding (RFC 4648 section 4): the encoding of the C2SP
 * signed notes and checkpoints, and of DSSE envelopes as their reference
 * implementations write them. Strict on input, so every byte string has one
 * accepted spelling. (Unpadded base64url, the JOSE encoding, is in canonical.ts.)
 */

const STD = new TextEncoder().encode('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/');
const PAD = 0x3d;

/** Standard, padded base64 of bytes (written as ASCII bytes, then decoded once: megabytes in milliseconds). */
export function b64std(bytes: Uint8Array): string {
  const n = bytes.length;
  const out = new Uint8Array(Math.ceil(n / 3) * 4);
  let o = 0;
  let i = 0;
  for (; i + 2 < n; i += 3) {
    const v = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    out[o++] = STD[v >> 18]!;
    out[o++] = STD[(v >> 12) & 63]!;
    out[o++] = STD[(v >> 6) & 63]!;
    out[o++] = STD[v & 63]!;
  }
  if (n - i === 1) {
    const v = bytes[i]! << 16;
    out[o++] = STD[v >> 18]!;
    out[o++] = STD[(v >> 12) & 63]!;
    out[o++] = PAD;
    out[o++] = PAD;
  } else if (n - i === 2) {
    const v = (bytes[i]! << 16) | (bytes[i + 1]! << 8);
    out[o++] = STD[v >> 18]!;
    out[o++] = STD[(v >> 12) & 63]!;
    out[o++] = STD[(v >> 6) & 63]!;
    out[o++] = PAD;
  }
  return new TextDecoder().decode(out);
}

const INDEX = new Int16Array(256).fill(-1);
for (let i = 0; i < STD.length; i++) INDEX[STD[i]!] = i;

/**
 * Bytes of a standard, padded base64 string. Refuses a missing or extra pad,
 * characters outside the alphabet and non-zero trailing bits.
 * @throws TypeError on a malformed string.
 */
export function fromB64std(s: string): Uint8Array {
  if (typeof s !== 'string' || s.length % 4 !== 0) throw new TypeError('fromB64std: invalid length');
  const pad = s.endsWith('==') ? 2 : s.endsWith('=') ? 1 : 0;
  const n = s.length - pad;
  const out = new Uint8Array((s.length / 4) * 3 - pad);
  let o = 0;
  const at = (i: number): number => {
    const c = s.charCodeAt(i);
    const v = c < 256 ? INDEX[c]! : -1;
    if (v < 0) throw new TypeError('fromB64std: invalid character');
    return v;
  };
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const v = (at(i) << 18) | (at(i + 1) << 12) | (at(i + 2) << 6) | at(i + 3);
    out[o++] = v >> 16;
    out[o++] = (v >> 8) & 0xff;
    out[o++] = v & 0xff;
  }
  if (pad === 2) {
    const v = (at(i) << 18) | (at(i + 1) << 12);
    if (v & 0xffff) throw new TypeError('fromB64std: non-zero trailing bits');
    out[o++] = v >> 16;
  } else if (pad === 1) {
    const v = (at(i) << 18) | (at(i + 1) << 12) | (at(i + 2) << 6);
    if (v & 0xff) throw new TypeError('fromB64std: non-zero trailing bits');
    out[o++] = v >> 16;
    out[o++] = (v >> 8) & 0xff;
  }
  return out;
}
