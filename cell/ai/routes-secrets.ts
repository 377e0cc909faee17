/**
 * The life of a stored provider secret after `POST /admin/secrets`: list and
 * get its metadata (never the value), rotate the value, delete it.
 *
 * Authority (docs/security.md, "stored secrets"): reading metadata needs
 * `secrets.read` (ids, names, creators and times are no secret: providers
 * show the id too). Replacing or deleting a value changes what providers
 * send, so it needs `secrets.write` and the same right as binding the secret
 * to a provider, the right to act on a credential (cell/iam/iam.ts
 * `assertMayActOnCredential`): its creator's own credential holding
 * `secrets.write`, or `secrets.use` and managing the creator (403
 * `wider_than_caller`, audited). A secret a
 * provider still sends is not deleted (409 `secret_in_use`, naming them).
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { conflict, notFound } from '../../core/errors.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import type { AppEnv, AuthContext } from '../context.ts';
import { isoTime, isoTimeOrNull } from '../../core/iso-time.ts';
import { IsoTime, errorResponses, json, jsonBody, listSchema, pageOf, pageQuery, secured, viewsWithMany } from '../http/openapi.ts';
import type { Tools } from '../tools/api.ts';
import type { AiContext } from './providers.ts';
import {
  countSecrets,
  deleteSecret,
  listSecretMeta,
  providersBySecret,
  providersUsingSecret,
  resealSecret,
  secretMeta,
  type SecretMeta,
} from './repository.ts';
import { secretFacts, SECRET_USE_RESOLUTION_MS } from './secrets.ts';

const P = '/api/public/v1/admin/secrets';
const TAG = 'Secrets';

const SecretView = z
  .object({
    secret_id: z.string(),
    name: z.string(),
    created_at: IsoTime,
    created_by: z.string(),
    rotated_at: IsoTime.nullable().openapi({ description: 'When the value was last replaced; null: never' }),
    last_used_at: IsoTime.nullable().openapi({
      description: `When a provider call last opened the value (to within ${SECRET_USE_RESOLUTION_MS / 1000} s); null: never`,
    }),
    provider_ids: z.array(z.string()).openapi({ description: 'Model providers that send this secret' }),
  })
  .openapi('Secret');

const SecretId = z.object({
  secret_id: z
    .string()
    .regex(/^sec_[0-9a-f]{20}$/)
    .openapi({ param: { name: 'secret_id', in: 'path' } }),
});

const RotateSecret = z
  .object({
    value: z.string().min(1).max(8192).openapi({ description: 'The new value; never returned, never logged' }),
  })
  .strict()
  .openapi('RotateSecret');

type View = z.infer<typeof SecretView>;

function secretView(s: SecretMeta, providerIds: readonly string[]): View {
  return {
    secret_id: s.secret_id,
    name: s.name,
    created_at: isoTime(s.created_at),
    created_by: s.created_by,
    rotated_at: isoTimeOrNull(s.rotated_at),
    last_used_at: isoTimeOrNull(s.last_used_at),
    provider_ids: [...providerIds],
  };
}

export function secretRoutes(app: OpenAPIHono<AppEnv>, ctx: AiContext, tools: Tools): void {
  const { core, iam } = ctx;
  const { store, clock } = core;

  /** The secret's metadata, or 404. */
  const metaOr404 = async (id: string) => {
    const s = await secretMeta(store, id);
    if (!s) throw notFound('secret');
    return s;
  };

  /** Replacing or deleting a value needs the right to act on it (cell/ai/secrets.ts `secretFacts`), as binding it does. */
  const assertMayManage = (auth: AuthContext, s: SecretMeta, action: string) =>
    iam.assertMayActOnCredential(auth, secretFacts(s.secret_id, s.created_by, auth.principal.id), action);

  app.openapi(
    createRoute({
      method: 'get',
      path: P,
      tags: [TAG],
      'x-status': 'Live',
      summary: 'List stored secrets, oldest first: metadata only, never a value',
      ...secured(PERMISSIONS.secretsRead),
      request: { query: pageQuery(100, 1000) },
      responses: {
        200: json(listSchema('secrets', SecretView, 'SecretList'), 'Secrets'),
        ...errorResponses(400, 401, 403),
      },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const page = await listSecretMeta(store, q.limit, q.offset);
      const secrets = await viewsWithMany(
        page,
        (s) => s.secret_id,
        (ids) => providersBySecret(store, ids),
        secretView,
      );
      return c.json({ secrets, ...pageOf(q, await countSecrets(store)) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/{secret_id}`,
      tags: [TAG],
      'x-status': 'Live',
      summary: "A stored secret's metadata (never its value)",
      ...secured(PERMISSIONS.secretsRead),
      request: { params: SecretId },
      responses: { 200: json(SecretView, 'The secret'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const s = await metaOr404(c.req.valid('param').secret_id);
      return c.json(secretView(s, await providersUsingSecret(store, s.secret_id)), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: `${P}/{secret_id}/rotate`,
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Replace the value: providers send the new one from their next call; the old one is gone',
      description:
        'Needs secrets.write, and the right to act on the secret: its creator, or secrets.use and managing the creator (else 403 `wider_than_caller`).',
      ...secured(PERMISSIONS.secretsWrite),
      request: { params: SecretId, body: jsonBody(RotateSecret) },
      responses: { 200: json(SecretView, 'The secret after the rotation (never its value)'), ...errorResponses(400, 401, 403, 404, 503) },
    }),
    async (c) => {
      const auth = c.get('auth');
      const s = await metaOr404(c.req.valid('param').secret_id);
      await assertMayManage(auth, s, 'secret.rotate');
      // Sealing is random: before the transaction, which may run more than once. Same id, so the same AAD.
      const sealed = ctx.custody.seal(s.secret_id, c.req.valid('json').value);
      const at = clock.now();
      await store.write(async (tx) => {
        // A group's secrets are sealed with one key: refused when the store's check no longer opens under this cell's.
        await ctx.custody.assertKeyMatchesTx(tx);
        if (!(await secretMeta(tx, s.secret_id))) throw notFound('secret');
        await resealSecret(tx, s.secret_id, sealed, at);
        await iam.audit(tx, { at, actor: auth.principal.id, action: 'secret.rotate', target: s.secret_id, outcome: 'ok' });
      });
      return c.json(secretView({ ...s, rotated_at: at }, await providersUsingSecret(store, s.secret_id)), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: `${P}/{secret_id}`,
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Delete a secret no provider sends',
      description:
        'Refused with 409 `secret_in_use` while a model provider or a catalog source sends it (`details.providers`, `details.sources` name them). Needs secrets.write, and the right to act on the secret: its creator, or secrets.use and managing the creator (else 403 `wider_than_caller`).',
      ...secured(PERMISSIONS.secretsWrite),
      request: { params: SecretId },
      responses: { 200: json(SecretView, 'The secret as it was (never its value)'), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const auth = c.get('auth');
      const s = await metaOr404(c.req.valid('param').secret_id);
      await assertMayManage(auth, s, 'secret.delete');
      const last = await store.write(async (tx) => {
        const now = await secretMeta(tx, s.secret_id);
        if (!now) throw notFound('secret');
        const providers = await providersUsingSecret(tx, s.secret_id);
        if (providers.length > 0)
          throw conflict(`the secret is sent by ${providers.length} model provider(s); change or delete them first`, {
            reason: 'secret_in_use',
            providers,
          });
        const sources = await tools.sourcesUsingSecret(tx, s.secret_id);
        if (sources.length > 0)
          throw conflict(`the secret is the client secret of ${sources.length} catalog source(s); change or delete them first`, {
            reason: 'secret_in_use',
            sources,
          });
        await deleteSecret(tx, s.secret_id);
        await iam.audit(tx, { actor: auth.principal.id, action: 'secret.delete', target: s.secret_id, outcome: 'ok' });
        return now;
      });
      return c.json(secretView(last, []), 200);
    },
  );
}
