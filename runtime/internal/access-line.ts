/**
 * The access-log line (docs/operations.md) serialised by a fixed shape
 * instead of pino's generic walk: one per request, so its cost is the access
 * log's cost (issue 28). The bytes are the ones pino writes for
 * `info('request', fields)` with runtime/log.ts's options: `level`, `time`,
 * the fields in this order (an undefined `trace_id` left out, nulls kept),
 * then `msg` (test/runtime/log.test.ts compares the two).
 *
 * Two writers of the same bytes: `AccessLineEncoder` encodes a line straight
 * into the output's buffer (no string built; the parts that take few values
 * kept as bytes), for every line whose values are printable ASCII with
 * nothing to escape or redact: all of a cell's own lines. `accessLine`
 * builds the string, for the others (then redacted, as every line is).
 */

/** The fields of an access-log line, in the line's order (a type, not an interface: it is also a Record for `Logger.info`). */
export type AccessFields = {
  /** The `X-Request-Id` of the answer. */
  request_id: string | null;
  /** The route template, never the raw path. */
  route: string;
  method: string;
  status: number;
  duration_ms: number;
  principal_id: string | null;
  credential_kind: string | null;
  key_id: string | null;
  /** Present when the request ran inside a trace. */
  trace_id?: string | undefined;
};

/** Printable ASCII without `"` and `\`: written between quotes as it is, as JSON.stringify would. */
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

function str(s: string | null): string {
  if (s === null) return 'null';
  return PLAIN.test(s) ? `"${s}"` : JSON.stringify(s);
}

/**
 * The JSON text of the fields that take few values (route templates, methods, credential kinds,
 * principals, keys), kept: a lookup instead of a scan and a copy a field. Cleared when it holds
 * TOKENS_KEPT, so that many principals cannot grow it.
 */
const tokens = new Map<string, string>();
const TOKENS_KEPT = 1024;

function known(s: string | null): string {
  if (s === null) return 'null';
  let t = tokens.get(s);
  if (t === undefined) {
    if (tokens.size >= TOKENS_KEPT) tokens.clear();
    t = str(s);
    tokens.set(s, t);
  }
  return t;
}

/** A finite number as JSON writes it; pino writes `null` for NaN and the infinities. */
function num(n: number): string {
  return Number.isFinite(n) ? String(n) : 'null';
}

/**
 * A duration in milliseconds, as num writes it. The access log's is a whole number of microseconds
 * over 1000 (cell/http/access-log.ts): written from the integers (no shortest-decimal search of a
 * double), which gives String's text, as the double nearest k/1000 prints as k/1000's decimals.
 */
export function millis(n: number): string {
  const k = Math.round(n * 1000);
  if (k / 1000 !== n || k < 0 || k > 1e15) return num(n);
  const whole = Math.floor(k / 1000);
  const f = k - whole * 1000;
  if (f === 0) return `${whole}`;
  if (f % 100 === 0) return `${whole}.${f / 100}`;
  if (f % 10 === 0) return `${whole}.${f < 100 ? '0' : ''}${f / 10}`;
  return `${whole}.${f < 10 ? '00' : f < 100 ? '0' : ''}${f}`;
}

/** The JSON line (with its newline) for `fields`; `time` is pino's `,"time":"<ISO>"` fragment. */
export function accessLine(time: string, f: AccessFields): string {
  const trace = f.trace_id === undefined ? '' : `,"trace_id":${str(f.trace_id)}`;
  return (
    `{"level":30${time},"request_id":${str(f.request_id)},"route":${known(f.route)},"method":${known(f.method)},` +
    `"status":${num(f.status)},"duration_ms":${millis(f.duration_ms)},"principal_id":${known(f.principal_id)},` +
    `"credential_kind":${known(f.credential_kind)},"key_id":${known(f.key_id)}${trace},"msg":"request"}\n`
  );
}

