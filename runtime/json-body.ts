/**
 * The gate both programs put in front of every handler that reads a request
 * body: one left-to-right scan of the body's text, before anything parses it,
 * that refuses (400 `invalid_request`)
 *
 * - a body nested deeper than `maxDepth` arrays and objects
 *   (`details.reason = too_deep`), so no recursive code (validation, canonical
 *   hashing, storage) ever meets it;
 * - a body with the same key twice in one object, anywhere in it
 *   (`details.reason = duplicate_key`). `JSON.parse` keeps the last of two
 *   equal keys, so `{"permissions":["catalog.read"],"permissions":["*"]}`
 *   would be one thing to a reader of the text and another to the handler.
 *   Keys are compared after their escapes are decoded (`"a"` and `"\u0061"`
 *   are the same key).
 *
 * Every body but a form is scanned whatever its content type (some routes parse
 * text/plain bodies as JSON; signed files carry a JSON header line). The scan
 * is linear, without recursion, and allocates one reusable key set per level.
 */
import type { Context, Env, MiddlewareHandler } from 'hono';
import { ServiceError } from '../core/errors.ts';

/** Why a body was refused, or null when it passes. */
export type JsonScanRefusal = { reason: 'too_deep' } | { reason: 'duplicate_key'; key: string };

/** The most of a duplicated key that an error repeats back. */
const KEY_ECHO = 64;

/** Form bodies are not JSON: their brackets are data, and the OAuth endpoints parse them. */
const FORM_TYPES = new Set(['application/x-www-form-urlencoded', 'multipart/form-data']);

/**
 * Scans JSON text once: more than `maxDepth` arrays/objects open at once, or a
 * key repeated within one object. Brackets and keys inside strings do not
 * count. Text that is not JSON is not refused here (its parser refuses it);
 * several JSON documents in a row (a signed file's header line and payload)
 * are scanned each on its own.
 *
 * @example scanJson('{"a":1,"a":2}', 64) // { reason: 'duplicate_key', key: 'a' }
 */
export function scanJson(text: string, maxDepth: number): JsonScanRefusal | null {
  /** Per open level: the keys seen so far, or null for an array. Sets are reused level by level. */
  const sets: (Set<string> | undefined)[] = [];
  const isObject: boolean[] = [];
  let depth = 0;
  let expectKey = false;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const ch = text.charCodeAt(i);
    if (ch === 0x22) {
      const start = i + 1;
      i = closingQuote(text, start);
      if (expectKey) {
        expectKey = false;
        const raw = text.slice(start, i);
        const key = raw.includes('\\') ? decodeKey(raw) : raw;
        let seen = sets[depth - 1];
        if (seen === undefined) {
          seen = new Set();
          sets[depth - 1] = seen;
        }
        if (seen.has(key)) return { reason: 'duplicate_key', key };
        seen.add(key);
      }
    } else if (ch === 0x7b) {
      if (++depth > maxDepth) return { reason: 'too_deep' };
      isObject[depth - 1] = true;
      sets[depth - 1]?.clear();
      expectKey = true;
    } else if (ch === 0x5b) {
      if (++depth > maxDepth) return { reason: 'too_deep' };
      isObject[depth - 1] = false;
      expectKey = false;
    } else if (ch === 0x7d || ch === 0x5d) {
      if (depth > 0) depth--;
      expectKey = false;
    } else if (ch === 0x2c) {
      expectKey = depth > 0 && isObject[depth - 1] === true;
    }
  }
  return null;
}

/** The index of the quote that ends the string starting at `from` (the text's length if none does). */
function closingQuote(text: string, from: number): number {
  for (let q = text.indexOf('"', from); q !== -1; q = text.indexOf('"', q + 1)) {
    let backslashes = 0;
    while (q - 1 - backslashes >= from && text.charCodeAt(q - 1 - backslashes) === 0x5c) backslashes++;
    if (backslashes % 2 === 0) return q; // an odd run of backslashes escapes this quote
  }
  return text.length;
}

/** A key's text with its escapes decoded; malformed escapes are left for the body's parser to refuse. */
function decodeKey(raw: string): string {
  try {
    return JSON.parse(`"${raw}"`) as string;
  } catch {
    return raw;
  }
}

/**
 * The Content-Length of a request served by @hono/node-server, read from
 * node:http's parsed headers; undefined in process, or when the body is sent
 * chunked (Transfer-Encoding), or the length is not a plain number.
 */
export function declaredBodyLength(c: Context): number | undefined {
  const headers = (c.env as { incoming?: { headers: Record<string, string | string[] | undefined> } } | undefined)?.incoming?.headers;
  if (!headers || headers['transfer-encoding'] !== undefined) return undefined;
  const v = headers['content-length'];
  return typeof v === 'string' && /^\d{1,15}$/.test(v) ? Number(v) : undefined;
}

/**
 * The body gate (see the module header) as a step: resolves when the body
 * passes, throws the refusal otherwise. The body is read as text (Hono keeps
 * it, so the route's own parse reads the same text); GET, HEAD, empty and form
 * bodies pass unread, without a promise.
 */
export function jsonBodyStep<E extends Env>(maxDepth: number): (c: Context<E>) => void | Promise<void> {
  if (!Number.isInteger(maxDepth) || maxDepth < 1) throw new TypeError('jsonMaxDepth must be a positive integer');
  const judge = (text: string) => {
    const refusal = scanJson(text, maxDepth);
    if (refusal?.reason === 'too_deep') {
      throw new ServiceError('invalid_request', `the body is nested deeper than ${maxDepth} levels`, {
        details: { reason: 'too_deep', max_depth: maxDepth },
      });
    }
    if (refusal?.reason === 'duplicate_key') {
      throw new ServiceError('invalid_request', 'the body has the same key twice in one object', {
        details: { reason: 'duplicate_key', key: refusal.key.slice(0, KEY_ECHO) },
      });
    }
  };
  return (c) => {
    if (c.req.method === 'GET' || c.req.method === 'HEAD') return;
    const declared = declaredBodyLength(c);
    if (declared === 0 || (declared === undefined && !c.req.raw.body)) return;
    const type = (c.req.header('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
    if (FORM_TYPES.has(type)) return;
    return c.req.text().then(judge);
  };
}

/** The body gate as a middleware (see `jsonBodyStep`). */
export function jsonBodyGate<E extends Env>(maxDepth: number): MiddlewareHandler<E> {
  const step = jsonBodyStep<E>(maxDepth);
  return async function jsonBody(c, next) {
    await step(c);
    return next();
  };
}
