/** Who may see whom. Who may act on whom is containment's (containment.ts). */
import { grants } from '../../core/authority/scopes.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import { notFound } from '../../core/errors.ts';
import type { AuthContext, Cell } from '../context.ts';
import { getPrincipal, type Principal } from './principals.ts';

/** The target principal, or not_found when the caller may not even see it. */
export function visiblePrincipal(cell: Cell, auth: AuthContext, id: string): Principal {
  const p = getPrincipal(cell, id);
  if (!p || p.status === 'purged') throw notFound('principal');
  if (p.id !== auth.principal.id && !grants(auth.effective, PERMISSIONS.principalsRead)) throw notFound('principal');
  return p;
}