/** Whether a value of `f` holds an API key secret's prefix (then the line goes through redactLine): a scan of each short value, not of the line. */
export function mayHoldKeySecret(f: AccessFields): boolean {
  const has = (s: string | null | undefined) => s?.includes('svck_live_') === true;
  return (
    has(f.request_id) || has(f.route) || has(f.method) || has(f.principal_id) || has(f.credential_kind) || has(f.key_id) || has(f.trace_id)
  );
}

/** UTF-8 of an ASCII text: one byte a character (a plain loop: Uint8Array.from's mapping walk showed in profiles, once a millisecond). */
function ascii(s: string): Uint8Array {
  const bytes = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) bytes[i] = s.charCodeAt(i);
  return bytes;
}
const REQUEST_ID = ascii(',"request_id":');
const DURATION = ascii(',"duration_ms":');
const TRACE_ID = ascii(',"trace_id":');
const TAIL = ascii(',"msg":"request"}\n');
const NULL = ascii('null');
/** The prefix of an API key secret, as character codes: a value holding it goes the string way, to be redacted. */
const SECRET_PREFIX = Array.from('svck_live_', (c) => c.charCodeAt(0));
const S = SECRET_PREFIX[0]!;

/** The most characters of a line's values (and its time) the encoder writes; longer lines go the string way. */
const MOST_VALUE_CHARS = 2048;
/** The room `AccessLineEncoder.encode` needs: the values' characters (one byte each), and 256 bytes of keys, quotes and numbers at most. */
export const ENCODE_ROOM = 512 + MOST_VALUE_CHARS;

/**
 * `s` between quotes, if it is plain (as `str` writes it without escaping) and holds no key secret's
 * prefix; else -1. The prefix is matched as the characters are copied (its first character does not
 * recur in it, so a mismatch restarts the match at that character).
 */
function quoted(buf: Uint8Array, off: number, s: string): number {
  buf[off++] = 34;
  let m = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === 34 || c === 92) return -1;
    m = c === SECRET_PREFIX[m] ? m + 1 : c === S ? 1 : 0;
    if (m === SECRET_PREFIX.length) return -1;
    buf[off++] = c;
  }
  buf[off++] = 34;
  return off;
}

/**
 * Bytes kept per one to three keys (nested maps: no key string is built per line), for the parts of a
 * line made of fields that take few values; all cleared when TOKENS_KEPT entries are kept.
 */
class Fragments {
  private kept = new Map<string | null, Map<string | null, Map<string | null, Uint8Array | null>>>();
  private size = 0;

  /**
   * The keys and bytes of the last lookup: a line is most often about the same route, or caller, as the one before.
   * None before the first (a placeholder there once answered the keys ('', '', '') with its null: refused).
   */
  private last: [string | null, string | null, string | null, Uint8Array | null] | null = null;

  /** The bytes kept for (a, b, c); undefined when none are. */
  get(a: string | null, b: string | null, c: string | null): Uint8Array | null | undefined {
    const last = this.last;
    if (last !== null && a === last[0] && b === last[1] && c === last[2]) return last[3];
    const bytes = this.kept.get(a)?.get(b)?.get(c);
    if (bytes !== undefined) this.last = [a, b, c, bytes];
    return bytes;
  }

  /** Keeps `bytes` for (a, b, c) and returns them. */
  set(a: string | null, b: string | null, c: string | null, bytes: Uint8Array | null): Uint8Array | null {
    if (this.size >= TOKENS_KEPT) {
      this.kept = new Map();
      this.size = 0;
    }
    let m1 = this.kept.get(a);
    if (m1 === undefined) {
      m1 = new Map();
      this.kept.set(a, m1);
    }
    let m2 = m1.get(b);
    if (m2 === undefined) {
      m2 = new Map();
      m1.set(b, m2);
    }
    m2.set(c, bytes);
    this.size++;
    this.last = [a, b, c, bytes];
    return bytes;
  }
}

