/**
 * The write-ahead log's byte format (see docs/storage.md).
 *
 * File = header, then records.
 *   header (16 bytes): magic "CELLWAL\0" (8), format version u32 LE, reserved u32 (0)
 *   record: payload length u32 LE | crc32 u32 LE | lsn u64 LE | payload
 * crc32 (zlib.crc32) covers the 8 lsn bytes followed by the payload. The payload
 * is UTF-8 JSON: an array of statements, each `[sql]` or `[sql, params]`; a
 * blob parameter is `{"b64": "..."}` and a non-finite number `{"num": "NaN"}`.
 */
import { crc32 } from 'node:zlib';
import type { SqlValue } from '../types.ts';

export const LOG_MAGIC = Buffer.from('CELLWAL\0', 'latin1');
export const LOG_VERSION = 1;
export const HEADER_BYTES = 16;
export const RECORD_HEAD_BYTES = 16;
/** A single record larger than this is treated as a corrupt length field. */
export const MAX_RECORD_BYTES = 256 * 1024 * 1024;

export type Statement = readonly [sql: string, params?: readonly SqlValue[]];

export function encodeHeader(): Buffer {
  const h = Buffer.alloc(HEADER_BYTES);
  LOG_MAGIC.copy(h, 0);
  h.writeUInt32LE(LOG_VERSION, 8);
  return h;
}

/** Why a header is unusable, or null when it is a valid current header. */
export function checkHeader(buf: Buffer): string | null {
  if (buf.length < HEADER_BYTES) return 'short header';
  if (!buf.subarray(0, 8).equals(LOG_MAGIC)) return 'bad magic';
  const v = buf.readUInt32LE(8);
  if (v !== LOG_VERSION) return `unsupported log format version ${v}`;
  return null;
}

function encodeParam(v: SqlValue): unknown {
  if (v instanceof Uint8Array) return { b64: Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64') };
  if (typeof v === 'number' && !Number.isFinite(v)) return { num: String(v) };
  return v;
}

function decodeParam(v: unknown): SqlValue {
  if (v === null || typeof v === 'string' || typeof v === 'number') return v;
  if (typeof v === 'object') {
    const o = v as { b64?: unknown; num?: unknown };
    if (typeof o.b64 === 'string') return new Uint8Array(Buffer.from(o.b64, 'base64'));
    if (typeof o.num === 'string') return Number(o.num);
  }
  throw new TypeError('log payload: bad parameter');
}

/** One statement of a payload, as JSON: `[sql]` or `[sql, params]`. */
export function encodeStatement(sql: string, params?: readonly SqlValue[]): string {
  return JSON.stringify(params && params.length > 0 ? [sql, params.map(encodeParam)] : [sql]);
}

export function encodeRecord(lsn: number, stmts: readonly Statement[]): Buffer {
  return encodeRecordJson(lsn, `[${stmts.map(([sql, params]) => encodeStatement(sql, params)).join(',')}]`);
}

/** A record whose payload is `json`, the statements' array already encoded (encodeStatement, joined). */
export function encodeRecordJson(lsn: number, json: string): Buffer {
  const payload = Buffer.from(json, 'utf8');
  const rec = Buffer.allocUnsafe(RECORD_HEAD_BYTES + payload.length);
  rec.writeUInt32LE(payload.length, 0);
  rec.writeBigUInt64LE(BigInt(lsn), 8);
  payload.copy(rec, RECORD_HEAD_BYTES);
  rec.writeUInt32LE(crc32(rec.subarray(8)), 4);
  return rec;
}

export type Decoded = { ok: true; lsn: number; stmts: Statement[]; next: number } | { ok: false; reason: string };

/** Decodes the record at `off` (callers stop at the first `ok: false`). */
export function decodeRecord(buf: Buffer, off: number): Decoded {
  const left = buf.length - off;
  if (left < RECORD_HEAD_BYTES) return { ok: false, reason: `torn record header (${left} bytes)` };
  const len = buf.readUInt32LE(off);
  if (len > MAX_RECORD_BYTES) return { ok: false, reason: `bad record length ${len}` };
  if (left < RECORD_HEAD_BYTES + len) return { ok: false, reason: `torn record (${left} of ${RECORD_HEAD_BYTES + len} bytes)` };
  const crc = buf.readUInt32LE(off + 4);
  const body = buf.subarray(off + 8, off + RECORD_HEAD_BYTES + len);
  if (crc32(body) !== crc) return { ok: false, reason: 'checksum mismatch' };
  const lsn = Number(buf.readBigUInt64LE(off + 8));
  let stmts: Statement[];
  try {
    const parsed: unknown = JSON.parse(body.subarray(8).toString('utf8'));
    if (!Array.isArray(parsed)) throw new TypeError('not an array');
    stmts = parsed.map((s: unknown) => {
      if (!Array.isArray(s) || typeof s[0] !== 'string') throw new TypeError('bad statement');
      const params = s[1] === undefined ? undefined : (s[1] as unknown[]);
      if (params !== undefined && !Array.isArray(params)) throw new TypeError('bad params');
      return params ? ([s[0], params.map(decodeParam)] as const) : ([s[0]] as const);
    });
  } catch {
    return { ok: false, reason: 'unreadable payload' };
  }
  return { ok: true, lsn, stmts, next: off + RECORD_HEAD_BYTES + len };
}
