/**
 * Principals: users, service accounts and agents. An agent is a principal
 * too (minted by agent-teams), so it can own keys and appear in the audit.
 */
import { conflict, invalid } from '../../core/errors.ts';
import { isoTime } from '../../core/iso-time.ts';
import { BUILTIN_ROLES } from '../../core/permissions.ts';
import type { Clock } from '../context.ts';
import { newId } from '../ids.ts';
import type { Reader, Tx } from '../store/types.ts';
import type { NewPrincipal, Principal } from './api.ts';
import { customRole, insertPrincipal, principalNameTaken } from './repository.ts';
import type { PrincipalView } from './routes-principals.ts';

export type { NewPrincipal, Principal, PrincipalKind, PrincipalStatus } from './api.ts';

/**
 * Refuses (400 unknown_role) a role that is neither built in nor stored. Run inside the
 * transaction that assigns the roles, so a role deleted meanwhile is never assigned.
 */
export async function assertRolesExist(db: Reader, roles: readonly string[]): Promise<void> {
  for (const r of roles) {
    if (!Object.hasOwn(BUILTIN_ROLES, r) && !(await customRole(db, r))) throw invalid(`unknown role '${r}'`, { reason: 'unknown_role' });
  }
}

/** Creates a principal inside the caller's transaction. Names are unique (409 name_taken); roles exist (400 unknown_role). */
export async function createPrincipalTx(clock: Clock, tx: Tx, input: NewPrincipal): Promise<Principal> {
  await assertRolesExist(tx, input.roles);
  if (await principalNameTaken(tx, input.name)) {
    throw conflict(`a principal named '${input.name}' already exists`, { reason: 'name_taken' });
  }
  const p: Principal = {
    id: newId(input.kind === 'agent' ? 'agt' : input.kind === 'service' ? 'svc' : 'usr'),
    kind: input.kind,
    name: input.name,
    status: 'active',
    roles: [...input.roles],
    authority: input.authority,
    created_at: clock.now(),
    created_by: input.createdBy,
    status_changed_at: null,
  };
  await insertPrincipal(tx, p, input.passwordHash ?? null);
  return p;
}

/** Public view of a principal (`Principal`). */
export function principalView(p: Principal): PrincipalView {
  return {
    id: p.id,
    kind: p.kind,
    name: p.name,
    status: p.status,
    roles: p.roles,
    authority: p.authority,
    created_at: isoTime(p.created_at),
    created_by: p.created_by,
  };
}
