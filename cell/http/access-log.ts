/**
 * The outermost middleware: times every request, counts it in the cell's
 * metrics (route template, method, status; 429s by the gate that refused
 * them) and writes one access-log line for it. The line names the request
 * id (the `X-Request-Id` the answer carries), the route template (never the
 * raw path: it may carry identifiers a log should not keep), the principal,
 * the credential kind and the API key id behind the credential; never a
 * secret, token or body.
 */
import type { Context, MiddlewareHandler } from 'hono';
import { isServiceError } from '../../core/errors.ts';
import type { AccessFields } from '../../runtime/log.ts';
import type { AppEnv, Logger } from '../context.ts';
import type { CellMetrics } from '../ops/metrics.ts';
import { parseTraceparent, type RequestTraces } from './trace.ts';
import { routeTemplate } from '../../runtime/route-template.ts';

export function accessLog(opts: { log: Logger; metrics: CellMetrics; traces: RequestTraces }): MiddlewareHandler<AppEnv> {
  const { log, metrics, traces } = opts;
  return async function accessLog(c, next) {
    const start = performance.now();
    const trace = parseTraceparent(c.req.header('traceparent'));
    // Inside the caller's trace, everything this request starts (model calls, runs) can name it.
    // With spans exported, the line names the trace of the request's span (a new one when no header came).
    let traceId = trace?.traceId;
    if (traces.spans) traceId = await (trace ? traces.run(trace, () => requestSpan(traces, c, next)) : requestSpan(traces, c, next));
    else await (trace ? traces.run(trace, next) : next());
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
  };
}

/**
 * The request's span (OpenTelemetry HTTP server conventions), child of the
 * caller's `traceparent` when it sent one: method, route template and status;
 * never the path, the query, a header or a body.
 */
function requestSpan(traces: RequestTraces, c: Context<AppEnv>, next: () => Promise<void>): Promise<string | undefined> {
  const method = c.req.method;
  return traces.span(method, { kind: 'server', attributes: { 'http.request.method': method } }, async (s) => {
    const traceId = traces.current()?.traceId;
    await next();
    const route = routeTemplate(c);
    const status = c.res.status;
    s.set({ 'http.route': route, 'http.response.status_code': status, 'agent_cell.request_id': c.get('requestId') });
    // The span's name is the route template once it is known (the conventions' `{method} {route}`).
    s.rename(`${method} ${route}`);
    if (status >= 500) s.fail(String(status));
    return traceId;
  });
}

/** Which gate refused a 429: its RateLimit-Policy header names it (`"gateway";q=…`). */
function refusingGate(err: unknown): string {
  const policy = isServiceError(err) ? err.headers?.['RateLimit-Policy'] : undefined;
  return /^"([a-z_-]+)"/.exec(policy ?? '')?.[1] ?? 'other';
}
