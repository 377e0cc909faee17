/**
 * Routes of the AI surface: secrets (write-only), model providers, agent
 * runtimes and the tool registry.
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { PERMISSIONS } from '../../core/permissions.ts';
import { notFound } from '../../core/errors.ts';
import type { AppEnv } from '../context.ts';
import { isoTime } from '../../core/iso-time.ts';
import { IsoTime, errorResponses, json, jsonBody, listSchema, pageOf, pageQuery, secured, slicePage } from '../http/openapi.ts';
import type { Tools } from '../tools/api.ts';
import type { Ai } from './api.ts';
import { PROVIDER_TYPES } from './posture.ts';
import { providerView, registerProvider, type AiContext } from './providers.ts';
import { countProviders, insertSecret } from './repository.ts';
import { prepareSecret } from './secrets.ts';

const P = '/api/public/v1/admin';

const CreateSecret = z
  .object({
    name: z
      .string()
      .min(1)
      .max(100)
      .regex(/^[A-Za-z0-9._-]+$/)
      .openapi({ description: 'A label for operators; not secret' }),
    value: z.string().min(1).max(8192).openapi({ description: 'The secret value; never returned, never logged' }),
  })
  .strict()
  .openapi('CreateSecret');

const SecretCreated = z.object({ secret_id: z.string(), name: z.string(), created_at: IsoTime }).openapi('SecretCreated');

export const CreateProvider = z
  .object({
    provider_type: z
      .string()
      .min(1)
      .max(64)
      .openapi({ description: `One of ${PROVIDER_TYPES.join(', ')}` }),
    default_model: z.string().min(1).max(200),
    base_url: z
      .string()
      .min(1)
      .max(2048)
      .optional()
      .openapi({ description: 'openai-compatible: the API base, e.g. http://127.0.0.1:11434/v1' }),
    api_key_secret_id: z
      .string()
      .regex(/^sec_[0-9a-f]{20}$/)
      .optional()
      .openapi({ description: 'A secret stored with POST /admin/secrets; a raw key is never accepted' }),
    name: z.string().min(1).max(100).optional(),
    timeout_ms: z.number().int().min(100).max(600_000).optional().openapi({ description: 'Per-call timeout (default 60000)' }),
    max_retries: z.number().int().min(0).max(5).optional().openapi({ description: 'Retries on 429/5xx/network errors (default 2)' }),
    stream: z
      .boolean()
      .optional()
      .openapi({ description: 'openai-compatible: ask for streamed answers (assembled before use); default false' }),
  })
  .strict()
  .openapi('CreateModelProvider');

export const ProviderView = z
  .object({
    provider_id: z.string(),
    name: z.string(),
    provider_type: z.string(),
    default_model: z.string(),
    base_url: z.string().nullable(),
    api_key_secret_id: z.string().nullable(),
    timeout_ms: z.number(),
    max_retries: z.number(),
    stream: z.boolean(),
    posture: z.object({ posture: z.string(), allowed: z.boolean(), rule: z.string() }),
    created_at: IsoTime,
    created_by: z.string(),
    updated_at: IsoTime,
    secret_bound_by: z.string().nullable().openapi({
      description: 'Whose right to the secret every call checks (who last chose base_url and secret together); null without a secret',
    }),
  })
  .openapi('ModelProvider');

const Runtime = z
  .object({
    runtime: z.string(),
    provider_type: z.string(),
    available: z.boolean(),
    protocol: z.string(),
    streaming: z.boolean(),
    tool_calls: z.boolean().openapi({ description: "True when the runtime's models answer with tool calls" }),
    tool_choice: z
      .array(z.enum(['auto', 'none', 'required', 'named']))
      .openapi({ description: 'The billet tool_choice values it honours (named: one named tool)' }),
    constrained_tool_calls: z
      .boolean()
      .openapi({ description: "True when its tool calls always parse: generated under a grammar of the tool's JSON schema" }),
  })
  .openapi('AgentRuntime');

const Tool = z
  .object({
    name: z.string(),
    description: z.string(),
    side_effects: z.boolean(),
    read_only: z.boolean(),
    idempotent: z.union([z.boolean(), z.object({ argument: z.string(), values: z.array(z.string()) })]).openapi({
      description:
        'Which calls of a side-effecting tool are issued again with their effect key after a lost outcome: all (true), none (false), or those whose argument is one of the values',
    }),
    parameters: z.record(z.string(), z.unknown()),
    source: z.string().optional().openapi({ description: 'An imported tool: the catalog source it comes from' }),
    pin: z.string().optional().openapi({ description: 'An imported tool: the pin (sha256:) of its reviewed definition' }),
  })
  .openapi('Tool');

export const IdParam = z.object({
  provider_id: z
    .string()
    .max(64)
    .openapi({ param: { name: 'provider_id', in: 'path' } }),
});

export function aiRoutes(app: OpenAPIHono<AppEnv>, ctx: AiContext, ai: Ai, tools: Tools): void {
  const { core, iam } = ctx;
  app.openapi(
    createRoute({
      method: 'post',
      path: `${P}/secrets`,
      tags: ['Secrets'],
      'x-status': 'Live',
      summary: 'Store a secret (AES-256-GCM at rest); returns its id, never its value',
      ...secured(PERMISSIONS.secretsWrite),
      request: { body: jsonBody(CreateSecret) },
      responses: { 201: json(SecretCreated, 'The secret id'), ...errorResponses(400, 401, 403, 503) },
    }),
    async (c) => {
      const auth = c.get('auth');
      const body = c.req.valid('json');
      const { secretId, sealed } = prepareSecret(ctx.custody.key(), body.value);
      const at = core.clock.now();
      await core.store.write(async (tx) => {
        // The group's secrets are sealed with one key: refused when the store's check no longer opens under this cell's.
        await ctx.custody.assertKeyMatchesTx(tx);
        await insertSecret(tx, { secretId, name: body.name, sealed, at, by: auth.principal.id });
        await iam.audit(tx, {
          at,
          actor: auth.principal.id,
          action: 'secret.create',
          target: secretId,
          outcome: 'ok',
          details: { name: body.name },
        });
      });
      return c.json({ secret_id: secretId, name: body.name, created_at: isoTime(at) }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: `${P}/ai/model-providers`,
      tags: ['Model providers'],
      'x-status': 'Live',
      summary: 'Register a model provider (the posture allow-gate runs first, fail-closed)',
      ...secured(PERMISSIONS.providersWrite),
      request: { body: jsonBody(CreateProvider) },
      responses: { 201: json(ProviderView, 'The registered provider'), ...errorResponses(400, 401, 403) },
    }),
    async (c) => {
      const auth = c.get('auth');
      const body = c.req.valid('json');
      const p = await registerProvider(ctx, auth, body);
      return c.json(providerView(core.config.posture, p), 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/ai/model-providers`,
      tags: ['Model providers'],
      'x-status': 'Live',
      summary: 'List model providers with their standing under the current posture',
      ...secured(PERMISSIONS.providersRead),
      request: { query: pageQuery(100, 1000) },
      responses: {
        200: json(listSchema('providers', ProviderView, 'ModelProviderList'), 'Providers'),
        ...errorResponses(400, 401, 403),
      },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const providers = (await ai.providers(q.limit, q.offset)).map((p) => providerView(core.config.posture, p));
      return c.json({ providers, ...pageOf(q, await countProviders(core.store)) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/ai/model-providers/{provider_id}`,
      tags: ['Model providers'],
      'x-status': 'Live',
      summary: 'Get a model provider',
      ...secured(PERMISSIONS.providersRead),
      request: { params: IdParam },
      responses: { 200: json(ProviderView, 'The provider'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const p = await ai.provider(c.req.valid('param').provider_id);
      if (!p) throw notFound('model provider');
      return c.json(providerView(core.config.posture, p), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/ai/agent-runtimes`,
      tags: ['Model providers'],
      'x-status': 'Live',
      summary: 'Agent runtimes this cell can run',
      ...secured(PERMISSIONS.providersRead),
      request: { query: pageQuery(100, 1000) },
      responses: {
        200: json(listSchema('runtimes', Runtime, 'AgentRuntimeList'), 'Runtimes'),
        ...errorResponses(400, 401, 403),
      },
    }),
    (c) => {
      const q = c.req.valid('query');
      const { items, total } = slicePage(ai.runtimes(), q);
      return c.json({ runtimes: items, ...pageOf(q, total) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/ai/tool-registry`,
      tags: ['Model providers'],
      'x-status': 'Live',
      summary: 'The governed tool catalog',
      ...secured(PERMISSIONS.catalogRead),
      request: { query: pageQuery(100, 1000) },
      responses: { 200: json(listSchema('tools', Tool, 'ToolRegistry'), 'Tools'), ...errorResponses(400, 401, 403) },
    }),
    (c) => {
      const q = c.req.valid('query');
      const all = tools.registry();
      // The catalog is static: a page that holds all of it splices the JSON serialised once.
      if (q.offset === 0 && q.limit >= all.length)
        return c.body(`{"tools":${tools.registryJson()},"limit":${q.limit},"offset":0,"total":${all.length}}`, 200, {
          'content-type': 'application/json',
        }) as never;
      const { items, total } = slicePage(all, q);
      return c.json({ tools: items, ...pageOf(q, total) }, 200);
    },
  );
}
