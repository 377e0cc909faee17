/**
 * Admin surface of the authorization server: client registration
 * (`POST/GET /api/public/v1/admin/oauth/clients`), signing key rotation, and
 * scoped access tokens (`POST /api/public/v1/admin/sats`).
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { isSelector, normalize, selectorsSubset } from '../../core/authority/scopes.ts';
import { conflict, forbidden, invalid, unauthorized } from '../../core/errors.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import type { AppEnv, AuthContext } from '../context.ts';
import { IsoTime, errorResponses, json, jsonBody, listSchema, pageOf, pageQuery, secured } from '../http/openapi.ts';
import { hashSecret } from '../../core/apikey/hash.ts';
import type { Iam } from '../iam/api.ts';
import { newId } from '../ids.ts';
import {
  AUTH_METHODS,
  clientView,
  takesBuiltInName,
  GRANT_CLIENT_CREDENTIALS,
  GRANT_REFRESH_TOKEN,
  GRANT_TOKEN_EXCHANGE,
  GRANT_TYPES,
  type ClientRecord,
} from './clients.ts';
import { issueAccessToken, randomToken } from './issue.ts';
import type { OAuthContext } from './oauth-context.ts';
import { countClients, insertClient, listClients } from './repository.ts';
import { audienceFor } from './resource.ts';
import { OAUTH } from './settings.ts';

const Selector = z.string().refine(isSelector, 'not a permission selector');

const RegisterClient = z
  .object({
    name: z.string().min(1).max(100),
    grant_types: z.array(z.enum(GRANT_TYPES)).min(1).max(GRANT_TYPES.length).default([GRANT_CLIENT_CREDENTIALS]),
    token_endpoint_auth_method: z.enum(AUTH_METHODS).default('client_secret_basic'),
    redirect_uris: z.array(z.string().url().max(2000)).max(10).default([]),
    scope: z
      .array(Selector)
      .min(1)
      .max(64)
      .openapi({ description: "Permission selectors this client may ever receive; within the caller's own authority" }),
    subject_id: z
      .string()
      .max(64)
      .optional()
      .openapi({ description: 'client_credentials: the principal tokens are issued to (default: the caller)' }),
    tls_client_auth_subject_dn: z
      .string()
      .max(500)
      .optional()
      .openapi({ description: 'tls_client_auth: the certificate subject DN, e.g. CN=robot' }),
  })
  .strict()
  .openapi('RegisterOAuthClient');

export const ClientView = z
  .object({
    client_id: z.string(),
    name: z.string(),
    token_endpoint_auth_method: z.string(),
    redirect_uris: z.array(z.string()),
    grant_types: z.array(z.string()),
    scope: z.array(z.string()),
    subject_id: z.string().nullable(),
    tls_client_auth_subject_dn: z.string().nullable(),
    created_at: IsoTime,
    created_by: z.string(),
    root: z.string().nullable().openapi({
      description:
        'The API key that registered the client for itself (`api_key:<id>`): the client is capped by it and stops with it; null otherwise',
    }),
    client_secret: z.string().optional().openapi({ description: 'Shown only in the registration response' }),
  })
  .openapi('OAuthClient');

/** An OAuth client as the API shows it (`clientView` builds it). */
export type OAuthClientView = z.infer<typeof ClientView>;

const MintSat = z
  .object({
    scope: z.array(Selector).min(1).max(32).openapi({
      description: "Permission selectors (e.g. `agent_teams.read`); `*` is refused; must be within the caller's effective authority",
    }),
    ttl_seconds: z.number().int().min(1).max(OAUTH.satMaxTtlSeconds).default(OAUTH.satDefaultTtlSeconds),
    purpose: z.string().max(200).optional(),
    resource: z
      .string()
      .max(200)
      .optional()
      .openapi({ description: "RFC 8707 resource: `edge:<device_id>` for a SAT that device honours offline; default the cell's own API" }),
    may_act: z.string().min(1).max(64).optional().openapi({
      description: 'RFC 8693 §4.4: the one principal that may act for the caller with this SAT at the token exchange (claim `may_act.sub`)',
    }),
  })
  .strict()
  .openapi('MintSat');

const SatView = z
  .object({
    access_token: z.string(),
    token_type: z.literal('Bearer'),
    expires_in: z.number(),
    scope: z.string(),
    jti: z.string(),
  })
  .openapi('Sat');

async function visiblePrincipalOrUndefined(iam: Iam, auth: AuthContext, id: string) {
  try {
    return await iam.visiblePrincipal(auth, id);
  } catch {
    return undefined;
  }
}

