/**
 * Errors of the OAuth protocol endpoints (/oauth/token, /oauth/device_authorization,
 * /oauth/introspect, /oauth/revoke) use RFC 6749 §5.2's body, because OAuth
 * clients branch on those codes (`invalid_grant`, `authorization_pending`,
 * `slow_down`...). The body also carries the envelope's `message`. Everything
 * else (the gateway's 429, /api/public/v1) keeps the service envelope.
 */
import type { Context } from 'hono';
import { z } from '@hono/zod-openapi';

export type OAuthErrorCode =
  | 'invalid_request'
  | 'invalid_client'
  | 'invalid_grant'
  | 'unauthorized_client'
  | 'unsupported_grant_type'
  | 'invalid_scope'
  | 'invalid_target'
  | 'invalid_dpop_proof'
  | 'authorization_pending'
  | 'slow_down'
  | 'access_denied'
  | 'expired_token'
  | 'invalid_redirect_uri'
  | 'invalid_client_metadata';

export class OAuthError extends Error {
  constructor(
    readonly error: OAuthErrorCode,
    readonly description: string,
    readonly status = error === 'invalid_client' ? 401 : 400,
  ) {
    super(description);
    this.name = 'OAuthError';
  }
}

export function isOAuthError(e: unknown): e is OAuthError {
  return typeof e === 'object' && e !== null && (e as { name?: unknown }).name === 'OAuthError';
}

export function oauthErrorResponse(c: Context, e: OAuthError): Response {
  const headers: Record<string, string> = { 'Cache-Control': 'no-store' };
  if (e.status === 401) headers['WWW-Authenticate'] = 'Basic realm="cell"';
  return c.json({ error: e.error, error_description: e.description, message: e.description }, e.status as 400, headers);
}

/** RFC 6749 §5.2 error body as documented in the OpenAPI document for the protocol endpoints. */
export const OAuthErrorSchema = z
  .object({
    error: z
      .enum([
        'invalid_request',
        'invalid_client',
        'invalid_grant',
        'unauthorized_client',
        'unsupported_grant_type',
        'invalid_scope',
        'invalid_target',
        'invalid_dpop_proof',
        'authorization_pending',
        'slow_down',
        'access_denied',
        'expired_token',
        'invalid_redirect_uri',
        'invalid_client_metadata',
      ])
      .openapi({ description: 'RFC 6749 / 7591 / 8628 / 8707 / 9449 error code: branch on this' }),
    error_description: z.string(),
    message: z.string().openapi({ description: 'Same text as error_description (the service envelope field)' }),
  })
  .openapi('OAuthError');

/** 400 and 401 responses of a protocol endpoint (RFC 6749 bodies); add errorResponses() for 429/500. */
export function oauthErrorResponses() {
  return {
    400: { description: 'OAuth error (RFC 6749 §5.2)', content: { 'application/json': { schema: OAuthErrorSchema } } },
    401: { description: 'invalid_client: client authentication failed', content: { 'application/json': { schema: OAuthErrorSchema } } },
  };
}
