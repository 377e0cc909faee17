/**
 * RFC 7591 dynamic client registration, as MCP clients use it
 * (`POST /oauth/register`, on with `serve --oauth-dynamic-registration`).
 *
 * A client registers itself: no credential, so it is named by nobody, and
 * it is contained accordingly:
 * - authorization code only (with `refresh_token` if it asks): never
 *   client_credentials, the device flow or token exchange, so every token it
 *   gets follows a principal's consent on the consent page, which names it
 *   "unverified" (cell/oauth/routes-pages.ts), and is capped by what that
 *   principal holds;
 * - its scope is what it asks for within `--oauth-registration-scope` (by
 *   default what the MCP tools need);
 * - redirect URIs https, or http on a loopback host (RFC 8252 native apps),
 *   no fragment; a built-in client's name is refused;
 * - per client IP, a burst of 10 registrations then 10 an hour (429); at most
 *   `maxSelfRegisteredClients` such clients (403 `registration_limit`).
 * Public (`none`, the default) or confidential (`client_secret_basic`,
 * `client_secret_post`: the secret shown once). No registration access token
 * (RFC 7592): an admin lists and deletes these clients like any other
 * (`created_by: dynamic-registration`).
 */
import type { Context } from 'hono';
import { z } from 'zod';
import { hashSecret } from '../../core/apikey/hash.ts';
import { forbidden, notFound } from '../../core/errors.ts';
import { TokenBuckets, rateLimitHeaders, rateLimited } from '../../core/ratelimit.ts';
import { newId } from '../ids.ts';
import type { AppEnv } from '../context.ts';
import { clientIp } from '../http/client-ip.ts';
import { GRANT_AUTHORIZATION_CODE, GRANT_REFRESH_TOKEN, takesBuiltInName, type ClientRecord } from './clients.ts';
import { randomToken } from './issue.ts';
import { OAuthError } from './oauth-error.ts';
import type { OAuthContext } from './oauth-context.ts';
import * as repo from './repository.ts';
import { narrowScope, parseScope } from './scope.ts';
import { OAUTH } from './settings.ts';

/** `created_by` of a client that registered itself. */
export const SELF_REGISTERED = 'dynamic-registration';

const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/;

/** A redirect URI a self-registered (or self-described) client may use: https, or http on a loopback host; no fragment. */
export function redirectUriProblem(u: string): string | null {
  const url = URL.parse(u);
  if (!url || u.length > 2000) return `'${u.slice(0, 100)}' is not a URL`;
  if (url.hash || u.includes('#')) return 'a redirect URI has no fragment';
  if (url.protocol === 'https:') return null;
  if (url.protocol === 'http:' && LOOPBACK.test(url.hostname)) return null;
  return 'a redirect URI is https, or http on a loopback host (127.0.0.1, [::1], localhost)';
}

/** RFC 7591 §2 client metadata, as far as the cell uses it; other members are ignored (§3.1). */
export const RegistrationRequest = z.object({
  redirect_uris: z.array(z.string()).min(1).max(10),
  client_name: z.string().min(1).max(100).optional(),
  token_endpoint_auth_method: z.enum(['none', 'client_secret_basic', 'client_secret_post']).default('none'),
  grant_types: z.array(z.string()).max(4).default([GRANT_AUTHORIZATION_CODE]),
  response_types: z.array(z.string()).max(4).default(['code']),
  scope: z.string().max(2000).optional(),
});

/** The client's metadata as registered (RFC 7591 §3.2.1), with its id and, once, its secret. */
export function registrationView(c: ClientRecord, secret?: string) {
  return {
    client_id: c.client_id,
    ...(secret !== undefined ? { client_secret: secret, client_secret_expires_at: 0 } : {}),
    client_id_issued_at: Math.floor(c.created_at / 1000),
    client_name: c.name,
    redirect_uris: c.redirect_uris,
    grant_types: c.grant_types,
    response_types: ['code'],
    token_endpoint_auth_method: c.auth_method,
    scope: c.scope.join(' '),
  };
}

