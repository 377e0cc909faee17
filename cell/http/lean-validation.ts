/**
 * The query and path-parameter validation of the cell's routes, without the
 * framework's per-request costs (issue 28, bench/RESULTS.md "Gateway hot
 * path"). @hono/zod-openapi puts @hono/zod-validator's middleware in front
 * of every route that declares `request.query` or `request.params`; for
 * those two targets it reads the request's Content-Type (which makes
 * @hono/node-server build a whole WHATWG Request for a GET) and parses
 * asynchronously (three awaits), even for a GET with no query string at all.
 *
 * `leanValidation(app, hook)` makes the app's `openapi()` register the same
 * route (the same OpenAPI document, the same query declaration the
 * unknown-query gate reads) with these two validators replaced by
 * equivalents that give the same data and the same refusals:
 *
 * - the value validated is what the framework's validator would build
 *   (`c.req.queries()` with single values unwrapped; `c.req.param()`);
 * - the schema is parsed synchronously, asynchronously only when it holds
 *   an asynchronous refinement (zod then refuses the synchronous parse);
 * - a failed parse goes to `hook` (the app's defaultHook, which throws the
 *   400 envelope), as before;
 * - an empty query (no `?`, or nothing after it) is parsed once per route,
 *   and the result, when it succeeded and holds only plain values (the
 *   defaults: `limit`, `offset`…), is handed to each such request as a fresh
 *   shallow copy. Query schemas carry constant defaults only (no function
 *   defaults), so the copy is what parsing `{}` again would give.
 *
 * They run where the framework's validators ran: after the route's own
 * middleware (the permission gate), query before params. A route given its
 * own hook keeps the framework's validators.
 */
import { z, type OpenAPIHono } from '@hono/zod-openapi';
import type { Context, MiddlewareHandler, Next } from 'hono';
import type { ZodError, ZodType } from 'zod';
import type { AppEnv } from '../context.ts';

type Parsed = { success: true; data: unknown } | { success: false; error: ZodError };
type Hook = (result: Parsed & { data?: unknown; target: string }, c: Context<AppEnv>) => unknown;

/** A `safeParse` that falls back to `safeParseAsync` for a schema with asynchronous parts (zod throws on the synchronous one). */
function parse(schema: ZodType, value: unknown): Parsed | Promise<Parsed> {
  try {
    return schema.safeParse(value) as Parsed;
  } catch (err) {
    if (err instanceof z.core.$ZodAsyncError) return schema.safeParseAsync(value) as Promise<Parsed>;
    throw err;
  }
}

/** Plain values only (strings, numbers, booleans, null, undefined): a shallow copy is then a full copy. */
function plain(data: unknown): data is Record<string, unknown> {
  if (data === null || typeof data !== 'object' || Array.isArray(data)) return false;
  for (const v of Object.values(data)) if (v !== null && typeof v === 'object') return false;
  return true;
}

/** The query of `c` as @hono/zod-validator builds it: repeated names as arrays, single ones as strings. */
function queryValue(c: Context<AppEnv>): Record<string, string | string[]> {
  return Object.fromEntries(Object.entries(c.req.queries()).map(([k, v]) => (v.length === 1 ? [k, v[0]!] : [k, v])));
}

function validator(target: 'query' | 'param', schema: ZodType, hook: Hook): MiddlewareHandler<AppEnv> {
  /** The parse of an empty query, once: its data when reusable, null when not (then every request parses). */
  let empty: Record<string, unknown> | null | undefined;
  const settle = (c: Context<AppEnv>, value: unknown, result: Parsed, next: Next): Promise<Response | undefined> => {
    // The hook sees what @hono/zod-validator gives it; the app's defaultHook throws the 400 on a failure.
    const answered = hook({ data: value, ...result, target }, c);
    if (answered instanceof Response) return Promise.resolve(answered);
    if (!result.success) return Promise.resolve(c.json(result, 400));
    (c.req.addValidatedData as (t: string, d: unknown) => void)(target, result.data);
    return next() as Promise<undefined>;
  };
  return function leanValidator(c, next) {
    let value: unknown;
    if (target === 'query') {
      const url = c.req.url;
      const q = url.indexOf('?');
      if (q < 0 || q === url.length - 1) {
        if (empty === undefined) {
          const first = parse(schema, {});
          empty = !(first instanceof Promise) && first.success && plain(first.data) ? first.data : null;
        }
        if (empty) {
          (c.req.addValidatedData as (t: string, d: unknown) => void)(target, { ...empty });
          return next();
        }
        value = {};
      } else value = queryValue(c);
    } else value = c.req.param();
    const result = parse(schema, value);
    if (result instanceof Promise) return result.then((r) => settle(c, value, r, next));
    return settle(c, value, result, next);
  };
}

/** Makes `app.openapi()` register routes with the lean query and parameter validators (see the module header). */
export function leanValidation(app: OpenAPIHono<AppEnv>, hook: Hook): void {
  const original = app.openapi.bind(app);
  type Route = Parameters<typeof original>[0];
  const lean = (route: Route, handler: Parameters<typeof original>[1], routeHook?: Parameters<typeof original>[2]) => {
    const request = route.request;
    if (routeHook || (!request?.query && !request?.params)) return original(route, handler, routeHook);
    const { middleware, hide, ...doc } = route;
    // The route as declared goes into the OpenAPI registry; the framework then mounts it without the two validators.
    if (!hide) app.openAPIRegistry.registerPath(doc as Parameters<typeof app.openAPIRegistry.registerPath>[0]);
    const own = middleware ? (Array.isArray(middleware) ? middleware : [middleware]) : [];
    const validators = [
      ...(request.query ? [validator('query', request.query as ZodType, hook)] : []),
      ...(request.params ? [validator('param', request.params as ZodType, hook)] : []),
    ];
    const mounted = {
      ...route,
      hide: true,
      request: { ...request, query: undefined, params: undefined },
      middleware: [...own, ...validators],
    };
    return original(mounted as Route, handler);
  };
  // `openapi` is an instance property of OpenAPIHono (an arrow function); its typed overloads stay the caller's view.
  (app as unknown as { openapi: typeof lean }).openapi = lean;
}
