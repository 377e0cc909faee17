/**
 * Fast content hash for the compiler's large documents, equal to
 * `contentHash` (core/canonical.ts) by construction: when every object in
 * the value already has its keys in RFC 8785 order (UTF-16 code-unit order,
 * which is what the compiler emits) and every leaf is plain JSON, the RFC 8785
 * serialization is exactly `JSON.stringify` (same number formatting and string
 * escaping), which is native and fast. Anything else (unsorted keys, integer-like
 * keys, undefined members, lone surrogates, non-finite numbers, non-plain
 * objects) falls back to `contentHash`, which canonicalizes or throws TypeError.
 */
import { canonicalJson, contentHash, inCanonicalOrder, sha256Hex, utf8 } from './canonical.ts';

/** A synchronous SHA-256 (e.g. node:crypto's, passed in by the cell or the edge); the default is @noble/hashes. */
export type Sha256 = (bytes: Uint8Array) => Uint8Array;

function hex(b: Uint8Array): string {
  let s = '';
  for (let i = 0; i < b.length; i++) s += (b[i]! < 16 ? '0' : '') + b[i]!.toString(16);
  return s;
}

/** RFC 8785 canonical JSON of `v`: native JSON.stringify when keys are already in canonical order, else canonicalJson. */
export function canonicalText(v: unknown): string {
  return inCanonicalOrder(v) ? JSON.stringify(v) : canonicalJson(v);
}

/**
 * `contentHash(v)`, computed with native JSON.stringify when `v` is already in canonical
 * key order; `sha256` (optional) replaces the pure-JS SHA-256 on large documents.
 */
export function hashJson(v: unknown, sha256?: Sha256): string {
  if (!inCanonicalOrder(v)) return contentHash(v);
  const text = JSON.stringify(v);
  return 'sha256:' + (sha256 !== undefined ? hex(sha256(utf8(text))) : sha256Hex(text));
}

/** A copy of a JSON value with plain-object keys inserted in canonical order (so hashJson takes the fast path); other values are kept as they are. */
export function sortedKeys<T>(v: T): T {
  if (Array.isArray(v)) return v.map(sortedKeys) as T;
  if (typeof v === 'object' && v !== null && (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null)) {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) {
      const x = (v as Record<string, unknown>)[k];
      if (x === undefined) continue;
      if (k === '__proto__') Object.defineProperty(out, k, { value: sortedKeys(x), enumerable: true, writable: true, configurable: true });
      else out[k] = sortedKeys(x);
    }
    return out as T;
  }
  return v;
}
