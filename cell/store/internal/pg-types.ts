/**
 * Values between PostgreSQL and the store's `SqlValue` (string | number |
 * null | Uint8Array), the same shapes the embedded engine returns: BIGINT,
 * COUNT(*), NUMERIC and the other numbers come back as JS numbers, BOOLEAN as
 * 1/0 (as SQLite has it), BYTEA as a Uint8Array, everything else (text,
 * timestamps, JSON) as the server's text, never parsed into objects.
 */
import pg from 'pg';
import type { SqlValue } from '../types.ts';

const NUMERIC_OIDS = new Set([20, 21, 23, 26, 700, 701, 1700]); // int8 int2 int4 oid float4 float8 numeric
const BOOL_OID = 16;
const BYTEA_OID = 17;

const parseByteaText = pg.types.getTypeParser(BYTEA_OID, 'text') as (v: string) => Buffer;

const identity = (v: string): string => v;
const toNumber = (v: string): number => Number(v);
const toBool = (v: string): number => (v === 't' ? 1 : 0);
function toBytes(v: string): Uint8Array {
  const b = parseByteaText(v);
  return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
}

/** The `types` option of the pool: text-format parsers per type OID. */
export const PG_TYPES = {
  getTypeParser(oid: number): (v: string) => unknown {
    if (NUMERIC_OIDS.has(oid)) return toNumber;
    if (oid === BOOL_OID) return toBool;
    if (oid === BYTEA_OID) return toBytes;
    return identity;
  },
} as unknown as pg.CustomTypesConfig;

/** Parameters as the driver sends them (a Uint8Array as a Buffer over the same bytes). */
export function toPgParams(params: readonly SqlValue[] | undefined): unknown[] {
  if (!params || params.length === 0) return [];
  return params.map((v) => (v instanceof Uint8Array && !Buffer.isBuffer(v) ? Buffer.from(v.buffer, v.byteOffset, v.byteLength) : v));
}
