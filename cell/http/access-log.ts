/**
 * The outermost part of the cell's gateway (cell/http/gateway.ts): times
 * every request, runs it in the caller's trace, counts it in the cell's
 * metrics (route template, method, status; 429s by the gate that refused
 * them) and writes one access-log line for it. The line names the request
 * id (the `X-Request-Id` the answer carries), the route template (never the
 * raw path: it may carry identifiers a log should not keep), the principal,
 * the credential kind and the API key id behind the credential; never a
 * secret, token or body.
 */
import type { Context } from 'hono';
import { isServiceError } from '../../core/errors.ts';
import type { AccessFields } from '../../runtime/log.ts';
import type { AppEnv, Logger } from '../context.ts';
import type { CellMetrics } from '../ops/api.ts';
import { parseTraceparent, type RequestTraces, type Trace } from './trace.ts';
import { routeTemplate, UNMATCHED_ROUTE } from '../../runtime/route-template.ts';

/** The access log and metrics of the cell's gateway (cell/http/gateway.ts runs the request between `traceOf` and `done`). */
export interface AccessLog {
  /** The caller's trace (a valid `traceparent`), or null. */
  traceOf(c: Context<AppEnv>): Trace | null;
  /**
   * Whether the request must run through `traced`: it carries a trace, or
   * spans are exported. Else the gateway runs it directly (no closure, no
   * AsyncLocalStorage).
   */
  needsTrace(trace: Trace | null): boolean;
  /**
   * Runs the request inside the caller's trace, so everything it starts
   * (model calls, runs) can name it; with spans exported, inside the
   * request's span (a new trace when no header came). Resolves to the trace
   * id the line names.
   */
  traced(c: Context<AppEnv>, trace: Trace | null, run: () => Promise<void>): Promise<string | undefined>;
  /** Counts the answered request (refusals by the gates included) in the metrics and writes its line. */
  done(c: Context<AppEnv>, start: number, traceId: string | undefined): void;
}

export function accessLog(opts: { log: Logger; metrics: CellMetrics; traces: RequestTraces }): AccessLog {
  const { log, metrics, traces } = opts;
  return {
    traceOf: (c) => parseTraceparent(traceparentHeader(c)),
    needsTrace: (trace) => trace !== null || traces.spans,
    async traced(c, trace, run) {
      if (traces.spans) return trace ? traces.run(trace, () => requestSpan(traces, c, run)) : requestSpan(traces, c, run);
      if (trace) await traces.run(trace, run);
      else await run();
      return trace?.traceId;
    },
    done(c, start, traceId) {
      const seconds = (performance.now() - start) / 1000;
      const route = routeTemplate(c);
      const status = c.res.status;
      metrics.request(route, c.req.method, status, seconds);
      if (status === 429) metrics.rateLimitRefusals.inc({ gate: refusingGate(c.error) });
      if (isServiceError(c.error) && (status < 500 || status === 503)) {
        const reason = c.error.details?.['reason'];
        metrics.refusals.inc({ code: c.error.code, reason: typeof reason === 'string' ? reason : '' });
      }
      if (log.enabled?.('info') === false) return;
      const auth = c.get('auth') as AppEnv['Variables']['auth'] | undefined;
      const root = auth?.credential.root;
      // The line's time is the logger's; undefined fields are left out, nulls kept.
      const fields: AccessFields = {
        request_id: c.get('requestId') ?? null,
        route,
        method: c.req.method,
        status,
        duration_ms: Math.round(seconds * 1e6) / 1000,
        principal_id: auth?.principal.id ?? null,
        credential_kind: auth?.credential.type ?? null,
        key_id: root?.startsWith('api_key:') ? root.slice('api_key:'.length) : null,
        trace_id: traceId,
      };
      if (log.request) log.request(fields);
      else log.info('request', fields);
    },
  };
}

/**
 * The `traceparent` header. Served by @hono/node-server, read from
 * node:http's parsed headers (repeated headers joined with ", " as the Fetch
 * API joins them, which parseTraceparent refuses either way): reading it
 * through the Request would build a WHATWG Headers view per request for this
 * one header. In process, through the Request.
 */
function traceparentHeader(c: Context<AppEnv>): string | undefined {
  const headers = c.env?.incoming?.headers;
  if (headers) {
    const v = headers['traceparent'];
    return typeof v === 'string' ? v : undefined;
  }
  return c.req.header('traceparent');
}

/** The methods the HTTP conventions name (RFC 9110, RFC 5789, the QUERY draft); any other is `_OTHER`. */
const KNOWN_METHODS = new Set(['CONNECT', 'DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT', 'QUERY', 'TRACE']);

/**
 * The request's span (OpenTelemetry HTTP server conventions), child of the
 * caller's `traceparent` when it sent one: method (`_OTHER` and
 * `http.request.method_original` for a method the conventions do not name),
 * `url.scheme`, route template and status; `{method} {route}`, or `{method}`
 * alone (and no `http.route`) when no route matched. Never the path, the
 * query, a header or a body.
 */
function requestSpan(traces: RequestTraces, c: Context<AppEnv>, next: () => Promise<void>): Promise<string | undefined> {
  const original = c.req.method;
  const method = KNOWN_METHODS.has(original) ? original : '_OTHER';
  const attributes = {
    'http.request.method': method,
    'http.request.method_original': method === original ? undefined : original,
    'url.scheme': c.req.url.startsWith('https:') ? 'https' : 'http',
  };
  return traces.span(method === '_OTHER' ? 'HTTP' : method, { kind: 'server', attributes }, async (s) => {
    const traceId = traces.current()?.traceId;
    await next();
    const route = routeTemplate(c);
    const status = c.res.status;
    s.set({ 'http.response.status_code': status, 'agent_cell.request_id': c.get('requestId') });
    // The span's name is the route template once it is known (the conventions' `{method} {route}`); an unmatched
    // request has no route (its path is not a name: it is unbounded), so it keeps the method alone.
    if (route !== UNMATCHED_ROUTE) {
      s.set({ 'http.route': route });
      s.rename(`${method === '_OTHER' ? 'HTTP' : method} ${route}`);
    }
    if (status >= 500) s.fail(String(status));
    return traceId;
  });
}

/** Which gate refused a 429: its RateLimit-Policy header names it (`"gateway";q=…`). */
function refusingGate(err: unknown): string {
  const policy = isServiceError(err) ? err.headers?.['RateLimit-Policy'] : undefined;
  return /^"([a-z_-]+)"/.exec(policy ?? '')?.[1] ?? 'other';
}
