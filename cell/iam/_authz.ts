/** Who may act on whom: an actor may manage a principal whose authority it fully holds. */
import { grants, selectorsSubset } from '../../core/authority/scopes.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import { forbidden, notFound } from '../../core/errors.ts';
import type { AuthContext, Cell } from '../context.ts';
import { getPrincipal, principalPermissions, type Principal } from './principals.ts';

/** The target principal, or not_found when the caller may not even see it. */
export function visiblePrincipal(cell: Cell, auth: AuthContext, id: string): Principal {
  const p = getPrincipal(cell, id);
  if (!p || p.status === 'purged') throw notFound('principal');
  if (p.id !== auth.principal.id && !grants(auth.effective, PERMISSIONS.principalsRead)) throw notFound('principal');
  return p;
}

/** Refuses unless the caller's effective authority covers all of the target's. */
export function assertManages(cell: Cell, auth: AuthContext, target: Principal): void {
  if (target.id === auth.principal.id) return;
  const theirs = principalPermissions(cell, target);
  if (!selectorsSubset(theirs, auth.effective)) {
    throw forbidden('the caller does not hold every permission of the target principal', { reason: 'target_exceeds_caller' });
  }
}
