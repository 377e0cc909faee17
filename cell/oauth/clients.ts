/**
 * OAuth clients (registered by an admin) and client authentication at the
 * token, device, introspection and revocation endpoints:
 * `client_secret_basic`, `client_secret_post`, `none` (public clients:
 * authorization code and device flow only, PKCE required), `tls_client_auth`
 * (RFC 8705: a client certificate verified against the cell's client CA whose
 * subject DN matches the registration). An API key may be the client secret:
 * client_id is then the key's id, its owner is the subject and its scopes cap
 * the token. Secrets are shown once and stored as SHA-256 hashes.
 */
import type { Context } from 'hono';
import { hashSecret, constantTimeEqual } from '../../core/apikey/hash.ts';
import { isServiceError } from '../../core/errors.ts';
import { isoTime } from '../../core/iso-time.ts';
import type { AppEnv, AuthContext } from '../context.ts';
import { clientIp } from '../http/client-ip.ts';
import type { Principal } from '../iam/api.ts';
import { OAuthError } from './oauth-error.ts';
import type { OAuthClientView } from './routes-admin.ts';
import type { OAuthClientWithSecretView } from './routes-clients.ts';
import type { OAuthContext } from './oauth-context.ts';
import * as repo from './repository.ts';
import { peerCertificate as peerCertificateOf, type PeerCertificate } from '../../runtime/peer-certificate.ts';

export { AUTH_METHODS, type AuthMethod, type ClientRecord } from './repository.ts';

export const GRANT_CLIENT_CREDENTIALS = 'client_credentials';
export const GRANT_AUTHORIZATION_CODE = 'authorization_code';
export const GRANT_DEVICE_CODE = 'urn:ietf:params:oauth:grant-type:device_code';
export const GRANT_TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
/** Refresh tokens (RFC 6749 §6) follow an authorization code, for clients registered with this grant too (refresh.ts). */
export const GRANT_REFRESH_TOKEN = 'refresh_token';
export const GRANT_TYPES = [
  GRANT_CLIENT_CREDENTIALS,
  GRANT_AUTHORIZATION_CODE,
  GRANT_DEVICE_CODE,
  GRANT_TOKEN_EXCHANGE,
  GRANT_REFRESH_TOKEN,
] as const;

/** The client authentication methods this cell accepts: `tls_client_auth` only with a client CA (`serve --client-ca`). */
export function clientAuthMethods(config: { clientCertificates: boolean }): repo.AuthMethod[] {
  return repo.AUTH_METHODS.filter((m) => m !== 'tls_client_auth' || config.clientCertificates);
}

/** A registered client, through the module's client cache (the bearer path asks on every request). */
export async function getClient(ctx: OAuthContext, clientId: string): Promise<repo.ClientRecord | undefined> {
  const hit = ctx.clients.get(clientId);
  if (hit !== undefined) return hit ?? undefined;
  const gen = ctx.clients.generation;
  const r = await repo.clientById(ctx.core.store, clientId);
  ctx.clients.set(clientId, r ?? null, gen);
  return r;
}

/** Whether `name` is a built-in client's (the console's), however spelled: case, spaces and punctuation ignored. */
export async function takesBuiltInName(ctx: OAuthContext, name: string): Promise<boolean> {
  const key = (n: string) => n.toLowerCase().replace(/[^\p{L}\p{N}]+/gu, '');
  return (await repo.builtInClientNames(ctx.core.store)).some((n) => key(n) === key(name));
}

/** Public view of a client (`OAuthClient`): never its hash, the secret only when just registered or rotated. */
export function clientView(r: repo.ClientRecord): OAuthClientView;
export function clientView(r: repo.ClientRecord, secret: string): OAuthClientWithSecretView;
export function clientView(r: repo.ClientRecord, secret?: string): OAuthClientView;
export function clientView(r: repo.ClientRecord, secret?: string): OAuthClientView {
  return {
    client_id: r.client_id,
    name: r.name,
    token_endpoint_auth_method: r.auth_method,
    redirect_uris: r.redirect_uris,
    grant_types: r.grant_types,
    scope: r.scope,
    subject_id: r.subject_id,
    tls_client_auth_subject_dn: r.tls_subject_dn,
    created_at: isoTime(r.created_at),
    created_by: r.created_by,
    root: r.root,
    ...(secret !== undefined ? { client_secret: secret } : {}),
  };
}

/** Who a token request acts for, and what caps its scope. */
export interface AuthenticatedClient {
  clientId: string;
  method: repo.AuthMethod | 'api_key';
  client: repo.ClientRecord | null;
  /** Set when an API key was the client secret. */
  apiKey: AuthContext | null;
  /** SHA-256 thumbprint of a CA-verified client certificate on this connection, if any. */
  certThumbprint: string | null;
}

