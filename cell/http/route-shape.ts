/**
 * Two refusals every route gets from the route layer, not from its own code
 * (issue 25):
 *
 * - a known path asked with a method it does not serve: `405
 *   method_not_allowed` with `Allow` (and `details.allowed`), instead of 404;
 * - a query parameter the route does not declare (its `request.query` in the
 *   OpenAPI registry): `400 invalid_request`, `details.reason:
 *   unknown_query_parameter`, `details.parameters` naming them (never their
 *   values). Only under the protected API prefix: the OAuth endpoints ignore
 *   parameters they do not know, as RFC 6749 §3.1 requires. A route whose
 *   query schema has no plain shape (a refined object) is not judged.
 *
 * Both read the routes once, at the first request, when every module has
 * mounted its own.
 */
import type { Context, NotFoundHandler } from 'hono';
import type { OpenAPIHono } from '@hono/zod-openapi';
import { routeTemplate, UNMATCHED_ROUTE } from '../../runtime/route-template.ts';
import { ServiceError } from '../../core/errors.ts';
import type { AppEnv } from '../context.ts';

const PROTECTED_PREFIX = '/api/public/v1/';

/** A Hono path (`/a/:id`, `/a/:id{[0-9]+}`, `/a/*`) as a RegExp over the whole path. */
function pathRegExp(path: string): RegExp {
  let re = '';
  for (const seg of path.split('/').slice(1)) {
    re += '/';
    const param = /^:[^{]+(?:\{(.+)\})?(\?)?$/.exec(seg);
    if (param) re += param[1] ? `(?:${param[1]})` : '[^/]+';
    else if (seg === '*') re += '.*';
    else re += seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${re === '/' ? '/' : re}/?$`);
}

/** The not-found handler: 405 with `Allow` when another method serves the path, else `fallback`. */
export function methodNotAllowed(app: OpenAPIHono<AppEnv>, fallback: NotFoundHandler<AppEnv>): NotFoundHandler<AppEnv> {
  let table: { re: RegExp; method: string }[] | null = null;
  return async function notFoundOr405(c) {
    table ??= app.routes.filter((r) => r.method !== 'ALL' && r.path !== '/*').map((r) => ({ re: pathRegExp(r.path), method: r.method }));
    const allowed = new Set(table.filter((r) => r.re.test(c.req.path)).map((r) => r.method));
    if (allowed.size === 0) return fallback(c);
    if (allowed.has('GET')) allowed.add('HEAD');
    const list = [...allowed].sort();
    const err = new ServiceError('method_not_allowed', `${c.req.method} is not served on this path; it serves ${list.join(', ')}`, {
      details: { reason: 'method_not_allowed', allowed: list },
    });
    return c.json(err.toEnvelope(), 405, { Allow: list.join(', ') });
  };
}

/** Refuses (throws) query parameters the matched route does not declare (see the module header); the cell's gateway calls it before the route. */
export function unknownQueryStep(app: OpenAPIHono<AppEnv>): (c: Context<AppEnv>) => void {
  let declared: Map<string, ReadonlySet<string> | null> | null = null;
  return function unknownQuery(c) {
    const q = c.req.url.indexOf('?');
    if (q < 0 || q === c.req.url.length - 1 || !c.req.path.startsWith(PROTECTED_PREFIX)) return;
    declared ??= declaredQueries(app);
    const template = routeTemplate(c);
    if (template === UNMATCHED_ROUTE) return;
    const known = declared.get(`${c.req.method} ${template}`);
    if (known === undefined || known === null) return;
    const unknown = [...new Set(new URLSearchParams(c.req.url.slice(q + 1)).keys())].filter((k) => !known.has(k));
    if (unknown.length === 0) return;
    throw new ServiceError(
      'invalid_request',
      `unknown query parameter${unknown.length > 1 ? 's' : ''}: ${unknown.slice(0, 20).join(', ')}`,
      {
        details: { reason: 'unknown_query_parameter', parameters: unknown.slice(0, 20), allowed: [...known].sort() },
      },
    );
  };
}

/** `METHOD /hono/:path` → the query names the route declares (empty: none), null when its schema has no plain shape. */
function declaredQueries(app: OpenAPIHono<AppEnv>): Map<string, ReadonlySet<string> | null> {
  const out = new Map<string, ReadonlySet<string> | null>();
  for (const d of app.openAPIRegistry.definitions) {
    if (d.type !== 'route') continue;
    const path = d.route.path.replace(/\{([^}]+)\}/g, ':$1');
    const query = d.route.request?.query as { shape?: Record<string, unknown> } | undefined;
    const names = query === undefined ? new Set<string>() : query.shape ? new Set(Object.keys(query.shape)) : null;
    out.set(`${d.route.method.toUpperCase()} ${path}`, names);
  }
  return out;
}
