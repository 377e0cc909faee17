/**
 * The Hono application: request context, the gateway's gates in the spec's
 * order (rate budget 429, authentication 401, then per route authorization
 * 403/404 and the credential's rpm 429), every module's routes, and the
 * envelope for every error.
 *
 * Two gates judge the shape of a request body before any route sees it: the
 * size limit (`bodyLimitBytes`) and the nesting limit (`jsonMaxDepth`): a
 * body nested deeper is refused with 400 `too_deep` before anything parses
 * it, so no recursive code (validation, canonical hashing, storage) ever
 * meets it.
 */
import { OpenAPIHono } from '@hono/zod-openapi';
import type { MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { ServiceError } from '../core/errors.ts';
import type { AppEnv, CellCore } from './context.ts';
import type { CellModule } from './module.ts';
import { authenticate } from './http/authenticate.ts';
import { CredentialLimits, bodyTooLarge, requestContext, type SharedBuckets } from '../runtime/gateway.ts';
import { errorHandler, onNotFound, validationError } from './http/errors.ts';
import { gatewayRateLimit } from './http/rate-limit.ts';
import { accessLog } from './http/access-log.ts';
import type { CellMetrics } from './ops/metrics.ts';

/** Paths under /api/public/v1 that need no credential (discovery documents). */
export const PUBLIC_API_PATHS: readonly string[] = ['/api/public/v1/openapi.json', '/api/public/v1/docs'];

/**
 * `sharedBuckets`: where the per-credential rpm buckets live when the cell
 * serves with a group (the IAM module's, in the store); absent: in memory.
 * `metrics`: the cell's metrics, which the access log records every request in.
 */
export function createApp(
  core: CellCore,
  modules: readonly CellModule[],
  opts: { sharedBuckets?: SharedBuckets; metrics: CellMetrics },
): OpenAPIHono<AppEnv> {
  const { metrics } = opts;
  const limits = new CredentialLimits(core.clock, opts.sharedBuckets);
  const authenticators = modules.flatMap((m) => m.authenticators ?? []);
  const app = new OpenAPIHono<AppEnv>({
    defaultHook: (result) => {
      if (!result.success) throw validationError(result.error);
    },
  });

  // Outermost: times and logs every answer, refusals by the gates below included.
  app.use('*', accessLog({ log: core.log, metrics, traces: core.traces }));
  app.use('*', requestContext<AppEnv>());
  app.use('*', async function credentialLimits(c, next) {
    c.set('credentialLimits', limits);
    await next();
  });
  app.use('*', gatewayRateLimit({ ...core.config.rate, clock: core.clock, trustedProxies: core.config.trustedProxies }));
  const limitBody = bodyLimit({
    maxSize: core.config.bodyLimitBytes,
    onError: () => {
      throw bodyTooLarge(core.config.bodyLimitBytes);
    },
  });
  // GET and HEAD carry no body; asking for one would make @hono/node-server
  // build a full Request object on the hot read path.
  app.use('*', function bodyLimitUnlessRead(c, next) {
    return c.req.method === 'GET' || c.req.method === 'HEAD' ? next() : limitBody(c, next);
  });
  const authn = authenticate(authenticators);
  app.use('/api/public/v1/*', async function protectedApi(c, next) {
    if (PUBLIC_API_PATHS.some((p) => c.req.path === p || c.req.path.startsWith(p + '/'))) return next();
    return authn(c, next);
  });
  // After authentication, so an anonymous caller learns nothing but 401.
  app.use('*', jsonDepthLimit(core.config.jsonMaxDepth));

  app.openAPIRegistry.registerComponent('securitySchemes', 'bearerAuth', {
    type: 'http',
    scheme: 'bearer',
    description: 'An API key (`svck_live_...`) or an OAuth access token.',
  });
  app.openAPIRegistry.registerComponent('securitySchemes', 'dpop', {
    type: 'http',
    scheme: 'DPoP',
    description: 'A DPoP-bound OAuth access token (RFC 9449) with a `DPoP` proof header.',
  });

  for (const m of modules) m.routes?.(app);

  app.onError(errorHandler(core.log));
  app.notFound(onNotFound);
  return app;
}

/** Form bodies are not JSON: their brackets are data, and the OAuth endpoints parse them. */
const FORM_TYPES = new Set(['application/x-www-form-urlencoded', 'multipart/form-data']);

/**
 * Refuses a request body nested deeper than `maxDepth` arrays and objects
 * (400 invalid_request, `details.reason = too_deep`). Every body but a form is
 * read as text (Hono keeps it, so the route's own JSON parse reads the same
 * text) and scanned once, left to right, counting brackets outside strings:
 * linear, no recursion, whatever the content type says (some routes parse
 * text/plain bodies as JSON).
 */
export function jsonDepthLimit(maxDepth: number): MiddlewareHandler<AppEnv> {
  if (!Number.isInteger(maxDepth) || maxDepth < 1) throw new TypeError('jsonMaxDepth must be a positive integer');
  return async function jsonDepth(c, next) {
    if (c.req.method === 'GET' || c.req.method === 'HEAD' || !c.req.raw.body) return next();
    const type = (c.req.header('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
    if (FORM_TYPES.has(type)) return next();
    if (nestedDeeperThan(await c.req.text(), maxDepth)) {
      throw new ServiceError('invalid_request', `the body is nested deeper than ${maxDepth} levels`, {
        details: { reason: 'too_deep', max_depth: maxDepth },
      });
    }
    return next();
  };
}

/** True when JSON text opens more than `max` arrays/objects at once (brackets inside strings do not count). */
export function nestedDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 0x5c)
        i++; // a backslash escapes the next character
      else if (ch === 0x22) inString = false;
    } else if (ch === 0x22) {
      inString = true;
    } else if (ch === 0x5b || ch === 0x7b) {
      if (++depth > max) return true;
    } else if ((ch === 0x5d || ch === 0x7d) && depth > 0) {
      depth--;
    }
  }
  return false;
}
