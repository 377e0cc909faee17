/**
 * Building blocks for route declarations. Every route is declared with
 * @hono/zod-openapi's `createRoute`, carries tags and `x-status`, and spreads
 * `secured(permission)` (bearer security + the authorization gate) or is
 * explicitly public. The curated document (cell/discovery) is generated from
 * these declarations. Its security schemes: `bearerAuth` (an API key or an
 * access token), `dpop`, and `oauth2` (OAuth2Scheme: the client-credentials
 * flow of /oauth/token, each catalog permission a scope), whose requirement
 * on an operation names the permission its `x-required-permission` says.
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
import type { Context, Next } from 'hono';
import { grants } from '../../core/authority/scopes.ts';
import { ERROR_STATUS, type ErrorCode } from '../../core/errors.ts';
import { ALL_PERMISSIONS } from '../../core/permissions.ts';
import type { AppEnv } from '../context.ts';
import { requires } from './authorize.ts';

export const ErrorEnvelopeSchema = z
  .object({
    error: z
      // Every code of core/errors.ts, so the document cannot lag behind the codes the cell sends.
      .enum(Object.keys(ERROR_STATUS) as [ErrorCode, ...ErrorCode[]])
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

/** The token endpoint, relative to the document's server (the cell that served it). */
const TOKEN_URL = '/oauth/token';

/**
 * The `oauth2` security scheme: tokens from /oauth/token's client-credentials grant, whose scopes are the
 * permission catalog (a token's scope may also hold a selector above a permission, e.g. `agent_teams` or
 * `*`, which covers it: docs/oauth.md).
 */
export function oauth2Scheme() {
  const scopes: Record<string, string> = {};
  for (const p of ALL_PERMISSIONS) {
    const above = p
      .split('.')
      .slice(0, -1)
      .map((_, i, parts) => parts.slice(0, i + 1).join('.'));
    const selectors = [...above, '*'].map((a) => `\`${a}\``).join(', ');
    scopes[p] = `The ${p} permission (a scope holding ${selectors} grants it too)`;
  }
  return {
    type: 'oauth2' as const,
    description:
      'An OAuth 2.1 access token from the cell (RFC 9068 JWT), bearer or DPoP-bound; the scope an operation needs is its `x-required-permission`. Other grants (authorization code with PKCE, device, token exchange) issue the same tokens: /.well-known/oauth-authorization-server.',
    flows: { clientCredentials: { tokenUrl: TOKEN_URL, scopes } },
  };
}

/** The security requirements of an operation: a key or a token (bearer or DPoP), or an OAuth token holding one of `scopes`. */
function securityFor(...scopes: string[][]) {
  return [{ bearerAuth: [] as string[] }, { dpop: [] as string[] }, ...scopes.map((s) => ({ oauth2: s }))];
}

/** Bearer security plus the authorization gate for `permission`. */
export function secured(permission: string) {
  return {
    security: securityFor([permission]),
    'x-required-permission': permission,
    middleware: [requires(permission)],
  };
}

/**
 * Bearer security for an operation two permissions each open on their own:
 * `permission` (`x-required-permission`) or `also` (`x-also-permitted`). The
 * gate judges whichever the credential holds (`permission` first), so a
 * refusal names `permission`. Used where two routes show the same thing
 * (a crew run, under agent_teams.read and system.orchestration.admin.read).
 */
export function securedEither(permission: string, also: string) {
  const primary = requires(permission);
  const alternative = requires(also);
  return {
    security: securityFor([permission], [also]),
    'x-required-permission': permission,
    'x-also-permitted': [also],
    middleware: [
      function eitherPermission(c: Context<AppEnv>, next: Next) {
        const effective = c.get('auth').effective;
        return (!grants(effective, permission) && grants(effective, also) ? alternative : primary)(c, next);
      },
    ],
  };
}

/** The `x-required-permission` of an operation any authenticated caller may call. */
export const ANY_AUTHENTICATED = '(none: any authenticated caller)';

/** Bearer security for an operation that needs a credential but no permission (`GET /admin/whoami`); the credential's rpm still applies. */
export function authenticatedOnly() {
  return {
    security: securityFor([]),
    'x-required-permission': ANY_AUTHENTICATED,
    middleware: [requires(null)],
  };
}

// ---- paging: every list takes `limit` and `offset` and says how many there are in all (`total`).
//
// A list keeps its own shape (the spec has no common wrapper): its array under its own key, beside
// the paging fields. Declare the query with `pageQuery`, the answer with `listSchema` (or spread
// `pageFields` into a schema of your own), and answer with `pageOf`:
//
//   request: { query: pageQuery(100, 1000) },
//   responses: { 200: json(listSchema('skills', SkillOut, 'SkillList'), 'Skills') },
//   ...
//   const q = c.req.valid('query');
//   const { items, total } = await listSkills(ctx, q);   // repository: one page + COUNT(*)
//   return c.json({ skills: items.map(skillView), ...pageOf(q, total) }, 200);
//
// A list that lives in memory (built-ins, a catalog) pages with `slicePage`.

