/**
 * Canonical JSON (RFC 8785, JCS) and SHA-256 content hashes.
 *
 * Everything the cell and the edge sign or hash (journals, bundles, graph
 * hashes) goes through `canonicalJson`, so equal values give equal bytes in
 * every runtime. Serialization is the `canonicalize` package (RFC 8785); this
 * module first checks that the value is plain JSON and throws `TypeError`
 * otherwise (a programming mistake, not hostile input):
 *
 * - accepted: `null`, booleans, finite numbers, strings without lone
 *   surrogates, arrays, plain objects (prototype `Object.prototype` or `null`);
 * - an object member whose value is `undefined` is omitted, exactly as
 *   `JSON.stringify` does, so `contentHash(x)` equals
 *   `contentHash(JSON.parse(JSON.stringify(x)))`;
 * - refused with `TypeError`: `undefined` at the top level or inside an array,
 *   functions, symbols, bigints, `NaN`, `±Infinity`, lone surrogates, cycles,
 *   and non-plain objects (Date, Map, Uint8Array, class instances; `toJSON` is
 *   never consulted), and nesting deeper than MAX_DEPTH (so the answer never
 *   depends on a runtime's stack size: cell and edge agree).
 *
 * Also the small byte helpers every other core module uses: UTF-8 and
 * unpadded base64url (RFC 4648 section 5).
 */
import canonicalize from 'canonicalize';
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';

/** Deepest nesting of arrays/objects `canonicalJson` accepts (the top-level value is depth 1). */
export const MAX_DEPTH = 256;

function check(value: unknown, path: string, stack: object[], inArray: boolean): void {
  switch (typeof value) {
    case 'string':
      if (hasLoneSurrogate(value)) throw new TypeError(`canonicalJson: lone surrogate in string at ${path}`);
      return;
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError(`canonicalJson: non-finite number at ${path}`);
      return;
    case 'undefined':
      if (inArray || path === '$') throw new TypeError(`canonicalJson: undefined at ${path}`);
      return;
    case 'object': {
      if (value === null) return;
      if (stack.includes(value)) throw new TypeError(`canonicalJson: cycle at ${path}`);
      if (stack.length >= MAX_DEPTH) throw new TypeError(`canonicalJson: nesting deeper than ${MAX_DEPTH} at ${path.slice(0, 80)}...`);
      stack.push(value);
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) check(value[i], `${path}[${i}]`, stack, true);
      } else {
        const proto: unknown = Object.getPrototypeOf(value);
        if (proto !== Object.prototype && proto !== null) {
          throw new TypeError(`canonicalJson: not a plain object at ${path}`);
        }
        if (Object.getOwnPropertySymbols(value).length > 0) {
          throw new TypeError(`canonicalJson: symbol key at ${path}`);
        }
        for (const [k, v] of Object.entries(value)) {
          if (hasLoneSurrogate(k)) throw new TypeError(`canonicalJson: lone surrogate in key at ${path}`);
          check(v, `${path}.${k}`, stack, false);
        }
      }
      stack.pop();
      return;
    }
    default:
      throw new TypeError(`canonicalJson: ${typeof value} is not JSON at ${path}`);
  }
}

/** True when `s` holds a UTF-16 surrogate without its pair (not representable in UTF-8 JSON). */
export function hasLoneSurrogate(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const n = s.charCodeAt(i + 1);
      if (!(n >= 0xdc00 && n <= 0xdfff)) return true;
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) return true;
  }
  return false;
}

/**
 * RFC 8785 canonical JSON of a plain JSON value.
 * @throws TypeError when `value` is not plain JSON (see the module header).
 * @example canonicalJson({ b: 1, a: [true, null] }) // '{"a":[true,null],"b":1}'
 */
export function canonicalJson(value: unknown): string {
  check(value, '$', [], false);
  const out = canonicalize(value);
  if (out === undefined) throw new TypeError('canonicalJson: value is not JSON');
  return out;
}

/**
 * Whether `canonicalJson(value)` would succeed, without serializing: the same checks, no text.
 * @example isPlainJson({ a: [1, null] }) // true; isPlainJson(new Date()) // false
 */
export function isPlainJson(value: unknown): boolean {
  try {
    check(value, '$', [], false);
    return true;
  } catch {
    return false;
  }
}

const encoder = new TextEncoder();

/** UTF-8 bytes of a string. */
export function utf8(s: string): Uint8Array {
  return encoder.encode(s);
}

/** A synchronous lower-case hex SHA-256 of bytes, or of a string's UTF-8 bytes. */
export type Sha256HexFn = (data: Uint8Array | string) => string;

