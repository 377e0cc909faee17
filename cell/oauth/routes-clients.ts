/**
 * The life of a registered OAuth client after registration: get one, rotate
 * its secret (shown once), delete it.
 *
 * Rotating hands out a secret that obtains the client's tokens; deleting
 * takes them away from whoever holds them. Both need what registering it
 * needed (docs/security.md, "Authority containment"): the caller manages
 * the client's subject (holds all of its authority) unless the subject is
 * the caller, and holds the client's whole scope: one containment check,
 * so a narrow credential can neither take over nor lock out a wider client.
 * Built-in clients (the console's) are the cell's own: 409 `builtin_client`.
 *
 * Deleting a client removes its pending authorization and device codes and
 * its refresh tokens in the same transaction; the tokens it was issued stop
 * verifying at once, on the bearer path and in introspection, because the
 * one token judge asks whether the client still exists (core/tokens/judge.ts
 * `clientExists`, through the client cache every write to oauth_clients
 * empties).
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { hashSecret } from '../../core/apikey/hash.ts';
import { conflict, notFound } from '../../core/errors.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import type { AppEnv, AuthContext } from '../context.ts';
import { errorResponses, json, secured } from '../http/openapi.ts';
import { clientView, type ClientRecord } from './clients.ts';
import { randomToken } from './issue.ts';
import type { OAuthContext } from './oauth-context.ts';
import { clientById, deleteClient, setClientSecretHash } from './repository.ts';
import { ClientView } from './routes-admin.ts';

const P = '/api/public/v1/admin/oauth/clients';

/** Who registered the built-in clients (cell/oauth/builtin-clients.ts). */
const SYSTEM = 'system';

const ClientId = z.object({
  client_id: z
    .string()
    .regex(/^[A-Za-z0-9._:-]{1,200}$/)
    .openapi({ param: { name: 'client_id', in: 'path' }, example: 'ocl_0123456789abcdef0123' }),
});

const ClientWithSecret = ClientView.extend({
  client_secret: z.string().openapi({ description: 'The new secret: shown once, now. Only its SHA-256 is stored.' }),
}).openapi('OAuthClientWithSecret');

/** An OAuth client with its new secret, shown once. */
export type OAuthClientWithSecretView = z.infer<typeof ClientWithSecret>;

export function clientRoutes(app: OpenAPIHono<AppEnv>, ctx: OAuthContext): void {
  const { core, iam } = ctx;

  const clientOr404 = async (id: string): Promise<ClientRecord> => {
    const client = await clientById(core.store, id);
    if (!client) throw notFound('OAuth client');
    return client;
  };

  /** Refuses a built-in client, then anything the caller could not have registered itself. */
  const assertMayManage = async (auth: AuthContext, client: ClientRecord, action: string) => {
    if (client.created_by === SYSTEM) throw conflict("a built-in client is the cell's own", { reason: 'builtin_client' });
    await iam.assertMayActOnCredential(
      auth,
      { kind: 'oauth_client', id: client.client_id, ownerId: client.subject_id, authority: { permissions: client.scope } },
      action,
    );
  };

  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/{client_id}`,
      tags: ['OAuth'],
      'x-status': 'Live',
      summary: 'Get an OAuth client (never its secret)',
      ...secured(PERMISSIONS.oauthClientsRead),
      request: { params: ClientId },
      responses: { 200: json(ClientView, 'The client'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => c.json(clientView(await clientOr404(c.req.valid('param').client_id)), 200),
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: `${P}/{client_id}/rotate`,
      tags: ['OAuth'],
      'x-status': 'Live',
      summary: 'Rotate the client secret: the new one is shown once, the old one stops at once',
      description:
        'Only for `client_secret_basic` and `client_secret_post` clients (409 `no_client_secret` otherwise; 409 `builtin_client` for the console). ' +
        "Tokens already issued keep verifying until they expire; delete the client to end them. The caller must manage the client's subject " +
        'and hold its whole scope (403 `wider_than_caller`, audited), as at registration.',
      ...secured(PERMISSIONS.oauthClientsWrite),
      request: { params: ClientId },
      responses: { 200: json(ClientWithSecret, 'The client and its new secret'), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const auth = c.get('auth');
      const client = await clientOr404(c.req.valid('param').client_id);
      await iam.assertNotDelegated(auth, { action: 'oauth.client.rotate', target: client.client_id });
      await assertMayManage(auth, client, 'oauth.client.rotate');
      if (client.auth_method !== 'client_secret_basic' && client.auth_method !== 'client_secret_post')
        throw conflict(`a ${client.auth_method} client has no secret`, { reason: 'no_client_secret' });
      const secret = `ocs_${randomToken(32)}`;
      await core.store.write(async (tx) => {
        if (!(await clientById(tx, client.client_id))) throw notFound('OAuth client');
        await setClientSecretHash(tx, client.client_id, hashSecret(secret));
        await iam.audit(tx, { actor: auth.principal.id, action: 'oauth.client.rotate', target: client.client_id, outcome: 'ok' });
      });
      return c.json(clientView(client, secret), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: `${P}/{client_id}`,
      tags: ['OAuth'],
      'x-status': 'Live',
      summary: 'Delete an OAuth client: its tokens stop verifying at once, its pending codes are gone',
      description:
        'Every access token issued to the client is refused from now on, on the bearer path (401 `revoked`) and in introspection (`{"active":false}`); ' +
        "its unredeemed authorization codes, device codes and refresh tokens are deleted. The caller must manage the client's subject and hold its whole scope " +
        '(403 `wider_than_caller`, audited); built-in clients cannot be deleted (409 `builtin_client`).',
      ...secured(PERMISSIONS.oauthClientsWrite),
      request: { params: ClientId },
      responses: { 200: json(ClientView, 'The client as it was'), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const auth = c.get('auth');
      const client = await clientOr404(c.req.valid('param').client_id);
      await assertMayManage(auth, client, 'oauth.client.delete');
      await core.store.write(async (tx) => {
        if (!(await clientById(tx, client.client_id))) throw notFound('OAuth client');
        const gone = await deleteClient(tx, client.client_id);
        await iam.audit(tx, {
          actor: auth.principal.id,
          action: 'oauth.client.delete',
          target: client.client_id,
          outcome: 'ok',
          details: { codes_deleted: gone.codes, device_codes_deleted: gone.deviceCodes },
        });
      });
      return c.json(clientView(client), 200);
    },
  );
}
