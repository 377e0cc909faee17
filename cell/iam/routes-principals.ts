/** Principals (users, service accounts), their lifecycle, roles, and the audit trail. */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { isSelector, normalize } from '../../core/authority/scopes.ts';
import { authoritySchema } from '../../core/authority/schema.ts';
import { UNBOUNDED, type Ceiling } from '../../core/authority/ceiling.ts';
import { BUILTIN_ROLES, PERMISSIONS } from '../../core/permissions.ts';
import { conflict, invalid } from '../../core/errors.ts';
import type { AppEnv, CellCore } from '../context.ts';
import { IsoTime, errorResponses, json, jsonBody, listSchema, pageOf, pageQuery, queryTime, secured, slicePage } from '../http/openapi.ts';
import { isoTime } from '../../core/iso-time.ts';
import type { Iam } from './iam.ts';
import type { Lifecycle, LifecycleAction } from './lifecycle.ts';
import { hashPassword } from './passwords.ts';
import { createPrincipalTx, principalView } from './principals.ts';
import { countPrincipals, insertRole, listAudit, listPrincipals } from './repository.ts';

const PTAG = 'Principals';
const RTAG = 'Roles';
const ATAG = 'Audit';

export const PrincipalView = z
  .object({
    id: z.string(),
    kind: z.enum(['user', 'service', 'agent']),
    name: z.string(),
    status: z.enum(['active', 'archived', 'deleted', 'purged']),
    roles: z.array(z.string()),
    authority: z.union([z.literal('unbounded'), z.record(z.string(), z.unknown())]).openapi({
      description:
        'Envelope ceiling: the most clearance, data, egress, tools and compartments anything this principal runs or hands out may carry',
    }),
    created_at: IsoTime,
    created_by: z.string().nullable(),
  })
  .openapi('Principal');

/** An envelope ceiling in a request body: an authority envelope, or `unbounded`. */
export const CeilingBody = z.union([z.literal(UNBOUNDED), authoritySchema]);

const CreatePrincipal = z
  .object({
    kind: z.enum(['user', 'service']).openapi({ description: 'Agents are minted through agent-teams' }),
    name: z
      .string()
      .min(1)
      .max(100)
      .regex(/^[A-Za-z0-9._@-]+$/),
    roles: z.array(z.string().min(1).max(64)).max(32).optional().openapi({ description: 'Role names; default none' }),
    password: z.string().min(12).max(200).optional().openapi({ description: 'Users only: enables login for OAuth consent' }),
    authority: CeilingBody.optional().openapi({
      description: "Envelope ceiling (an authority envelope, or `unbounded`); default `{}`, the least. Never wider than the caller's.",
    }),
  })
  .strict()
  .openapi('CreatePrincipal');

export const PrincipalId = z.object({
  id: z
    .string()
    .regex(/^(usr|svc|agt)_[0-9a-f]{20}$/)
    .openapi({ param: { name: 'id', in: 'path' } }),
});

export const RoleView = z
  .object({
    name: z.string(),
    permissions: z.array(z.string()),
    builtin: z.boolean(),
    description: z.string().nullable(),
  })
  .openapi('Role');

const CreateRole = z
  .object({
    name: z
      .string()
      .min(1)
      .max(64)
      .regex(/^[a-z][a-z0-9_-]*$/),
    permissions: z.array(z.string().refine(isSelector, 'not a permission selector')).min(1).max(128),
    description: z.string().max(500).optional(),
  })
  .strict()
  .openapi('CreateRole');

const AuditEntry = z
  .object({
    seq: z.number().int(),
    at: IsoTime,
    actor: z.string(),
    action: z.string(),
    target: z.string(),
    outcome: z.string(),
    details: z.record(z.string(), z.unknown()).nullable(),
  })
  .openapi('AuditEntry');

/** A principal as the API shows it (`principalView` builds it). */
export type PrincipalView = z.infer<typeof PrincipalView>;

