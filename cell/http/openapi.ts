/**
 * Building blocks for route declarations. Every route is declared with
 * @hono/zod-openapi's `createRoute`, carries tags and `x-status`, and spreads
 * `secured(permission)` (bearer security + the authorization gate) or is
 * explicitly public. The curated document (cell/discovery) is generated from
 * these declarations.
 *
 * @example
 * const mint = createRoute({
 *   method: 'post', path: '/api/public/v1/admin/api-keys', tags: ['API keys'],
 *   'x-status': 'Live', ...secured(PERMISSIONS.keysWrite),
 *   request: { body: jsonBody(MintKey) },
 *   responses: { 201: json(KeyMinted, 'The key; its secret is shown only now'), ...errorResponses(400, 401, 403, 429) },
 * });
 */
import { z } from '@hono/zod-openapi';
import type { ZodType } from 'zod';
import { requires } from './authorize.ts';

export const ErrorEnvelopeSchema = z
  .object({
    error: z
      .enum([
        'invalid_request',
        'unauthorized',
        'forbidden',
        'not_found',
        'conflict',
        'rate_limited',
        'internal_error',
        'service_unavailable',
      ])
      .openapi({ description: 'Stable machine code: branch on this.' }),
    message: z.string().openapi({ description: 'Human-readable; may change.' }),
    correlation_id: z.string().optional().openapi({ description: 'Present on 5xx failures; quote it to the operator.' }),
    details: z.record(z.string(), z.unknown()).optional(),
    retryable: z.boolean().optional(),
  })
  .openapi('Error');

const RATE_HEADERS = {
  'X-RateLimit-Limit': { description: 'Bucket capacity', schema: { type: 'integer' as const } },
  'X-RateLimit-Remaining': { description: 'Requests left in the bucket', schema: { type: 'integer' as const } },
  'X-RateLimit-Reset': { description: 'Seconds until the bucket is full again', schema: { type: 'integer' as const } },
};

const ERROR_TEXT: Record<number, string> = {
  400: 'invalid_request: malformed or failed validation',
  401: 'unauthorized: no valid credential',
  403: 'forbidden: the credential lacks the permission',
  404: 'not_found: no such resource, or one the caller may not see',
  409: 'conflict: conflicts with the current state',
  429: 'rate_limited: gateway or per-credential budget exhausted; see Retry-After',
  500: 'internal_error: unexpected failure; carries correlation_id',
  503: 'service_unavailable: a dependency is temporarily unavailable',
};

export type ErrorStatusCode = 400 | 401 | 403 | 404 | 409 | 429 | 500 | 503;

/** Error responses an operation can return; 429 and 500 are always added. */
export function errorResponses(...statuses: ErrorStatusCode[]) {
  const all = [...new Set<ErrorStatusCode>([...statuses, 429, 500])].sort();
  const out: Record<
    string,
    { description: string; content: { 'application/json': { schema: typeof ErrorEnvelopeSchema } }; headers?: Record<string, unknown> }
  > = {};
  for (const s of all) {
    out[String(s)] = {
      description: ERROR_TEXT[s]!,
      content: { 'application/json': { schema: ErrorEnvelopeSchema } },
      headers:
        s === 429 ? { ...RATE_HEADERS, 'Retry-After': { description: 'Seconds to wait', schema: { type: 'integer' } } } : RATE_HEADERS,
    };
  }
  return out;
}

/** A JSON response with the rate-limit headers documented. */
export function json<T extends ZodType>(schema: T, description: string) {
  return { description, content: { 'application/json': { schema } }, headers: RATE_HEADERS };
}

/** A required JSON request body. */
export function jsonBody<T extends ZodType>(schema: T) {
  return { required: true, content: { 'application/json': { schema } } };
}

/** Bearer security plus the authorization gate for `permission`. */
export function secured(permission: string) {
  return {
    security: [{ bearerAuth: [] as string[] }, { dpop: [] as string[] }],
    'x-required-permission': permission,
    middleware: [requires(permission)],
  };
}

/** The `x-required-permission` of an operation any authenticated caller may call. */
export const ANY_AUTHENTICATED = '(none: any authenticated caller)';

/** Bearer security for an operation that needs a credential but no permission (`GET /admin/whoami`); the credential's rpm still applies. */
export function authenticatedOnly() {
  return {
    security: [{ bearerAuth: [] as string[] }, { dpop: [] as string[] }],
    'x-required-permission': ANY_AUTHENTICATED,
    middleware: [requires(null)],
  };
}

/** Shared pagination query: limit and offset with per-endpoint defaults and ceilings. */
export function pageQuery(defaultLimit: number, maxLimit: number) {
  return z.object({
    limit: z.coerce
      .number()
      .int()
      .min(1)
      .max(maxLimit)
      .default(defaultLimit)
      .openapi({ description: `Items per page, 1 to ${maxLimit}`, example: defaultLimit }),
    offset: z.coerce.number().int().min(0).max(1_000_000_000).default(0).openapi({ description: 'Items to skip' }),
  });
}
