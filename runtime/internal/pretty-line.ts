/**
 * The line `--log-format pretty` prints, as pino-pretty's `messageFormat`:
 * `2026-11-23T22:11:31.041Z INFO  request GET /api/… 200 1.2ms request_id=… principal_id=…`,
 * the access log's fields first, the rest as key=value (nulls left out).
 */

/** pino's level numbers and their names (the JSON lines carry the numbers). */
const LABELS: Readonly<Record<number, string>> = { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' };

/** Formats one parsed JSON log line (pino-pretty gives it already parsed and redacted). */
export function prettyLine(log: Record<string, unknown>): string {
  const { level, time, msg, method, route, status, duration_ms, ...rest } = log;
  const label = typeof level === 'number' ? (LABELS[level] ?? String(level)) : String(level);
  const head = [String(time), label.toUpperCase().padEnd(5), String(msg ?? '')];
  if (method !== undefined) head.push(String(method), String(route), String(status), `${String(duration_ms)}ms`);
  for (const [k, v] of Object.entries(rest)) {
    if (v === null || v === undefined) continue;
    head.push(`${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`);
  }
  return head.join(' ');
}
