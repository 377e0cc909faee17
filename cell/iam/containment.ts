/**
 * Authority containment, the cell's one gate for every operation that
 * creates, changes or uses authority (docs/security.md, "Authority
 * containment"): what the operation would hand out or exercise must stay
 * inside the caller's effective authority now (permissions: roles ∩ scopes;
 * envelope: the principal's ceiling ∩ the credential's cap). A refusal is a
 * decision with a record: it is written to the audit trail, then answered
 * 403 `forbidden` with `details.reason: wider_than_caller` and what exceeds.
 *
 * The rule itself is core's `contains` (core/authority/contain.ts).
 */
import { contains, type Containment, type Grant, type Holding } from '../../core/authority/contain.ts';
import { forbidden } from '../../core/errors.ts';
import type { AuthContext, Cell } from '../context.ts';
import { recordAuditTx } from './audit.ts';
import { principalPermissions, type Principal } from './principals.ts';

/** What the request's credential holds. */
export function callerHolding(auth: AuthContext): Holding {
  return { permissions: auth.effective, envelope: auth.envelope };
}

/** Everything a principal holds: its role permissions and its ceiling. */
export function principalAuthority(cell: Cell, p: Principal): Grant {
  return { permissions: principalPermissions(cell, p), envelope: p.authority };
}

/** The verdict without side effects (for listings and previews). */
export function withinCaller(auth: AuthContext, grant: Grant): Containment {
  return contains(callerHolding(auth), grant);
}

/**
 * Refuses (audited, 403 `wider_than_caller`) unless `grant` stays inside
 * the caller's effective authority. `action` and `target` name the audit record.
 */
export async function assertWithinCaller(cell: Cell, auth: AuthContext, grant: Grant, ctx: { action: string; target: string }): Promise<void> {
  const v = contains(callerHolding(auth), grant);
  if (v.ok) return;
  const exceeds = { ...(v.permissions.length ? { permissions: v.permissions } : {}), ...(v.envelope.length ? { envelope: v.envelope } : {}) };
  await cell.store.write((tx) => recordAuditTx(tx, {
    at: cell.clock.now(), actor: auth.principal.id, action: ctx.action, target: ctx.target, outcome: 'refused',
    details: { reason: 'wider_than_caller', exceeds },
  }));
  throw forbidden(`${ctx.action}: this would carry more authority than the calling credential holds`, { reason: 'wider_than_caller', exceeds });
}

/** Refuses unless the caller holds every permission and all the envelope authority of `target`. */
export function assertManages(cell: Cell, auth: AuthContext, target: Principal, action: string): Promise<void> {
  return assertWithinCaller(cell, auth, principalAuthority(cell, target), { action, target: target.id });
}
