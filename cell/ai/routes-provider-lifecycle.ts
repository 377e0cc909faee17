/**
 * Routes: changing (PATCH) and deleting model providers (provider-lifecycle.ts).
 * `provider_type` is refused by name (400 immutable_field).
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { PERMISSIONS } from '../../core/permissions.ts';
import type { AppEnv } from '../context.ts';
import { immutableField, refuseImmutable } from '../http/immutable.ts';
import { errorResponses, json, jsonBody, secured } from '../http/openapi.ts';
import { deleteProvider, updateProvider } from './provider-lifecycle.ts';
import { providerView, type AiContext } from './providers.ts';
import { CreateProvider, IdParam, ProviderView } from './routes.ts';

const IMMUTABLE = { provider_type: 'register a new provider of the other type' };
const C = CreateProvider.shape;

const UpdateProvider = z
  .object({
    name: C.name,
    default_model: C.default_model.optional(),
    base_url: C.base_url.unwrap().nullable().optional(),
    api_key_secret_id: C.api_key_secret_id.unwrap().nullable().optional().openapi({
      description: "null unbinds the secret; binding one, or changing base_url while one is bound, needs the caller's right to it",
    }),
    timeout_ms: C.timeout_ms,
    max_retries: C.max_retries,
    stream: C.stream,
    provider_type: immutableField(IMMUTABLE.provider_type),
  })
  .strict()
  .openapi('UpdateModelProvider');

export function providerLifecycleRoutes(app: OpenAPIHono<AppEnv>, ctx: AiContext): void {
  const posture = () => ctx.core.config.posture;
  app.openapi(
    createRoute({
      method: 'patch',
      path: '/api/public/v1/admin/ai/model-providers/{provider_id}',
      tags: ['Model providers'],
      'x-status': 'Live',
      summary:
        "Change a model provider: the posture gate runs again; sending its secret somewhere new needs the caller's right to the secret",
      ...secured(PERMISSIONS.providersWrite),
      request: { params: IdParam, body: jsonBody(UpdateProvider) },
      responses: { 200: json(ProviderView, 'The provider'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const body = c.req.valid('json');
      refuseImmutable(body, IMMUTABLE);
      const p = await updateProvider(ctx, c.get('auth'), c.req.valid('param').provider_id, body);
      return c.json(providerView(posture(), p), 200);
    },
  );
  app.openapi(
    createRoute({
      method: 'delete',
      path: '/api/public/v1/admin/ai/model-providers/{provider_id}',
      tags: ['Model providers'],
      'x-status': 'Live',
      summary: 'Delete a model provider (409 in_use while an agent names it)',
      ...secured(PERMISSIONS.providersWrite),
      request: { params: IdParam },
      responses: { 200: json(ProviderView, 'The provider as it was'), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const p = await deleteProvider(ctx, c.get('auth'), c.req.valid('param').provider_id);
      return c.json(providerView(posture(), p), 200);
    },
  );
}
