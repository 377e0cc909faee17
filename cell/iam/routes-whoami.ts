/**
 * `GET /admin/whoami`: the caller as the gateway authenticated it, the first
 * thing to run with a new key or token. Any authenticated caller may ask
 * (no permission; the credential's rpm ceiling applies). It answers the
 * principal, the credential (kind, id, root, OAuth client), the role
 * permissions, the credential's scopes, the effective permissions (roles ∩
 * scopes, as selectors and as the catalog permissions they grant) and the
 * envelope ceiling (principal's ceiling ∩ the credential's cap). Never a
 * secret: no key secret, no token.
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { grants } from '../../core/authority/scopes.ts';
import { unauthorized } from '../../core/errors.ts';
import { ALL_PERMISSIONS } from '../../core/permissions.ts';
import type { AppEnv, AuthContext } from '../context.ts';
import { isoTime } from '../../core/iso-time.ts';
import { IsoTime, authenticatedOnly, errorResponses, json } from '../http/openapi.ts';
import { SerializedViews } from '../http/serialized-views.ts';
import type { Iam } from './iam.ts';
import type { Principal } from './api.ts';

const Whoami = z
  .object({
    principal: z.object({
      id: z.string(),
      kind: z.enum(['user', 'service', 'agent']),
      name: z.string(),
      status: z.enum(['active', 'archived', 'deleted', 'purged']),
      roles: z.array(z.string()),
      created_at: IsoTime,
    }),
    credential: z.object({
      kind: z.enum(['api_key', 'oauth', 'sat']).openapi({ description: 'An API key, an OAuth access token, or a scoped access token' }),
      id: z.string().openapi({ description: "The key's id, or the token's jti" }),
      root: z
        .string()
        .openapi({ description: 'The credential this one derives from (`api_key:<id>` or `token:<jti>`): revoking it ends this one' }),
      client_id: z.string().nullable().openapi({ description: 'The OAuth client a token was issued to; null for an API key' }),
      rate_limit_rpm: z
        .number()
        .int()
        .nullable()
        .openapi({ description: "The requests-per-minute ceiling of the credential's root, if any" }),
      actors: z.array(z.string()).openapi({
        description:
          'An exchanged token (RFC 8693): the principals acting for this principal, the current actor first (the `act` chain); [] otherwise',
      }),
    }),
    role_permissions: z.array(z.string()).openapi({ description: "Selectors of the principal's roles" }),
    scopes: z
      .array(z.string())
      .openapi({ description: "The credential's scopes (an API key's `[]` or `[\"*\"]`: the owner's full authority)" }),
    effective_permissions: z
      .array(z.string())
      .openapi({ description: 'role_permissions ∩ scopes: what this credential may do, as selectors' }),
    granted_permissions: z
      .array(z.string())
      .openapi({ description: 'The catalog permissions (x-required-permission of the operations) effective_permissions grant' }),
    authority: z.union([z.literal('unbounded'), z.record(z.string(), z.unknown())]).openapi({
      description: "Envelope ceiling of this credential: the principal's ceiling ∩ the credential's cap",
    }),
  })
  .openapi('Whoami');

/** The caller as whoami shows it: a function of the (cached, frozen) authentication context and the principal's row. */
function whoamiView(auth: AuthContext, p: Principal): z.infer<typeof Whoami> {
  return {
    principal: {
      id: p.id,
      kind: p.kind,
      name: p.name,
      status: p.status,
      roles: p.roles,
      created_at: isoTime(p.created_at),
    },
    credential: {
      kind: auth.credential.type,
      id: auth.credential.id,
      root: auth.credential.root,
      client_id: auth.credential.clientId ?? null,
      rate_limit_rpm: auth.credential.rateLimitRpm ?? null,
      actors: auth.credential.actors ?? [],
    },
    role_permissions: auth.permissions,
    scopes: auth.scopes,
    effective_permissions: auth.effective,
    granted_permissions: ALL_PERMISSIONS.filter((x) => grants(auth.effective, x)),
    authority: auth.envelope as z.infer<typeof Whoami>['authority'],
  };
}

export function whoamiRoutes(app: OpenAPIHono<AppEnv>, iam: Iam): void {
  // A key's context and its owner's row are cached objects: the answer's text is built once for the pair.
  const views = new SerializedViews(whoamiView);
  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/public/v1/admin/whoami',
      tags: ['Principals'],
      'x-status': 'Live',
      summary: 'The caller: principal, roles, credential, scopes, effective permissions and envelope ceiling (never a secret)',
      description:
        'Any authenticated caller may ask; no permission is needed. 403 only when the credential itself is refused from here (an API key outside its allowed_ips or allowed_regions).',
      ...authenticatedOnly(),
      responses: { 200: json(Whoami, 'The caller'), ...errorResponses(401, 403) },
    }),
    async (c) => {
      const auth = c.get('auth');
      const p = await iam.principal(auth.principal.id);
      // The gateway authenticated it a moment ago; only a purge racing this request removes it.
      if (!p) throw unauthorized('the calling principal no longer exists');
      return views.answer(c, auth, p, 200);
    },
  );
}