/** The paging part of a list request, as `pageQuery` validated it. */
export interface Page {
  limit: number;
  offset: number;
}

/** Largest `offset` accepted (beyond it a page is empty anyway). */
export const MAX_OFFSET = 1_000_000_000;

/**
 * A non-negative decimal integer from a query string: digits only, so `0x10`, `1e3`, `1.5`, ` 5`
 * and an empty value are 400 rather than silently read as some number.
 */
function queryInteger(min: number, max: number) {
  return z.preprocess(
    (v) => (typeof v === 'string' && /^[0-9]{1,16}$/.test(v) ? Number(v) : v),
    z
      .number({ error: `must be a decimal integer from ${min} to ${max}` })
      .int()
      .min(min)
      .max(max),
  );
}

/**
 * Shared pagination query: `limit` (1 to `maxLimit`, default `defaultLimit`) and `offset` (from 0,
 * default 0). Any other value is 400 `invalid_request` (details.issues names the parameter).
 */
export function pageQuery(defaultLimit: number, maxLimit: number) {
  if (!(Number.isInteger(defaultLimit) && Number.isInteger(maxLimit) && defaultLimit >= 1 && defaultLimit <= maxLimit))
    throw new TypeError('pageQuery: need 1 <= defaultLimit <= maxLimit');
  return z.object({
    limit: queryInteger(1, maxLimit)
      .default(defaultLimit)
      .openapi({ description: `Items per page: 1 to ${maxLimit}, default ${defaultLimit}`, example: defaultLimit }),
    offset: queryInteger(0, MAX_OFFSET).default(0).openapi({ description: 'Items to skip from the start of the list, default 0' }),
  });
}

/** An RFC 3339 time in a query string, as epoch ms (`2026-01-01T00:00:00Z`, with an offset or `Z`). */
export function queryTime(description: string) {
  return z
    .string()
    .max(40)
    .refine((v) => /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/i.test(v) && !Number.isNaN(Date.parse(v)), {
      message: 'must be an RFC 3339 time, e.g. 2026-01-01T00:00:00Z',
    })
    .transform((v) => Date.parse(v))
    .optional()
    .openapi({ description, format: 'date-time', example: '2026-01-01T00:00:00Z' });
}

/**
 * A `{name}` path parameter holding an id of 1 to 200 characters (looked up as given: one the cell does
 * not know is simply not found), with an example id for the document.
 *
 * @example
 * const IdParam = z.object({ schedule_id: idPath('schedule_id', 'sch_0123456789abcdef0123') });
 */
export function idPath(name: string, example: string) {
  return z
    .string()
    .min(1)
    .max(200)
    .openapi({ param: { name, in: 'path' }, example });
}

/** The paging fields of every list answer, beside its own array. */
export const pageFields = {
  limit: z.number().int().openapi({ description: 'The limit this page was read with' }),
  offset: z.number().int().openapi({ description: 'The offset this page was read with' }),
  total: z.number().int().openapi({ description: 'How many items the whole list holds (with the same filters)' }),
};

/** A list answer's schema: `{ [key]: item[], limit, offset, total }`, registered as `name`. */
export function listSchema<K extends string, T extends ZodType>(key: K, item: T, name: string) {
  return z.object({ [key]: z.array(item), ...pageFields } as { [P in K]: z.ZodArray<T> } & typeof pageFields).openapi(name);
}

/** The paging fields of one answer. */
export function pageOf(q: Page, total: number): { limit: number; offset: number; total: number } {
  return { limit: q.limit, offset: q.offset, total };
}

/** One page of a list held in memory, and its total. */
export function slicePage<T>(all: readonly T[], q: Page): { items: T[]; total: number } {
  return { items: all.slice(q.offset, q.offset + q.limit), total: all.length };
}

/**
 * The views of one page of rows that each carry a list of their own (a secret's providers, a source's
 * pins): what the rows carry is read in one batch for the page (never one read a row), keyed by `key`.
 *
 * @example
 * const secrets = await viewsWithMany(page, (s) => s.secret_id, (ids) => providersBySecret(store, ids), secretView);
 */
export async function viewsWithMany<R, M, V>(
  rows: readonly R[],
  key: (r: R) => string,
  many: (keys: string[]) => Promise<Map<string, M[]>>,
  view: (r: R, many: M[]) => V,
): Promise<V[]> {
  const byKey = await many(rows.map(key));
  return rows.map((r) => view(r, byKey.get(key(r)) ?? []));
}

// ---- times: every timestamp in an answer is ISO 8601 UTC (core/iso-time.ts converts, in the views).

/** A timestamp in an answer: `isoTime(ms)` from core/iso-time.ts. `.nullable()` for one that may not have happened. */
export const IsoTime = z.string().openapi({ format: 'date-time', description: 'ISO 8601 UTC', example: '2026-01-01T00:00:00.000Z' });
