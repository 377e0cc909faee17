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

/** A finite number as JSON writes it; pino writes `null` for NaN and the infinities. */
function num(n: number): string {
  return Number.isFinite(n) ? String(n) : 'null';
}

/** The JSON line (with its newline) for `fields`; `time` is pino's `,"time":"<ISO>"` fragment. */
export function accessLine(time: string, f: AccessFields): string {
  const trace = f.trace_id === undefined ? '' : `,"trace_id":${str(f.trace_id)}`;
  return (
    `{"level":"info"${time},"request_id":${str(f.request_id)},"route":${str(f.route)},"method":${str(f.method)},` +
    `"status":${num(f.status)},"duration_ms":${num(f.duration_ms)},"principal_id":${str(f.principal_id)},` +
    `"credential_kind":${str(f.credential_kind)},"key_id":${str(f.key_id)}${trace},"msg":"request"}\n`
  );
}

/** Whether a value of `f` holds an API key secret's prefix (then the line goes through redactLine): a scan of each short value, not of the line. */
export function mayHoldKeySecret(f: AccessFields): boolean {
  const has = (s: string | null | undefined) => s?.includes('svck_live_') === true;
  return (
    has(f.request_id) || has(f.route) || has(f.method) || has(f.principal_id) || has(f.credential_kind) || has(f.key_id) || has(f.trace_id)
  );
}