export function adminRoutes(app: OpenAPIHono<AppEnv>, ctx: OAuthContext): void {
  const { core, iam } = ctx;
  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/public/v1/admin/oauth/clients',
      tags: ['OAuth'],
      'x-status': 'Live',
      summary: 'Register an OAuth client; its secret is shown once',
      ...secured(PERMISSIONS.oauthClientsWrite),
      request: { body: jsonBody(RegisterClient) },
      responses: {
        201: json(ClientView, 'The client, with client_secret for confidential clients'),
        ...errorResponses(400, 401, 403, 404, 409),
      },
    }),
    async (c) => {
      const auth = c.get('auth');
      await iam.assertNotDelegated(auth, { action: 'oauth.client.register', target: auth.principal.id });
      const b = c.req.valid('json');
      const scope = normalize(b.scope);
      // A client named like one of the cell's own (the console) would borrow its trust on the consent screen.
      if (await takesBuiltInName(ctx, b.name)) {
        throw conflict(`'${b.name}' is the name of a built-in client`, { reason: 'builtin_client_name' });
      }
      const needsRedirect = b.grant_types.includes('authorization_code');
      if (b.grant_types.includes(GRANT_REFRESH_TOKEN) && !needsRedirect)
        throw invalid('refresh_token follows an authorization code: register authorization_code too');
      if (needsRedirect && b.redirect_uris.length === 0) throw invalid('authorization_code clients need redirect_uris');
      for (const u of b.redirect_uris) {
        if (u.includes('#')) throw invalid('redirect_uris must not contain a fragment');
        if (/^(javascript|data|file|vbscript|blob):/i.test(u)) throw invalid('redirect_uris must be http(s) or an app scheme');
      }
      if (b.token_endpoint_auth_method === 'none' && b.grant_types.includes(GRANT_CLIENT_CREDENTIALS))
        throw invalid('public clients cannot use client_credentials');
      if (b.token_endpoint_auth_method === 'none' && b.grant_types.includes(GRANT_TOKEN_EXCHANGE))
        throw invalid('public clients cannot use token exchange: the client is the actor, and must prove it');
      if (b.token_endpoint_auth_method === 'tls_client_auth' && !b.tls_client_auth_subject_dn)
        throw invalid('tls_client_auth needs tls_client_auth_subject_dn');
      if (b.token_endpoint_auth_method === 'tls_client_auth' && !core.config.clientCertificates)
        throw invalid('this cell verifies no client certificates (serve --client-ca): a tls_client_auth client could never authenticate', {
          reason: 'mtls_unavailable',
        });
      // Tokens of this client act as its subject: the caller itself, or a principal the caller manages
      // (holds all of its authority). Its scope is bounded by both the caller and the subject.
      const subjectId = b.subject_id ?? auth.principal.id;
      const subject =
        subjectId === auth.principal.id ? await iam.principal(subjectId) : await visiblePrincipalOrUndefined(iam, auth, subjectId);
      if (subject?.status !== 'active')
        throw invalid('subject_id is not an active principal the caller can see', { reason: 'unknown_subject' });
      if (subject.id !== auth.principal.id) await iam.assertManages(auth, subject, 'oauth.client.register');
      await iam.assertWithinCaller(auth, { permissions: scope }, { action: 'oauth.client.register', target: subject.id });
      if (!selectorsSubset(scope, await iam.permissionsOf(subject))) {
        throw invalid("scope must be within the subject's own permissions", { reason: 'scope_exceeds_subject' });
      }
      const secret =
        b.token_endpoint_auth_method === 'client_secret_basic' || b.token_endpoint_auth_method === 'client_secret_post'
          ? `ocs_${randomToken(32)}`
          : null;
      const client: ClientRecord = {
        client_id: newId('ocl'),
        name: b.name,
        secret_hash: secret ? hashSecret(secret) : null,
        auth_method: b.token_endpoint_auth_method,
        redirect_uris: b.redirect_uris,
        grant_types: b.grant_types,
        scope,
        subject_id: subjectId,
        tls_subject_dn: b.tls_client_auth_subject_dn ?? null,
        created_at: core.clock.now(),
        created_by: auth.principal.id,
        // Registered for the caller itself with an API key (or anything derived from one): the client lives and is
        // capped with that key. A client for another principal the caller manages is that principal's, as keys are.
        root: subject.id === auth.principal.id && auth.credential.root.startsWith('api_key:') ? auth.credential.root : null,
      };
      await core.store.write(async (tx) => {
        await insertClient(tx, client);
        await iam.audit(tx, {
          at: client.created_at,
          actor: auth.principal.id,
          action: 'oauth.client.register',
          target: client.client_id,
          outcome: 'ok',
          details: { grant_types: b.grant_types, scope, ...(client.root ? { root: client.root } : {}) },
        });
      });
      return c.json(clientView(client, secret ?? undefined), 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/public/v1/admin/oauth/clients',
      tags: ['OAuth'],
      'x-status': 'Live',
      summary: 'List OAuth clients, oldest first (no secrets)',
      ...secured(PERMISSIONS.oauthClientsRead),
      request: { query: pageQuery(100, 1000) },
      responses: {
        200: json(listSchema('clients', ClientView, 'OAuthClientList'), 'Clients'),
        ...errorResponses(400, 401, 403),
      },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const clients = (await listClients(core.store, q.limit, q.offset)).map((r) => clientView(r));
      return c.json({ clients, ...pageOf(q, await countClients(core.store)) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/public/v1/admin/oauth/signing-keys/rotate',
      tags: ['OAuth'],
      'x-status': 'Live',
      summary: 'Rotate the token signing key; the previous key stays published until tokens it signed have expired',
      ...secured(PERMISSIONS.oauthClientsWrite),
      responses: {
        200: json(z.object({ kid: z.string(), published: z.array(z.string()) }).openapi('SigningKeyRotation'), 'The new active key id'),
        ...errorResponses(401, 403),
      },
    }),
    async (c) => {
      const auth = c.get('auth');
      const kid = await ctx.keys.rotate();
      await iam.auditNow({ actor: auth.principal.id, action: 'oauth.signing_key.rotate', target: kid, outcome: 'ok' });
      return c.json({ kid, published: ctx.keys.current().published.map((k) => k.kid) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/public/v1/admin/sats',
      tags: ['Scoped access tokens'],
      'x-status': 'Live',
      summary: 'Mint a scoped access token (SAT) for the caller: short-lived, narrowed to the given scope',
      ...secured(PERMISSIONS.satsWrite),
      request: { body: jsonBody(MintSat) },
      responses: { 201: json(SatView, 'The SAT; shown once'), ...errorResponses(400, 401, 403) },
    }),
    async (c) => {
      const auth = c.get('auth');
      const b = c.req.valid('json');
      const scope = normalize(b.scope);
      // A SAT of a delegated token would speak for the subject without its actors: exchange again instead.
      await iam.assertNotDelegated(auth, { action: 'oauth.sat.mint', target: auth.principal.id });
      const audience = b.resource === undefined ? undefined : await audienceFor(ctx, b.resource);
      if (audience === null)
        throw invalid("resource must be this cell's API or edge:<device_id> of a registered device", { reason: 'invalid_target' });
      if (scope.includes('*')) throw invalid('a SAT names the permissions it needs; `*` is refused', { reason: 'wildcard_scope' });
      // may_act names the one principal that may act with the SAT: an active principal of this cell.
      if (b.may_act !== undefined && (await iam.principal(b.may_act))?.status !== 'active')
        throw invalid('may_act names no active principal of this cell', { reason: 'unknown_actor', field: 'may_act' });
      await iam.assertWithinCaller(auth, { permissions: scope }, { action: 'oauth.sat.mint', target: auth.principal.id });
      const p = await iam.principal(auth.principal.id);
      // The gateway authenticated this principal a moment ago; only a purge racing this request removes it.
      if (!p) throw unauthorized('the calling principal no longer exists');
      // Bounded by what the caller's credential may do now (a SAT minted with a SAT stays inside it).
      const held = await iam.permissionsOf(p);
      const effectiveScope = scope.filter((s) => selectorsSubset([s], held));
      if (effectiveScope.length === 0) throw forbidden("no requested scope is within the caller's roles", { reason: 'wider_than_caller' });
      const { token, claims, expiresIn } = await issueAccessToken(ctx, {
        subject: p.id,
        clientId: `sat:${auth.credential.type}:${auth.credential.id}`,
        scope: effectiveScope,
        ttlSeconds: b.ttl_seconds,
        sat: true,
        // Revoking or throttling the credential this SAT derives from (and its own root) applies to the SAT.
        root: auth.credential.root,
        ...(audience !== undefined ? { audience } : {}),
        ...(b.may_act !== undefined ? { mayAct: b.may_act } : {}),
      });
      await iam.auditNow({
        actor: p.id,
        action: 'oauth.sat.mint',
        target: claims.jti,
        outcome: 'ok',
        details: { scope: claims.scope, exp: claims.exp, ...(b.purpose ? { purpose: b.purpose } : {}) },
      });
      return c.json(
        { access_token: token, token_type: 'Bearer' as const, expires_in: expiresIn, scope: claims.scope, jti: claims.jti },
        201,
      );
    },
  );
}