function decodeForm(s: string): string {
  return decodeURIComponent(s.replace(/\+/g, ' '));
}

/** The TLS client certificate of this connection: DER, subject DN and whether it verified against the client CA; or null. */
export function peerCertificate(c: Context<AppEnv>): PeerCertificate | null {
  return peerCertificateOf(c.env?.incoming?.socket);
}

/**
 * Authenticates the client of a protocol request from its Authorization
 * header and form fields. Throws OAuthError('invalid_client') on any failure.
 */
export async function authenticateClient(
  ctx: OAuthContext,
  c: Context<AppEnv>,
  form: Record<string, string>,
): Promise<AuthenticatedClient> {
  const header = c.req.header('authorization');
  let id: string | undefined;
  let secret: string | undefined;
  let method: repo.AuthMethod;
  if (header && /^basic /i.test(header)) {
    if (form['client_secret'] !== undefined) throw new OAuthError('invalid_request', 'use one client authentication method');
    let decoded: string;
    try {
      decoded = Buffer.from(header.slice(6).trim(), 'base64').toString('utf8');
    } catch {
      throw new OAuthError('invalid_client', 'malformed Basic credentials');
    }
    const i = decoded.indexOf(':');
    if (i < 0) throw new OAuthError('invalid_client', 'malformed Basic credentials');
    try {
      id = decodeForm(decoded.slice(0, i));
      secret = decodeForm(decoded.slice(i + 1));
    } catch {
      throw new OAuthError('invalid_client', 'malformed Basic credentials');
    }
    method = 'client_secret_basic';
    if (form['client_id'] !== undefined && form['client_id'] !== id)
      throw new OAuthError('invalid_request', 'client_id differs from the authenticated client');
  } else if (form['client_secret'] !== undefined) {
    id = form['client_id'];
    secret = form['client_secret'];
    method = 'client_secret_post';
  } else {
    id = form['client_id'];
    method = 'none';
  }
  if (!id || id.length > 200) throw new OAuthError('invalid_client', 'client authentication failed');
  const peer = peerCertificate(c);
  const certThumbprint = peer?.authorized
    ? Buffer.from(await crypto.subtle.digest('SHA-256', peer.der as Uint8Array<ArrayBuffer>)).toString('base64url')
    : null;

  if (secret?.startsWith('svck_live_')) {
    let auth: AuthContext;
    try {
      auth = await ctx.iam.authenticateKeySecret(secret, clientIp(c, ctx.core.config.trustedProxies));
    } catch (e) {
      if (isServiceError(e)) throw new OAuthError('invalid_client', 'client authentication failed');
      throw e;
    }
    if (auth.credential.id !== id) throw new OAuthError('invalid_client', 'client authentication failed');
    return { clientId: id, method: 'api_key', client: null, apiKey: auth, certThumbprint };
  }

  const client = await getClient(ctx, id);
  if (!client) throw new OAuthError('invalid_client', 'client authentication failed');
  if (secret !== undefined) {
    if (client.secret_hash === null || !constantTimeEqual(hashSecret(secret), client.secret_hash)) {
      throw new OAuthError('invalid_client', 'client authentication failed');
    }
    return { clientId: id, method, client, apiKey: null, certThumbprint };
  }
  if (client.auth_method === 'tls_client_auth') {
    if (!peer?.authorized || peer.subjectDn !== client.tls_subject_dn)
      throw new OAuthError('invalid_client', 'client authentication failed');
    return { clientId: id, method: 'tls_client_auth', client, apiKey: null, certThumbprint };
  }
  if (client.auth_method !== 'none') throw new OAuthError('invalid_client', 'client authentication failed');
  return { clientId: id, method: 'none', client, apiKey: null, certThumbprint };
}

/** The subject a client_credentials token is issued to and the selectors that cap its scope. */
export async function clientCredentialsSubject(ctx: OAuthContext, ac: AuthenticatedClient): Promise<{ subject: Principal; cap: string[] }> {
  if (ac.apiKey) {
    const p = await ctx.iam.principal(ac.apiKey.principal.id);
    if (p?.status !== 'active') throw new OAuthError('invalid_client', 'the key owner is not active');
    return { subject: p, cap: ac.apiKey.effective };
  }
  const client = ac.client!;
  if (!client.grant_types.includes(GRANT_CLIENT_CREDENTIALS) || client.auth_method === 'none') {
    throw new OAuthError('unauthorized_client', 'this client may not use client_credentials');
  }
  const p = client.subject_id ? await ctx.iam.principal(client.subject_id) : undefined;
  if (p?.status !== 'active') throw new OAuthError('invalid_client', 'the client subject is not active');
  return { subject: p, cap: client.scope };
}