/** Literal texts and values, alternating (a value null is written null): their bytes, or null if a value is refused. */
function fragment(...parts: (string | null)[]): Uint8Array | null {
  const buf = new Uint8Array(parts.reduce((n, p) => n + (p?.length ?? 4) + 2, 0));
  let off = 0;
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i]!;
    if (i % 2 === 0) off = copy(buf, off, ascii(p));
    else if (p === null) off = copy(buf, off, NULL);
    else {
      off = quoted(buf, off, p);
      if (off < 0) return null;
    }
  }
  return buf.slice(0, off);
}

function copy(buf: Uint8Array, off: number, bytes: Uint8Array): number {
  buf.set(bytes, off);
  return off + bytes.length;
}

/** The decimal digits of a whole number 0 <= k < 1e16. */
function digits(buf: Uint8Array, off: number, k: number): number {
  let p = 1;
  while (p * 10 <= k) p *= 10;
  for (; p >= 1; p /= 10) {
    const d = Math.floor(k / p);
    buf[off++] = 48 + d;
    k -= d * p;
  }
  return off;
}

/**
 * Writes access lines straight into a buffer: the line `accessLine(time, f)` makes, with no string
 * built. The parts made of fields that take few values are kept as bytes: the route and method (with
 * the keys around them), the principal, credential kind and key; the line's head with its time, per
 * millisecond.
 */
export class AccessLineEncoder {
  private readonly routes = new Fragments();
  private readonly callers = new Fragments();
  private time = '';
  private head: Uint8Array = NULL;

  /**
   * The line at `off` in `buf` (which has ENCODE_ROOM bytes free there). Returns the offset after it,
   * or -1 (nothing of use written) for a line it does not write the same: a value that needs escaping
   * or holds a key secret's prefix, a status or duration that is not a whole number (of microseconds),
   * values longer than MOST_VALUE_CHARS. The caller then writes `accessLine`'s string (redacted).
   */
  encode(buf: Uint8Array, off: number, time: string, f: AccessFields): number {
    const { route, method, principal_id, credential_kind, key_id, request_id: rid, trace_id: trace, status } = f;
    const chars =
      time.length + route.length + method.length + (principal_id?.length ?? 0) + (credential_kind?.length ?? 0) + (key_id?.length ?? 0);
    if (chars + (rid?.length ?? 0) + (trace?.length ?? 0) > MOST_VALUE_CHARS) return -1;
    if (!Number.isInteger(status) || status < 0 || status >= 1e15) return -1;
    const us = Math.round(f.duration_ms * 1000);
    if (us / 1000 !== f.duration_ms || us < 0 || us > 1e15) return -1;
    let at = this.routes.get(route, method, null);
    if (at === undefined) at = this.routes.set(route, method, null, fragment(',"route":', route, ',"method":', method, ',"status":'));
    let by = this.callers.get(principal_id, credential_kind, key_id);
    if (by === undefined) {
      const bytes = fragment(',"principal_id":', principal_id, ',"credential_kind":', credential_kind, ',"key_id":', key_id);
      by = this.callers.set(principal_id, credential_kind, key_id, bytes);
    }
    if (at === null || by === null) return -1;
    if (time !== this.time) {
      // A new millisecond (isoTime gives the same string within one): the line's head again.
      this.time = time;
      this.head = ascii(`{"level":30${time}`);
    }
    off = copy(buf, copy(buf, off, this.head), REQUEST_ID);
    off = rid === null ? copy(buf, off, NULL) : quoted(buf, off, rid);
    if (off < 0) return -1;
    off = digits(buf, copy(buf, off, at), status);
    // As millis writes it: the whole milliseconds, then the fraction's digits without trailing zeros.
    off = digits(buf, copy(buf, off, DURATION), Math.floor(us / 1000));
    let frac = us % 1000;
    if (frac !== 0) {
      buf[off++] = 46; // '.'
      for (let p = 100; frac !== 0; p /= 10) {
        const d = Math.floor(frac / p);
        buf[off++] = 48 + d;
        frac -= d * p;
      }
    }
    off = copy(buf, off, by);
    if (trace !== undefined) {
      off = quoted(buf, copy(buf, off, TRACE_ID), trace);
      if (off < 0) return -1;
    }
    return copy(buf, off, TAIL);
  }
}
