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
import type { Context } from 'hono';
import type { AppEnv, CellCore } from './context.ts';
import type { CellModule } from './module.ts';
import { CredentialLimits, type SharedBuckets } from '../runtime/gateway.ts';
import { errorHandler, onNotFound, validationError } from './http/errors.ts';
import { methodNotAllowed } from './http/route-shape.ts';
import { cellGateway } from './http/gateway.ts';
import { leanValidation } from './http/lean-validation.ts';
import { oauth2Scheme } from './http/openapi.ts';
import type { CellMetrics } from './ops/metrics.ts';
import { installNativeSha256 } from '../runtime/native-hash.ts';

/** Paths under /api/public/v1 that need no credential (discovery documents). */
export const PUBLIC_API_PATHS: readonly string[] = ['/api/public/v1/openapi.json', '/api/public/v1/docs'];

/** Paths outside /api/public/v1 that need a credential as the API does: the MCP endpoint (cell/mcp). */
export const PROTECTED_PATHS: readonly string[] = ['/mcp'];

/**
 * `sharedBuckets`: where the per-credential rpm buckets live when the cell
 * serves with a group (the IAM module's, in the store); absent: in memory.
 * `metrics`: the cell's metrics, which the access log records every request in.
 * `challenge`: the WWW-Authenticate of a 401 for a request (the OAuth module's, naming the
 * protected resource metadata of what was asked).
 */
export function createApp(
  core: CellCore,
  modules: readonly CellModule[],
  opts: { sharedBuckets?: SharedBuckets; metrics: CellMetrics; challenge?: (c: Context<AppEnv>) => string },
): OpenAPIHono<AppEnv> {
  const { metrics } = opts;
  // Every hash of the cell (journal records, blobs, content hashes) through node:crypto: same bytes, less CPU.
  installNativeSha256();
  const limits = new CredentialLimits(core.clock, opts.sharedBuckets);
  const authenticators = modules.flatMap((m) => m.authenticators ?? []);
  const defaultHook = (result: { success: boolean; error?: unknown }) => {
    if (!result.success) throw validationError(result.error as Parameters<typeof validationError>[0]);
  };
  const app = new OpenAPIHono<AppEnv>({ defaultHook });
  // Query and path parameters validated without the framework's per-request costs (same data, same refusals).
  leanValidation(app, defaultHook);

  // The gateway's gates, in the spec's order, in one middleware (cell/http/gateway.ts): the access log
  // and metrics, request id, rate budget, body limit, authentication under the API prefix (but for
  // PUBLIC_API_PATHS), the JSON body gate (after authentication, so an anonymous caller learns
  // nothing but 401) and the unknown-query gate.
  const onError = errorHandler(core.log, opts.challenge);
  app.use(
    '*',
    cellGateway(core, { app, metrics, limits, authenticators, publicPaths: PUBLIC_API_PATHS, protectedPaths: PROTECTED_PATHS, onError }),
  );

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
  app.openAPIRegistry.registerComponent('securitySchemes', 'oauth2', oauth2Scheme());

  for (const m of modules) m.routes?.(app);

  app.onError(onError);
  app.notFound(methodNotAllowed(app, onNotFound));
  return app;
}
