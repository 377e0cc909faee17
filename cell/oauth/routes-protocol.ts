/**
 * The protocol endpoints: token (client_credentials, authorization_code
 * with PKCE, device_code), device authorization, introspection (RFC 7662)
 * and revocation (RFC 7009). Each is a list of small steps: read the form,
 * authenticate the client, check the DPoP proof, run the grant, answer.
 */
import { createRoute, type OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { isTokenError } from '../../core/tokens/errors.ts';
import { looksLikeJwt, verifyAccessToken, type AccessTokenClaims } from '../../core/tokens/access-token.ts';
import type { CellConfig } from '../config.ts';
import type { AppEnv } from '../context.ts';
import { errorResponses } from '../http/openapi.ts';
import {
  authenticateClient,
  clientAuthMethods,
  clientCredentialsSubject,
  GRANT_AUTHORIZATION_CODE,
  GRANT_CLIENT_CREDENTIALS,
  GRANT_DEVICE_CODE,
  GRANT_REFRESH_TOKEN,
  GRANT_TOKEN_EXCHANGE,
  type AuthenticatedClient,
  type AuthMethod,
} from './clients.ts';
import { redeemCode } from './codes.ts';
import { issueRefresh, newFamily, redeemRefresh, REFRESH_PREFIX, revokeRefresh } from './refresh.ts';
import { tokenExchange } from './exchange.ts';
import { pollDeviceCode, startDeviceAuthorization } from './device.ts';
import { checkRequestProof, dpopHeader } from './dpop-check.ts';
import { formBody, mountRaw, readForm } from './form.ts';
import { issueAccessToken } from './issue.ts';
import { isOAuthError, OAuthError, OAuthErrorSchema, oauthErrorResponse, oauthErrorResponses } from './oauth-error.ts';
import { registerClient, registrationBuckets } from './registration.ts';
import type { OAuthContext } from './oauth-context.ts';
import { clientRootPermissions } from './root.ts';
import { narrowScope, parseScope } from './scope.ts';
import { edgeDeviceOf, isProtectedResource, requestedResource } from './resource.ts';
import { publicBase } from './settings.ts';
import { cellTokenJudge, cellTokenJudgeFor } from './authenticator.ts';

const TAG = 'OAuth';
const NO_STORE = { 'Cache-Control': 'no-store', Pragma: 'no-cache' };

const jsonResponse = (description: string) => ({ description, content: { 'application/json': { schema: { type: 'object' as const } } } });

async function protocol(c: Context<AppEnv>, step: () => Promise<Response>): Promise<Response> {
  try {
    return await step();
  } catch (e) {
    if (isOAuthError(e)) return oauthErrorResponse(c, e);
    throw e;
  }
}

const AUTH_TEXT: Record<AuthMethod, string> = {
  client_secret_basic: '`client_secret_basic`: HTTP Basic with the form-urlencoded client_id and client_secret (RFC 6749 §2.3.1)',
  client_secret_post: '`client_secret_post`: client_id and client_secret in the form',
  none: '`none` (a public client): client_id in the form and nothing else',
  tls_client_auth:
    "`tls_client_auth` (RFC 8705): client_id in the form and a client certificate verified against the cell's client CA, whose subject DN is the registered one",
};

/**
 * How a client authenticates at a protocol endpoint, for the curated document:
 * the methods the metadata document names for it (`x-client-authentication`)
 * and what each takes. These endpoints take no bearer credential (no
 * `security`): the client authenticates itself, and a failure is 401
 * `invalid_client` (RFC 6749 §5.2).
 */
function clientAuthentication(config: CellConfig, opts: { publicClients: boolean }) {
  const methods = clientAuthMethods(config).filter((m) => opts.publicClients || m !== 'none');
  return {
    'x-client-authentication': methods,
    description: [
      `Client authentication, one of: ${methods.map((m) => AUTH_TEXT[m]).join('; ')}.`,
      "An API key may stand in for a client secret (basic or post): client_id is then the key's id and its owner the subject.",
      opts.publicClients ? '' : 'Public clients (`none`) are refused.',
      'A client that does not authenticate gets 401 `invalid_client`.',
    ]
      .filter(Boolean)
      .join(' '),
  };
}

/** Form fields of client authentication in the body (`client_secret_post`, `none`, `tls_client_auth`). */
const CLIENT_FIELDS = { client_id: 'client id (in the form unless in the Basic header)', client_secret: 'client_secret_post' };

/** The cnf of a token issued on this request: DPoP key and/or mTLS certificate. */
async function bindingFor(ctx: OAuthContext, c: Context<AppEnv>, ac: AuthenticatedClient): Promise<{ jkt?: string; 'x5t#S256'?: string }> {
  const cnf: { jkt?: string; 'x5t#S256'?: string } = {};
  const proof = dpopHeader(c);
  if (proof !== null) {
    try {
      cnf.jkt = await checkRequestProof(ctx, c, proof);
    } catch (e) {
      if (isTokenError(e)) throw new OAuthError('invalid_dpop_proof', `DPoP proof refused: ${e.code}`);
      throw e;
    }
  }
  if (ac.certThumbprint) cnf['x5t#S256'] = ac.certThumbprint;
  return cnf;
}

interface TokenAnswer {
  subjectId: string;
  clientId: string;
  scope: string[];
  cnf: { jkt?: string; 'x5t#S256'?: string };
  audience: string;
  root?: string | undefined;
  /** Credentials the token also lives with (a refresh family, beside a key root). */
  links?: string[] | undefined;
  refreshToken?: string | undefined;
}

async function answerToken(c: Context<AppEnv>, ctx: OAuthContext, a: TokenAnswer) {
  const { token, claims, expiresIn } = await issueAccessToken(ctx, {
    subject: a.subjectId,
    clientId: a.clientId,
    scope: a.scope,
    cnf: a.cnf,
    audience: a.audience,
    ...(a.root ? { root: a.root } : {}),
    ...(a.links?.length ? { links: a.links } : {}),
  });
  return {
    claims,
    response: c.json(
      {
        access_token: token,
        token_type: a.cnf.jkt ? 'DPoP' : 'Bearer',
        expires_in: expiresIn,
        scope: claims.scope,
        ...(a.refreshToken ? { refresh_token: a.refreshToken } : {}),
      },
      200,
      NO_STORE,
    ),
  };
}

/** The root and links of an access token of a refresh family: the family is its root, or (a key-rooted client) a link. */
function familyCredentials(clientRoot: string | null, family: string): { root: string; links?: string[] } {
  return clientRoot ? { root: clientRoot, links: [`token:${family}`] } : { root: `token:${family}` };
}

async function activeSubject(ctx: OAuthContext, id: string) {
  const p = await ctx.iam.principal(id);
  if (p?.status !== 'active') throw new OAuthError('invalid_grant', 'the subject is no longer active');
  return p;
}

export function protocolRoutes(app: OpenAPIHono<AppEnv>, ctx: OAuthContext): void {
  const { iam } = ctx;
  mountRaw(
    app,
    createRoute({
      method: 'post',
      path: '/oauth/token',
      tags: [TAG],
      'x-status': 'Live',
      summary:
        'Token endpoint: client_credentials, authorization_code (PKCE S256), refresh_token (rotated), device_code, token exchange (RFC 8693); DPoP and mTLS binding',
      ...clientAuthentication(ctx.core.config, { publicClients: true }),
      request: {
        body: formBody(
          {
            grant_type:
              'client_credentials | authorization_code | refresh_token | urn:ietf:params:oauth:grant-type:device_code | urn:ietf:params:oauth:grant-type:token-exchange',
            refresh_token: 'refresh_token: the refresh token (single use; the answer carries the next one)',
            scope: 'space-separated permission selectors',
            code: 'authorization code',
            redirect_uri: 'exact redirect URI',
            code_verifier: 'PKCE verifier',
            device_code: 'device code',
            ...CLIENT_FIELDS,
            resource:
              "RFC 8707: the cell's API (default), its MCP endpoint `<public URL>/mcp`, edge:<device_id> for a token a device honours offline, or a registered protected resource; authorization_code: the resource the authorization request named (default)",
            audience: 'token exchange (RFC 8693): the audience, like resource; one of the two is required',
            subject_token: 'token exchange: an access token (or SAT) of this cell for the subject',
            subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
            actor_token: "token exchange: the actor's access token (default: the client's own principal acts)",
            actor_token_type: 'urn:ietf:params:oauth:token-type:access_token',
            requested_token_type: 'urn:ietf:params:oauth:token-type:access_token (the only one issued)',
          },
          ['grant_type'],
        ),
      },
      responses: { 200: jsonResponse('{access_token, token_type, expires_in, scope}'), ...oauthErrorResponses(), ...errorResponses() },
    }),
    async (c) =>
      protocol(c, async () => {
        const form = await readForm(c);
        const grant = form['grant_type'];
        if (!grant) throw new OAuthError('invalid_request', 'grant_type is required');
        const ac = await authenticateClient(ctx, c, form);
        // A client registered with an API key lives, and is capped, with that key (cell/oauth/root.ts).
        const root = ac.client?.root ?? null;
        const rootCap = root === null ? [] : [await clientRootPermissions(ctx, root)];
        const requested = parseScope(form['scope']);
        const named = await requestedResource(ctx, c);
        const audience = named ?? ctx.audiences.own();
        if (grant === GRANT_CLIENT_CREDENTIALS) {
          const { subject, cap } = await clientCredentialsSubject(ctx, ac);
          const cnf = await bindingFor(ctx, c, ac);
          const scope = narrowScope(requested, cap, await iam.permissionsOf(subject), ...rootCap);
          const keyRoot = ac.apiKey?.credential.root ?? root ?? undefined;
          return (await answerToken(c, ctx, { subjectId: subject.id, clientId: ac.clientId, scope, cnf, audience, root: keyRoot }))
            .response;
        }
        if (grant === GRANT_AUTHORIZATION_CODE) {
          if (!ac.client?.grant_types.includes(GRANT_AUTHORIZATION_CODE))
            throw new OAuthError('unauthorized_client', 'this client may not use authorization_code');
          const cnf = await bindingFor(ctx, c, ac);
          const { grant: g, recordIssued } = await redeemCode(
            ctx,
            form['code'] ?? '',
            ac.clientId,
            form['redirect_uri'],
            form['code_verifier'],
          );
          const subject = await activeSubject(ctx, g.subjectId);
          const scope = narrowScope(requested ?? g.scope, g.scope, await iam.permissionsOf(subject), ...rootCap);
          // RFC 8707 §2.2: the token is for the resource the user consented to; another one is refused.
          if (named !== null && g.resource !== null && named !== g.resource)
            throw new OAuthError('invalid_target', 'the resource differs from the one the authorization request named');
          const aud = named ?? g.resource ?? audience;
          // A client registered for refresh tokens starts a family; its access tokens live with it (root).
          const family = newFamily(ctx, ac.client);
          const lives = family ? familyCredentials(root, family.id) : { root: root ?? undefined };
          const refresh = family
            ? await issueRefresh(ctx, {
                family: family.id,
                familyExpiresAt: family.expiresAt,
                clientId: ac.clientId,
                subjectId: subject.id,
                scope,
                audience: aud,
                jkt: cnf.jkt ?? null,
              })
            : undefined;
          const { claims, response } = await answerToken(c, ctx, {
            subjectId: subject.id,
            clientId: ac.clientId,
            scope,
            cnf,
            audience: aud,
            ...lives,
            refreshToken: refresh,
          });
          await recordIssued(claims.jti, claims.exp, family ? { jti: family.id, exp: Math.ceil(family.expiresAt / 1000) } : undefined);
          return response;
        }
        if (grant === GRANT_REFRESH_TOKEN) {
          if (!ac.client?.grant_types.includes(GRANT_REFRESH_TOKEN))
            throw new OAuthError('unauthorized_client', 'this client may not use refresh tokens');
          const client = ac.client;
          const cnf = await bindingFor(ctx, c, ac);
          let scope: string[] = [];
          const row = await redeemRefresh(ctx, form['refresh_token'] ?? '', ac.clientId, cnf.jkt, async (r) => {
            if (named !== null && named !== r.audience)
              throw new OAuthError('invalid_target', 'a refresh token is for the resource it was issued for');
            const subject = await activeSubject(ctx, r.subject_id);
            scope = narrowScope(requested ?? r.scope, r.scope, await iam.permissionsOf(subject), client.scope, ...rootCap);
          });
          const next = await issueRefresh(ctx, {
            family: row.family,
            familyExpiresAt: row.family_expires_at,
            clientId: ac.clientId,
            subjectId: row.subject_id,
            scope: row.scope,
            audience: row.audience,
            jkt: row.jkt,
          });
          return (
            await answerToken(c, ctx, {
              subjectId: row.subject_id,
              clientId: ac.clientId,
              scope,
              cnf,
              audience: row.audience,
              ...familyCredentials(root, row.family),
              refreshToken: next,
            })
          ).response;
        }
        if (grant === GRANT_DEVICE_CODE) {
          if (!ac.client?.grant_types.includes(GRANT_DEVICE_CODE))
            throw new OAuthError('unauthorized_client', 'this client may not use the device flow');
          const cnf = await bindingFor(ctx, c, ac);
          const g = await pollDeviceCode(ctx, form['device_code'] ?? '', ac.clientId);
          const subject = await activeSubject(ctx, g.subjectId);
          const scope = narrowScope(g.scope, await iam.permissionsOf(subject), ...rootCap);
          return (
            await answerToken(c, ctx, { subjectId: subject.id, clientId: ac.clientId, scope, cnf, audience, root: root ?? undefined })
          ).response;
        }
        if (grant === GRANT_TOKEN_EXCHANGE) {
          const cnf = await bindingFor(ctx, c, ac);
          return tokenExchange(ctx, c, { form, client: ac, cnf, requested, rootCap });
        }
        throw new OAuthError('unsupported_grant_type', 'grant_type not supported');
      }),
  );

  const registrations = registrationBuckets(ctx);
  mountRaw(
    app,
    createRoute({
      method: 'post',
      path: '/oauth/register',
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Dynamic client registration (RFC 7591), on with serve --oauth-dynamic-registration; 404 when off',
      description:
        "No credential: the client registers itself, for the authorization code grant only (and refresh_token), with a scope within the cell's `--oauth-registration-scope`. It holds nothing until a principal consents on the consent page (which names it unverified), then no more than that principal. Redirect URIs are https, or http on a loopback host. Per client IP: a burst of 10, then 10 an hour (429). At most 1000 such clients (403 `registration_limit`). The answer is RFC 7591 §3.2.1, with `client_secret` once for a confidential client.",
      security: [],
      request: {
        body: {
          required: true,
          content: {
            'application/json': {
              schema: {
                type: 'object' as const,
                properties: {
                  redirect_uris: {
                    type: 'array' as const,
                    items: { type: 'string' as const },
                    description: '1 to 10: https, or http on a loopback host',
                  },
                  client_name: { type: 'string' as const, description: 'shown on the consent page, marked unverified' },
                  token_endpoint_auth_method: {
                    type: 'string' as const,
                    description: 'none (default), client_secret_basic, client_secret_post',
                  },
                  grant_types: {
                    type: 'array' as const,
                    items: { type: 'string' as const },
                    description: 'authorization_code (default), refresh_token',
                  },
                  response_types: { type: 'array' as const, items: { type: 'string' as const }, description: 'code' },
                  scope: { type: 'string' as const, description: 'space-separated; narrowed to --oauth-registration-scope' },
                },
                required: ['redirect_uris'],
              },
            },
          },
        },
      },
      responses: {
        201: jsonResponse(
          '{client_id, client_secret?, client_id_issued_at, client_secret_expires_at?, client_name, redirect_uris, grant_types, response_types, token_endpoint_auth_method, scope}',
        ),
        400: {
          description: 'invalid_client_metadata or invalid_redirect_uri (RFC 7591 §3.2.2)',
          content: { 'application/json': { schema: OAuthErrorSchema } },
        },
        ...errorResponses(403, 404),
      },
    }),
    async (c) => protocol(c, () => registerClient(ctx, c, registrations)),
  );

  mountRaw(
    app,
    createRoute({
      method: 'post',
      path: '/oauth/device_authorization',
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Device authorization (RFC 8628): device_code, user_code, verification URI, interval',
      ...clientAuthentication(ctx.core.config, { publicClients: true }),
      request: { body: formBody({ ...CLIENT_FIELDS, scope: 'space-separated permission selectors' }) },
      responses: {
        200: jsonResponse('{device_code, user_code, verification_uri, verification_uri_complete, expires_in, interval}'),
        ...oauthErrorResponses(),
        ...errorResponses(),
      },
    }),
    async (c) =>
      protocol(c, async () => {
        const form = await readForm(c);
        const ac = await authenticateClient(ctx, c, form);
        if (!ac.client?.grant_types.includes(GRANT_DEVICE_CODE))
          throw new OAuthError('unauthorized_client', 'this client may not use the device flow');
        const scope = narrowScope(parseScope(form['scope']), ac.client.scope);
        const d = await startDeviceAuthorization(ctx, ac.clientId, scope);
        const verification = `${publicBase(ctx.core.config)}/oauth/device`;
        return c.json(
          {
            device_code: d.deviceCode,
            user_code: d.userCode,
            verification_uri: verification,
            verification_uri_complete: `${verification}?user_code=${encodeURIComponent(d.userCode)}`,
            expires_in: d.expiresIn,
            interval: d.interval,
          },
          200,
          NO_STORE,
        );
      }),
  );

  mountRaw(
    app,
    createRoute({
      method: 'post',
      path: '/oauth/introspect',
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Token introspection (RFC 7662); {"active":false} for any token that does not verify',
      ...clientAuthentication(ctx.core.config, { publicClients: false }),
      request: { body: formBody({ token: 'the access token', token_type_hint: 'ignored', ...CLIENT_FIELDS }, ['token']) },
      responses: {
        200: jsonResponse('{active: true, ...claims} or exactly {"active":false}'),
        ...oauthErrorResponses(),
        ...errorResponses(),
      },
    }),
    async (c) =>
      protocol(c, async () => {
        const form = await readForm(c);
        const ac = await authenticateClient(ctx, c, form);
        if (ac.method === 'none') throw new OAuthError('invalid_client', 'introspection needs an authenticated (confidential) client');
        const claims = await activeClaims(ctx, form['token'] ?? '');
        // A registered confidential client (a resource server) may introspect any token of this cell; an
        // API key acting as a client only its own owner's tokens. Anything else is indistinguishable from inactive.
        if (!claims || (ac.apiKey && ac.apiKey.principal.id !== claims.sub)) {
          return c.body('{"active":false}', 200, { 'Content-Type': 'application/json', ...NO_STORE });
        }
        return c.json({ active: true, ...claims, token_type: claims.cnf?.jkt ? 'DPoP' : 'Bearer' }, 200, NO_STORE);
      }),
  );

  mountRaw(
    app,
    createRoute({
      method: 'post',
      path: '/oauth/revoke',
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Token revocation (RFC 7009): always 200; an access token is denylisted until it expires, a refresh token ends its grant',
      ...clientAuthentication(ctx.core.config, { publicClients: true }),
      request: { body: formBody({ token: 'the access token', token_type_hint: 'ignored', ...CLIENT_FIELDS }, ['token']) },
      responses: { 200: { description: 'Revoked, or nothing to revoke' }, ...oauthErrorResponses(), ...errorResponses() },
    }),
    async (c) =>
      protocol(c, async () => {
        const form = await readForm(c);
        const ac = await authenticateClient(ctx, c, form);
        // A refresh token ends its family (and the access tokens it gave).
        if ((form['token'] ?? '').startsWith(REFRESH_PREFIX)) {
          await revokeRefresh(ctx, form['token']!, ac.clientId);
          return c.body(null, 200, NO_STORE);
        }
        const claims = await verifyOwnToken(ctx, form['token'] ?? '');
        // Only the client the token was issued to (or, for SATs, a client acting for the same subject) may revoke it.
        if (claims && (claims.client_id === ac.clientId || (claims.sat === true && ac.apiKey?.principal.id === claims.sub))) {
          await ctx.denylist.deny(claims.jti, claims.exp);
        }
        return c.body(null, 200, NO_STORE);
      }),
  );
}

/**
 * Claims of a token the bearer path would honour now, bindings aside (core's one judge, without the
 * request: cell/oauth/authenticator.ts); null otherwise. Tokens addressed to a device are judged as
 * the device would, audience aside.
 */
async function activeClaims(ctx: OAuthContext, token: string) {
  if (!looksLikeJwt(token)) return null;
  const v = await cellTokenJudge(ctx)(token, { now: ctx.core.clock.now() });
  if (v.ok) return v.claims;
  // A token for one of this cell's devices or registered protected resources: the same judgement against that audience.
  const claims = await verifyOwnToken(ctx, token);
  if (!claims || ctx.audiences.accepts(claims.aud)) return null;
  const d = await cellTokenJudgeFor(ctx, claims.aud)(token, { now: ctx.core.clock.now() });
  return d.ok ? d.claims : null;
}

/**
 * Claims of a token this cell signed (for itself or for one of its registered devices) that has not
 * expired and is not on the denylist; null otherwise. Revocation uses this rather than the full verdict:
 * a token refused now only because its subject is archived must still be revocable, or a restore would
 * bring it back.
 */
export async function verifyOwnToken(ctx: OAuthContext, token: string): Promise<AccessTokenClaims | null> {
  const { clock } = ctx.core;
  let claims: AccessTokenClaims;
  try {
    claims = await verifyAccessToken(token, {
      // By form here (the check is synchronous); a device audience must then name a registered device.
      keys: ctx.keys.current().keySet,
      issuer: ctx.issuers.accepted(),
      audience: (aud) =>
        ctx.audiences.accepts(aud) || ctx.audiences.acceptsMcp(aud) || edgeDeviceOf(aud) !== null || isProtectedResource(ctx, aud),
      now: clock.now(),
      isRevoked: (jti) => ctx.denylist.inMirror(jti),
    });
  } catch (e) {
    if (isTokenError(e)) return null;
    throw e;
  }
  if (ctx.audiences.accepts(claims.aud) || ctx.audiences.acceptsMcp(claims.aud) || isProtectedResource(ctx, claims.aud)) return claims;
  const device = edgeDeviceOf(claims.aud);
  return device !== null && (await ctx.deviceExists(device)) ? claims : null;
}