/** The pure-JS SHA-256 (@noble/hashes): the default everywhere (core stays Web-Crypto-and-JS only). */
const pureSha256Hex: Sha256HexFn = (data) => bytesToHex(sha256(typeof data === 'string' ? utf8(data) : data));

let sha256HexImpl: Sha256HexFn = pureSha256Hex;

/**
 * Replace the SHA-256 behind `sha256Hex` and `contentHash` for this process with
 * an equal, faster one (both programs install node:crypto's, see runtime/native-hash.ts).
 * SHA-256 is SHA-256: every hash stays byte-identical; only the CPU it costs changes.
 */
export function useSha256Hex(f: Sha256HexFn): void {
  sha256HexImpl = f;
}

/** Lower-case hex SHA-256 of bytes, or of a string's UTF-8 bytes (FIPS 180-4). */
export function sha256Hex(data: Uint8Array | string): string {
  return sha256HexImpl(data);
}

/**
 * `sha256:` + hex SHA-256 of the canonical JSON of `value`: the content hash of a JSON value
 * (native JSON.stringify when it already is that text, see inCanonicalOrder).
 */
export function contentHash(value: unknown): string {
  return 'sha256:' + sha256Hex(fastPathOk(value, 0) ? JSON.stringify(value) : canonicalJson(value));
}

const SURROGATE = /[\uD800-\uDFFF]/;

/** Deep values take canonicalJson's path, which enforces MAX_DEPTH. */
const FAST_DEPTH = 64;

function fastPathOk(v: unknown, depth: number): boolean {
  if (depth >= FAST_DEPTH) return false;
  switch (typeof v) {
    case 'string':
      return !SURROGATE.test(v) || !hasLoneSurrogate(v);
    case 'number':
      return Number.isFinite(v);
    case 'boolean':
      return true;
    case 'object': {
      if (v === null) return true;
      if (Array.isArray(v)) {
        for (let i = 0; i < v.length; i++) if (!fastPathOk(v[i], depth + 1)) return false;
        return true;
      }
      const proto: unknown = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null) return false;
      const keys = Object.keys(v);
      for (let i = 0; i < keys.length; i++) {
        const k = keys[i]!;
        if (i > 0 && !(keys[i - 1]! < k)) return false;
        if (SURROGATE.test(k)) return false;
        if (!fastPathOk((v as Record<string, unknown>)[k], depth + 1)) return false;
      }
      return true;
    }
    default:
      return false; // undefined, bigint, function, symbol: let contentHash decide
  }
}

/**
 * Whether `JSON.stringify(v)` is already the RFC 8785 canonical JSON of `v`: every object
 * plain with its keys in UTF-16 code-unit order, every leaf plain JSON (finite numbers,
 * strings without lone surrogates). Anything else is left to canonicalJson (which
 * canonicalizes or throws TypeError).
 */
export function inCanonicalOrder(v: unknown): boolean {
  return fastPathOk(v, 0);
}

const B64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const B64URL_INDEX = new Int16Array(128).fill(-1);
for (let i = 0; i < B64URL.length; i++) B64URL_INDEX[B64URL.charCodeAt(i)] = i;

/** Unpadded base64url (RFC 4648 section 5) of bytes. */
export function b64url(bytes: Uint8Array): string {
  let out = '';
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    out += B64URL[n >> 18]! + B64URL[(n >> 12) & 63]! + B64URL[(n >> 6) & 63]! + B64URL[n & 63]!;
  }
  const rest = bytes.length - i;
  if (rest === 1) {
    const n = bytes[i]! << 16;
    out += B64URL[n >> 18]! + B64URL[(n >> 12) & 63]!;
  } else if (rest === 2) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8);
    out += B64URL[n >> 18]! + B64URL[(n >> 12) & 63]! + B64URL[(n >> 6) & 63]!;
  }
  return out;
}

/**
 * Bytes of an unpadded base64url string. Strict: refuses padding, characters
 * outside the base64url alphabet, an impossible length (4n+1) and non-zero
 * trailing bits, so every byte string has exactly one accepted encoding.
 * @throws TypeError on a malformed string.
 */
export function fromB64url(s: string): Uint8Array {
  if (s.length % 4 === 1) throw new TypeError('fromB64url: invalid length');
  const out = new Uint8Array(Math.floor((s.length * 3) / 4));
  let o = 0;
  let acc = 0;
  let bits = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const v = c < 128 ? B64URL_INDEX[c]! : -1;
    if (v < 0) throw new TypeError('fromB64url: invalid character');
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (acc >> bits) & 0xff;
      acc &= (1 << bits) - 1;
    }
  }
  if (acc !== 0) throw new TypeError('fromB64url: non-zero trailing bits');
  return out;
}
