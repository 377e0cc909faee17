/**
 * Typed reads of a store row, for the repositories' row decoders: each
 * column is checked as it is read, so a decoder never casts. A column of the
 * wrong type is a programming or schema mistake (TypeError), not bad input.
 *
 * @example
 * const decodeRole = (r: Row): Role => ({ name: str(r, 'name'), permissions: json(r, 'permissions', stringArray), ... });
 */
import type { Row } from './types.ts';

function wrong(k: string, want: string, v: unknown): TypeError {
  return new TypeError(`store row: column ${k} is ${v === null ? 'null' : typeof v}, expected ${want}`);
}

export function str(r: Row, k: string): string {
  const v = r[k];
  if (typeof v !== 'string') throw wrong(k, 'text', v);
  return v;
}

export function strOrNull(r: Row, k: string): string | null {
  const v = r[k];
  if (v === null || v === undefined) return null;
  if (typeof v !== 'string') throw wrong(k, 'text or null', v);
  return v;
}

export function num(r: Row, k: string): number {
  const v = r[k];
  if (typeof v !== 'number') throw wrong(k, 'a number', v);
  return v;
}

export function numOrNull(r: Row, k: string): number | null {
  const v = r[k];
  if (v === null || v === undefined) return null;
  if (typeof v !== 'number') throw wrong(k, 'a number or null', v);
  return v;
}

export function bytes(r: Row, k: string): Uint8Array {
  const v = r[k];
  if (!(v instanceof Uint8Array)) throw wrong(k, 'bytes', v);
  return v;
}

/** A JSON text column parsed, then checked by `check` (which narrows it or throws). */
export function json<T>(r: Row, k: string, check: (v: unknown) => T): T {
  const text = str(r, k);
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new TypeError(`store row: column ${k} is not JSON`);
  }
  return check(v);
}

/** A nullable JSON text column. */
export function jsonOrNull<T>(r: Row, k: string, check: (v: unknown) => T): T | null {
  return strOrNull(r, k) === null ? null : json(r, k, check);
}

// ---- checks for json()

export function stringArray(v: unknown): string[] {
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) throw new TypeError('store row: expected an array of strings');
  return v as string[];
}

export function object(v: unknown): Record<string, unknown> {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new TypeError('store row: expected a JSON object');
  return v as Record<string, unknown>;
}

/** Any JSON value, as stored (for payloads the caller validated when writing them). */
export function anyJson(v: unknown): unknown {
  return v;
}

/** The number a COUNT(*) (or other aggregate) answered; 0 for no row. */
export function count(r: Row | undefined, k = 'n'): number {
  return r ? num(r, k) : 0;
}