export function principalRoutes(app: OpenAPIHono<AppEnv>, core: CellCore, iam: Iam, lifecycle: Lifecycle): void {
  const { store, clock } = core;
  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/public/v1/admin/principals',
      tags: [PTAG],
      'x-status': 'Live',
      summary: 'Create a user or service account',
      ...secured(PERMISSIONS.principalsWrite),
      request: { body: jsonBody(CreatePrincipal) },
      responses: { 201: json(PrincipalView, 'The principal'), ...errorResponses(400, 401, 403, 409) },
    }),
    async (c) => {
      const auth = c.get('auth');
      await iam.assertNotDelegated(auth, { action: 'principal.create', target: auth.principal.id });
      const input = c.req.valid('json');
      const body = { ...input, roles: input.roles ?? [] };
      for (const r of body.roles) if (!(await iam.role(r))) throw invalid(`unknown role '${r}'`, { reason: 'unknown_role' });
      const authority = (body.authority ?? {}) as Ceiling;
      await iam.assertWithinCaller(
        auth,
        { permissions: await iam.rolePermissions(body.roles), envelope: authority },
        { action: 'principal.create', target: body.name },
      );
      if (body.password !== undefined && body.kind !== 'user') throw invalid('only users have passwords');
      const passwordHash = body.password !== undefined ? await hashPassword(body.password) : null;
      const p = await store.write(async (tx) => {
        const created = await createPrincipalTx(clock, tx, {
          kind: body.kind,
          name: body.name,
          roles: body.roles,
          authority,
          passwordHash,
          createdBy: auth.principal.id,
        });
        await iam.audit(tx, {
          actor: auth.principal.id,
          action: 'principal.create',
          target: created.id,
          outcome: 'ok',
          details: { kind: body.kind, roles: body.roles },
        });
        return created;
      });
      return c.json(principalView(p), 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/public/v1/admin/principals',
      tags: [PTAG],
      'x-status': 'Live',
      summary: 'List principals, oldest first',
      ...secured(PERMISSIONS.principalsRead),
      request: { query: pageQuery(100, 1000).extend({ kind: z.enum(['user', 'service', 'agent']).optional() }) },
      responses: {
        200: json(listSchema('principals', PrincipalView, 'PrincipalList'), 'Principals'),
        ...errorResponses(400, 401, 403),
      },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const principals = (await listPrincipals(store, q.limit, q.offset, q.kind)).map((p) => principalView(p));
      return c.json({ principals, ...pageOf(q, await countPrincipals(store, q.kind)) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/public/v1/admin/principals/{id}',
      tags: [PTAG],
      'x-status': 'Live',
      summary: 'Get a principal',
      ...secured(PERMISSIONS.principalsRead),
      request: { params: PrincipalId },
      responses: { 200: json(PrincipalView, 'The principal'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => c.json(principalView(await iam.visiblePrincipal(c.get('auth'), c.req.valid('param').id)), 200),
  );

  const lifecycleRoute = (action: LifecycleAction, method: 'post' | 'delete', path: string, summary: string) =>
    app.openapi(
      createRoute({
        method,
        path,
        tags: [PTAG],
        'x-status': 'Live',
        summary,
        ...secured(PERMISSIONS.principalsWrite),
        request: { params: PrincipalId },
        responses: { 200: json(PrincipalView, 'The principal after the change'), ...errorResponses(400, 401, 403, 404, 409) },
      }),
      async (c) => {
        const auth = c.get('auth');
        const p = await iam.visiblePrincipal(auth, c.req.valid('param').id);
        if (p.id === auth.principal.id && action !== 'restore')
          throw conflict('a principal cannot archive, delete or purge itself', { reason: 'self' });
        // Restoring brings a principal's credentials back: standing, so never through a delegated token.
        if (action === 'restore') await iam.assertNotDelegated(auth, { action: 'principal.restore', target: p.id });
        await iam.assertManages(auth, p, `principal.${action}`);
        const next = await lifecycle.apply(p, action, auth.principal.id);
        return c.json(principalView(next), 200);
      },
    );
  lifecycleRoute(
    'archive',
    'post',
    '/api/public/v1/admin/principals/{id}/archive',
    'Archive: keys soft-deleted, recoverable within the retention window',
  );
  lifecycleRoute(
    'restore',
    'post',
    '/api/public/v1/admin/principals/{id}/restore',
    'Restore an archived or deleted principal and its soft-deleted keys',
  );
  lifecycleRoute(
    'delete',
    'delete',
    '/api/public/v1/admin/principals/{id}',
    'Soft delete: keys soft-deleted, recoverable within the retention window',
  );
  lifecycleRoute('purge', 'post', '/api/public/v1/admin/principals/{id}/purge', 'Purge: every key hard-deleted and tombstoned');

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/public/v1/admin/roles',
      tags: [RTAG],
      'x-status': 'Live',
      summary: 'Create a custom role (built-ins cannot be changed)',
      ...secured(PERMISSIONS.rolesWrite),
      request: { body: jsonBody(CreateRole) },
      responses: { 201: json(RoleView, 'The role'), ...errorResponses(400, 401, 403, 409) },
    }),
    async (c) => {
      const auth = c.get('auth');
      const body = c.req.valid('json');
      await iam.assertNotDelegated(auth, { action: 'role.create', target: body.name });
      if (Object.hasOwn(BUILTIN_ROLES, body.name))
        throw conflict(`'${body.name}' is a built-in role and cannot be changed`, { reason: 'builtin_role' });
      if (await iam.role(body.name)) throw conflict(`role '${body.name}' exists`, { reason: 'name_taken' });
      const permissions = normalize(body.permissions);
      await iam.assertWithinCaller(auth, { permissions }, { action: 'role.create', target: body.name });
      await store.write(async (tx) => {
        await insertRole(tx, {
          name: body.name,
          permissions,
          description: body.description ?? null,
          created_at: clock.now(),
          created_by: auth.principal.id,
        });
        await iam.audit(tx, {
          actor: auth.principal.id,
          action: 'role.create',
          target: body.name,
          outcome: 'ok',
          details: { permissions },
        });
      });
      return c.json({ name: body.name, permissions, builtin: false, description: body.description ?? null }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/public/v1/admin/roles',
      tags: [RTAG],
      'x-status': 'Live',
      summary: 'List roles: built-in, then custom',
      ...secured(PERMISSIONS.rolesRead),
      request: { query: pageQuery(100, 1000) },
      responses: { 200: json(listSchema('roles', RoleView, 'RoleList'), 'Roles'), ...errorResponses(400, 401, 403) },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const { items, total } = slicePage(await iam.roles(), q);
      return c.json({ roles: items, ...pageOf(q, total) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/public/v1/admin/audit',
      tags: [ATAG],
      'x-status': 'Live',
      summary: 'The audit trail, newest first',
      ...secured(PERMISSIONS.auditRead),
      description:
        'Filters combine: `actor`, `action`, `target` (exact), `after` and `before` (RFC 3339, exclusive bounds on `at`); `total` counts the filtered trail.',
      request: {
        query: pageQuery(100, 1000).extend({
          actor: z.string().max(200).optional().openapi({ description: 'Only entries by this actor (a principal id, or `system:…`)' }),
          action: z.string().max(100).optional().openapi({ description: 'Only entries of this action, e.g. `api_key.mint`' }),
          target: z.string().max(200).optional().openapi({ description: 'Only entries about this target id' }),
          after: queryTime('Only entries after this time (exclusive)'),
          before: queryTime('Only entries before this time (exclusive)'),
        }),
      },
      responses: {
        200: json(listSchema('entries', AuditEntry, 'AuditList'), 'Entries'),
        ...errorResponses(400, 401, 403),
      },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const filter: { actor?: string; target?: string; action?: string; after?: number; before?: number } = {};
      if (q.actor) filter.actor = q.actor;
      if (q.target) filter.target = q.target;
      if (q.action) filter.action = q.action;
      if (q.after !== undefined) filter.after = q.after;
      if (q.before !== undefined) filter.before = q.before;
      const { items, total } = await listAudit(store, q.limit, q.offset, filter);
      const entries = items.map((e) => ({ ...e, at: isoTime(e.at) }));
      return c.json({ entries, ...pageOf(q, total) }, 200);
    },
  );
}
