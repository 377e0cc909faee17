/**
 * Authority containment: the one rule every operation that creates, changes
 * or uses authority obeys. What it hands out or exercises (a key, a client,
 * a token, a role, a principal, a job's or an agent's authority, a schedule)
 * is never more than the caller's effective authority at that moment:
 * permission selectors within the caller's (roles ∩ credential scopes), and
 * envelope authority within the caller's ceiling (see ceiling.ts).
 *
 * `contains` is pure; the cell's routes reach it through one function,
 * cell/authz/containment.ts, which also records refusals on the audit trail.
 */
import type { AuthorityEnvelope, AuthorityField } from './envelope.ts';
import { withinCeiling, type Ceiling } from './ceiling.ts';
import { selectorsSubset, covers } from './scopes.ts';

/** What a caller holds: permission selectors and an envelope ceiling. */
export interface Holding {
  permissions: readonly string[];
  envelope: Ceiling;
}

/** What an operation would hand out or exercise; an absent part asks for nothing. */
export interface Grant {
  permissions?: readonly string[];
  envelope?: AuthorityEnvelope | Ceiling;
}

export type Containment = { ok: true } | { ok: false; permissions: string[]; envelope: (AuthorityField | 'unbounded')[] };

/** Whether `grant` stays inside `holder`; when not, what exceeds it. */
export function contains(holder: Holding, grant: Grant): Containment {
  const permissions =
    grant.permissions && !selectorsSubset(grant.permissions, holder.permissions)
      ? grant.permissions.filter((g) => !holder.permissions.some((h) => covers(h, g)))
      : [];
  const env = grant.envelope === undefined ? { ok: true as const } : withinCeiling(grant.envelope, holder.envelope);
  const envelope = env.ok ? [] : env.fields;
  return permissions.length === 0 && envelope.length === 0 ? { ok: true } : { ok: false, permissions, envelope };
}
