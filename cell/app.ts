/**
 * The Hono application: request context, the gateway's gates in the spec's
 * order (rate budget 429, authentication 401, then per route authorization
 * 403/404 and the credential's rpm 429), every module's routes, and the
 * envelope for every error.
 *
 * Two gates judge the shape of a request body before any route sees it: the
 * size limit (`bodyLimitBytes`) and the JSON body gate (runtime/json-body.ts):
 * a body nested deeper than `jsonMaxDepth`, or with a key twice in one object,
 * is refused with 400 before anything parses it.
 */
import { OpenAPIHono } from '@hono/zod-openapi';
import { bodyLimit } from 'hono/body-limit';
import type { AppEnv, CellCore } from './context.ts';
import type { CellModule } from './module.ts';
import { authenticate } from './http/authenticate.ts';
import { CredentialLimits, bodyTooLarge, requestContext, type SharedBuckets } from '../runtime/gateway.ts';
import { declaredBodyLength, jsonBodyGate } from '../runtime/json-body.ts';
import { errorHandler, onNotFound, validationError } from './http/errors.ts';
import { methodNotAllowed, unknownQueryGate } from './http/route-shape.ts';
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
  // build a full Request object on the hot read path. A declared length is
  // judged from node:http's headers, as bodyLimit itself would judge it, for
  // the same reason; the body is then read once, directly, by whoever parses it.
  app.use('*', function bodyLimitUnlessRead(c, next) {
    if (c.req.method === 'GET' || c.req.method === 'HEAD') return next();
    const declared = declaredBodyLength(c);
    if (declared === undefined) return limitBody(c, next);
    if (declared > core.config.bodyLimitBytes) throw bodyTooLarge(core.config.bodyLimitBytes);
    return next();
  });
  const authn = authenticate(authenticators);
  app.use('/api/public/v1/*', async function protectedApi(c, next) {
    if (PUBLIC_API_PATHS.some((p) => c.req.path === p || c.req.path.startsWith(p + '/'))) return next();
    return authn(c, next);
  });
  // After authentication, so an anonymous caller learns nothing but 401.
  app.use('*', jsonBodyGate<AppEnv>(core.config.jsonMaxDepth));
  app.use('/api/public/v1/*', unknownQueryGate(app));

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
  app.notFound(methodNotAllowed(app, onNotFound));
  return app;
}
