/**
 * The Hono application: request context, the gateway's gates in the spec's
 * order (rate budget 429, authentication 401, then per route authorization
 * 403/404 and the credential's rpm 429), every module's routes, and the
 * envelope for every error.
 */
import { OpenAPIHono } from '@hono/zod-openapi';
import { bodyLimit } from 'hono/body-limit';
import { ServiceError } from '../core/errors.ts';
import type { AppEnv, CellCore } from './context.ts';
import type { CellModule } from './module.ts';
import { authenticate } from './http/authenticate.ts';
import { CredentialLimits } from './http/credential-limits.ts';
import { errorHandler, onNotFound, validationError } from './http/errors.ts';
import { gatewayRateLimit } from './http/rate-limit.ts';

/** Paths under /api/public/v1 that need no credential (discovery documents). */
export const PUBLIC_API_PATHS: readonly string[] = ['/api/public/v1/openapi.json', '/api/public/v1/docs'];

export function createApp(core: CellCore, modules: readonly CellModule[]): OpenAPIHono<AppEnv> {
  const limits = new CredentialLimits(core.clock);
  const authenticators = modules.flatMap((m) => m.authenticators ?? []);
  const app = new OpenAPIHono<AppEnv>({
    defaultHook: (result) => {
      if (!result.success) throw validationError(result.error);
    },
  });

  app.use('*', async function requestContext(c, next) {
    c.set('requestId', crypto.randomUUID());
    c.set('credentialLimits', limits);
    await next();
    c.res.headers.set('X-Request-Id', c.get('requestId'));
  });
  app.use('*', gatewayRateLimit({ ...core.config.rate, clock: core.clock, trustedProxies: core.config.trustedProxies }));
  const limitBody = bodyLimit({
    maxSize: core.config.bodyLimitBytes,
    onError: () => { throw new ServiceError('invalid_request', 'request body too large', { details: { reason: 'body_too_large', limit_bytes: core.config.bodyLimitBytes } }); },
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

  app.openAPIRegistry.registerComponent('securitySchemes', 'bearerAuth', {
    type: 'http', scheme: 'bearer',
    description: 'An API key (`svck_live_...`) or an OAuth access token.',
  });
  app.openAPIRegistry.registerComponent('securitySchemes', 'dpop', {
    type: 'http', scheme: 'DPoP',
    description: 'A DPoP-bound OAuth access token (RFC 9449) with a `DPoP` proof header.',
  });

  for (const m of modules) m.routes?.(app);

  app.onError(errorHandler(core.log));
  app.notFound(onNotFound);
  return app;
}
