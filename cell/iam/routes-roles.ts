/**
 * Changing and deleting custom roles (`PATCH`/`DELETE /admin/roles/{name}`).
 * Built-in roles are immutable (409 `builtin_role`). Acting on a role needs
 * all of its authority, and an update may not give it more than the caller
 * holds: one containment check over the role's old and new permissions
 * (docs/security.md). A role still assigned to a principal that is, or may be
 * restored to, active is not deleted (409 `role_assigned`, naming them).
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { isSelector, normalize } from '../../core/authority/scopes.ts';
import { conflict, notFound } from '../../core/errors.ts';
import { BUILTIN_ROLES, PERMISSIONS } from '../../core/permissions.ts';
import type { AppEnv, CellCore } from '../context.ts';
import { errorResponses, json, jsonBody, secured } from '../http/openapi.ts';
import type { Iam, Role } from './iam.ts';
import { customRole, deleteRole, principalsWithRole, updateRole } from './repository.ts';
import { RoleView } from './routes-principals.ts';

const TAG = 'Roles';

/** How many holders a `role_assigned` refusal names. */
const NAMED_HOLDERS = 100;

const RoleName = z.object({
  name: z
    .string()
    .min(1)
    .max(64)
    .regex(/^[a-z][a-z0-9_-]*$/)
    .openapi({ param: { name: 'name', in: 'path' }, example: 'auditors' }),
});

const UpdateRole = z
  .object({
    permissions: z
      .array(z.string().refine(isSelector, 'not a permission selector'))
      .min(1)
      .max(128)
      .optional()
      .openapi({ description: "Replaces the role's permissions; the caller must hold the old and the new ones" }),
    description: z.string().max(500).nullable().optional().openapi({ description: 'null clears it' }),
  })
  .strict()
  .refine((b) => b.permissions !== undefined || b.description !== undefined, 'give permissions or description')
  .openapi('UpdateRole');

/** The custom role, or the refusal: 409 for a built-in, 404 for an unknown name. */
async function customRoleOrRefuse(iam: Iam, name: string): Promise<Role> {
  if (Object.hasOwn(BUILTIN_ROLES, name)) throw conflict(`'${name}' is a built-in role and cannot be changed`, { reason: 'builtin_role' });
  const role = await iam.role(name);
  if (!role) throw notFound('role');
  return role;
}

const same = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x, i) => x === b[i]);

export function roleRoutes(app: OpenAPIHono<AppEnv>, core: CellCore, iam: Iam): void {
  const { store } = core;
  app.openapi(
    createRoute({
      method: 'patch',
      path: '/api/public/v1/admin/roles/{name}',
      tags: [TAG],
      'x-status': 'Live',
      summary: "Change a custom role's permissions or description (built-ins cannot be changed)",
      description:
        'Principals holding the role get the new permissions at once, on every credential (keys, tokens, SATs). ' +
        'The caller must hold every permission the role has now and every one it is given (403 `wider_than_caller`).',
      ...secured(PERMISSIONS.rolesWrite),
      request: { params: RoleName, body: jsonBody(UpdateRole) },
      responses: { 200: json(RoleView, 'The role after the change'), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const auth = c.get('auth');
      const { name } = c.req.valid('param');
      const body = c.req.valid('json');
      const role = await customRoleOrRefuse(iam, name);
      await iam.assertNotDelegated(auth, { action: 'role.update', target: name });
      const permissions = body.permissions !== undefined ? normalize(body.permissions) : role.permissions;
      const description = body.description !== undefined ? body.description : role.description;
      await iam.assertWithinCaller(
        auth,
        { permissions: normalize([...role.permissions, ...permissions]) },
        { action: 'role.update', target: name },
      );
      await store.write(async (tx) => {
        const now = await customRole(tx, name);
        if (!now) throw notFound('role');
        // The containment check judged the role as read above: a change in between is refused, not overwritten.
        if (!same(now.permissions, role.permissions))
          throw conflict('the role changed meanwhile; read it and try again', { reason: 'concurrent_update' });
        await updateRole(tx, name, permissions, description);
        await iam.audit(tx, {
          actor: auth.principal.id,
          action: 'role.update',
          target: name,
          outcome: 'ok',
          details: {
            permissions: { from: role.permissions, to: permissions },
            ...(description !== role.description ? { description: { from: role.description, to: description } } : {}),
          },
        });
      });
      return c.json({ name, permissions, builtin: false, description }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/api/public/v1/admin/roles/{name}',
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Delete a custom role no principal holds (built-ins cannot be deleted)',
      description:
        'Refused with 409 `role_assigned` while a principal that is active, archived or deleted (so may be restored) holds it; ' +
        '`details.principals` names them (at most 100) and `details.assigned` counts them. The caller must hold all of the role.',
      ...secured(PERMISSIONS.rolesWrite),
      request: { params: RoleName },
      responses: { 200: json(RoleView, 'The role as it was'), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const auth = c.get('auth');
      const { name } = c.req.valid('param');
      const role = await customRoleOrRefuse(iam, name);
      await iam.assertWithinCaller(auth, { permissions: role.permissions }, { action: 'role.delete', target: name });
      await store.write(async (tx) => {
        if (!(await customRole(tx, name))) throw notFound('role');
        const holders = await principalsWithRole(tx, name, ['active', 'archived', 'deleted']);
        if (holders.length > 0) {
          throw conflict(`role '${name}' is assigned to ${holders.length} principal(s); take it from them first`, {
            reason: 'role_assigned',
            assigned: holders.length,
            principals: holders.slice(0, NAMED_HOLDERS).map((p) => p.id),
          });
        }
        await deleteRole(tx, name);
        await iam.audit(tx, {
          actor: auth.principal.id,
          action: 'role.delete',
          target: name,
          outcome: 'ok',
          details: { permissions: role.permissions },
        });
      });
      return c.json({ name, permissions: role.permissions, builtin: false, description: role.description }, 200);
    },
  );
}
