/**
 * The access-log line (docs/operations.md) serialised by a fixed-shape
 * template instead of pino's generic walk: one per request, so its cost is
 * the access log's cost (issue 28). The bytes are the ones pino writes for
 * `info('request', fields)` with runtime/log.ts's options: `level`, `time`,
 * the fields in this order (an undefined `trace_id` left out, nulls kept),
 * then `msg` (test/runtime/log.test.ts compares the two).
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
    `{"level":"info"${time},"request_id":${str(f.request_id)},"route":${known(f.route)},"method":${known(f.method)},` +
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