/** The registration endpoint's own gate: one bucket per client IP. */
export function registrationBuckets(ctx: OAuthContext): TokenBuckets {
  return new TokenBuckets(OAUTH.registrationBurst, OAUTH.registrationRefillPerSecond, ctx.core.clock);
}

/** Registers a client from its metadata; refusals as RFC 7591 §3.2.2 errors, the limits as the envelope. */
export async function registerClient(ctx: OAuthContext, c: Context<AppEnv>, buckets: TokenBuckets): Promise<Response> {
  const { core, iam } = ctx;
  if (!core.config.dynamicRegistration) throw notFound('dynamic client registration (this cell has it off)');
  const ip = clientIp(c, core.config.trustedProxies) ?? 'unknown';
  const take = buckets.take(ip);
  if (!take.allowed)
    throw rateLimited(take, 'dynamic client registrations from this address', rateLimitHeaders(take, 'registration', 3600));
  let raw: unknown;
  try {
    raw = JSON.parse(await c.req.text());
  } catch {
    throw new OAuthError('invalid_client_metadata', 'the body is a JSON object of client metadata (RFC 7591)');
  }
  const parsed = RegistrationRequest.safeParse(raw);
  if (!parsed.success) {
    const path = parsed.error.issues[0]?.path.join('.') ?? '';
    throw new OAuthError(
      path.startsWith('redirect_uris') ? 'invalid_redirect_uri' : 'invalid_client_metadata',
      `client metadata: ${path || 'malformed'}`,
    );
  }
  const m = parsed.data;
  for (const u of m.redirect_uris) {
    const problem = redirectUriProblem(u);
    if (problem) throw new OAuthError('invalid_redirect_uri', problem);
  }
  const grants = [...new Set(m.grant_types)];
  if (!grants.includes(GRANT_AUTHORIZATION_CODE) || grants.some((g) => g !== GRANT_AUTHORIZATION_CODE && g !== GRANT_REFRESH_TOKEN))
    throw new OAuthError('invalid_client_metadata', 'a client that registers itself uses authorization_code (and refresh_token) only');
  if (m.response_types.some((r) => r !== 'code')) throw new OAuthError('invalid_client_metadata', 'response_types: code only');
  const name = m.client_name ?? 'Unnamed client';
  if (await takesBuiltInName(ctx, name)) throw new OAuthError('invalid_client_metadata', `client_name '${name}' is a built-in client's`);
  let scope: string[];
  try {
    scope = narrowScope(parseScope(m.scope), core.config.registrationScope);
  } catch {
    throw new OAuthError('invalid_client_metadata', `scope: none of it is within what this cell lets such clients have`);
  }
  const secret = m.token_endpoint_auth_method === 'none' ? undefined : `ocs_${randomToken(32)}`;
  const at = core.clock.now();
  const client: ClientRecord = {
    client_id: newId('dcl'),
    name,
    secret_hash: secret === undefined ? null : hashSecret(secret),
    auth_method: m.token_endpoint_auth_method,
    redirect_uris: [...new Set(m.redirect_uris)],
    grant_types: grants,
    scope,
    subject_id: null,
    tls_subject_dn: null,
    created_at: at,
    created_by: SELF_REGISTERED,
    root: null,
  };
  await core.store.write(async (tx) => {
    if ((await repo.countClientsCreatedBy(tx, SELF_REGISTERED)) >= OAUTH.maxSelfRegisteredClients)
      throw forbidden('this cell holds as many self-registered clients as it allows; ask an operator', { reason: 'registration_limit' });
    await repo.insertClient(tx, client);
    await iam.audit(tx, {
      at,
      actor: `${SELF_REGISTERED}:${ip}`,
      action: 'oauth.client.register',
      target: client.client_id,
      outcome: 'ok',
      details: { name, grant_types: grants, scope, token_endpoint_auth_method: client.auth_method },
    });
  });
  return c.json(registrationView(client, secret), 201, { 'Cache-Control': 'no-store' });
}
