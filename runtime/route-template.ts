/**
 * The route template a request matched (e.g. `/api/public/v1/admin/principals/:id`),
 * as the access logs and the metrics name requests: never the raw path, which may
 * carry identifiers a log should not keep.
 */
import type { Context } from 'hono';
import { matchedRoutes } from 'hono/route';

/** The label of a request no route matched (unknown paths are not labels: they are unbounded). */
export const UNMATCHED_ROUTE = '(unmatched)';

/** The template of the route that answered, or UNMATCHED_ROUTE. */
export function routeTemplate(c: Context): string {
  const routes = matchedRoutes(c);
  // Middleware is mounted for every method (ALL); the route itself names its method.
  for (let i = routes.length - 1; i >= 0; i--) {
    const r = routes[i]!;
    if (r.method !== 'ALL') return r.path;
  }
  return UNMATCHED_ROUTE;
}
