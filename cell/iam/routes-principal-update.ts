/**
 * `PATCH /admin/principals/{id}`: rename a user or service account, or set
 * its roles. Bounded by the caller's authority through the one containment
 * check (docs/security.md): the caller must manage the principal (hold all of
 * its authority now) and hold every permission of the roles it gives. The
 * owner's protections are kept: a principal cannot change its own roles
 * (409 `self`, as it cannot archive itself), and the last active holder of
 * the `owner` role keeps it (409 `last_owner`). Agents are minted and
 * governed by agent-teams and are not changed here (409 `agent_principal`).
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { conflict } from '../../core/errors.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import type { AppEnv, CellCore } from '../context.ts';
import { errorResponses, json, jsonBody, secured } from '../http/openapi.ts';
import type { Iam } from './iam.ts';
import { assertRolesExist, principalView, type Principal } from './principals.ts';
import { principalById, principalNameTaken, principalsWithRole, updatePrincipal } from './repository.ts';
import { PrincipalId, PrincipalView } from './routes-principals.ts';

const OWNER_ROLE = 'owner';

const UpdatePrincipal = z
  .object({
    name: z
      .string()
      .min(1)
      .max(100)
      .regex(/^[A-Za-z0-9._@-]+$/)
      .optional()
      .openapi({ description: 'A new unique name (a user signs in with it)' }),
    roles: z
      .array(z.string().min(1).max(64))
      .max(32)
      .optional()
      .openapi({ description: "Replaces the principal's roles; the caller must hold every permission they grant" }),
  })
  .strict()
  .refine((b) => b.name !== undefined || b.roles !== undefined, 'give name or roles')
  .openapi('UpdatePrincipal');

const sameSet = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x) => b.includes(x));

export function principalUpdateRoutes(app: OpenAPIHono<AppEnv>, core: CellCore, iam: Iam): void {
  app.openapi(
    createRoute({
      method: 'patch',
      path: '/api/public/v1/admin/principals/{id}',
      tags: ['Principals'],
      'x-status': 'Live',
      summary: 'Rename a principal or set its roles (bounded by the caller)',
      description:
        "The caller must hold all of the principal's authority now, and every permission of the roles it gives (403 `wider_than_caller`, audited). " +
        "Refused with 409: changing one's own roles (`self`), taking `owner` from its last active holder (`last_owner`), an agent (`agent_principal`), " +
        'a principal that is not active (`principal_inactive`), a name in use (`name_taken`). New roles take effect at once on every credential of the principal.',
      ...secured(PERMISSIONS.principalsWrite),
      request: { params: PrincipalId, body: jsonBody(UpdatePrincipal) },
      responses: { 200: json(PrincipalView, 'The principal after the change'), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const auth = c.get('auth');
      const body = c.req.valid('json');
      const p = await iam.visiblePrincipal(auth, c.req.valid('param').id);
      await iam.assertNotDelegated(auth, { action: 'principal.update', target: p.id });
      if (p.kind === 'agent') throw conflict('agents are minted and governed by agent-teams', { reason: 'agent_principal' });
      if (p.status !== 'active') throw conflict(`the principal is ${p.status}`, { reason: 'principal_inactive', status: p.status });
      const roles = body.roles !== undefined ? [...new Set(body.roles)] : p.roles;
      const name = body.name ?? p.name;
      const rolesChange = !sameSet(roles, p.roles);
      if (rolesChange && p.id === auth.principal.id) throw conflict('a principal cannot change its own roles', { reason: 'self' });
      await assertRolesExist(core.store, roles);
      // Acting on the principal needs all of its authority; what it is given must be within the caller's.
      await iam.assertManages(auth, p, 'principal.update');
      if (rolesChange) {
        await iam.assertWithinCaller(auth, { permissions: await iam.rolePermissions(roles) }, { action: 'principal.update', target: p.id });
      }
      const next: Principal = await core.store.write(async (tx) => {
        const now = await principalById(tx, p.id);
        // Judged as read above: a change in between is refused, not overwritten.
        if (now?.status !== 'active' || !sameSet(now.roles, p.roles) || now.name !== p.name)
          throw conflict('the principal changed meanwhile; read it and try again', { reason: 'concurrent_update' });
        await assertRolesExist(tx, roles);
        if (name !== p.name && (await principalNameTaken(tx, name)))
          throw conflict(`a principal named '${name}' already exists`, { reason: 'name_taken' });
        if (p.roles.includes(OWNER_ROLE) && !roles.includes(OWNER_ROLE)) {
          const owners = await principalsWithRole(tx, OWNER_ROLE, ['active']);
          if (!owners.some((o) => o.id !== p.id)) throw conflict('the last active owner keeps the owner role', { reason: 'last_owner' });
        }
        await updatePrincipal(tx, p.id, name, roles);
        await iam.audit(tx, {
          actor: auth.principal.id,
          action: 'principal.update',
          target: p.id,
          outcome: 'ok',
          details: {
            ...(name !== p.name ? { name: { from: p.name, to: name } } : {}),
            ...(rolesChange ? { roles: { from: p.roles, to: roles } } : {}),
          },
        });
        return { ...p, name, roles };
      });
      return c.json(principalView(next), 200);
    },
  );
}
