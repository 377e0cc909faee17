/**
 * Whose authority a job definition acts with, and for how long.
 *
 * A definition acts later, on its cron, so it must never carry more than its
 * author held when authoring it, and must stop when that authority stops:
 * - authoring (create, PATCH, enable) records the caller as the definition's
 *   author (`author_id`) with the caller's effective authority at that moment
 *   (`author_authority`: role permissions ∩ credential scopes);
 * - at each fire the author must still be an active principal, and the
 *   recorded authority intersected with the author's *current* role
 *   permissions must still grant what the job type needs
 *   (`DEFINITION_PERMISSIONS`); otherwise the definition is disabled, with a
 *   reason on the definition and on the audit trail (scheduler.ts);
 * - deactivating the author (archive, delete, purge) disables its
 *   definitions in the same transaction (the IAM lifecycle hook registered by
 *   the jobs module).
 */
import { grants, intersectSelectors } from '../../core/authority/scopes.ts';
import { forbidden } from '../../core/errors.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import type { AuthContext } from '../context.ts';
import { getPrincipal, principalPermissions } from '../iam/principals.ts';
import type { Reader } from '../store/types.ts';
import type { DefinitionJobType } from './schemas.ts';

/**
 * What a definition's author must hold, per job type: the jobs write permission
 * for every definition, and the crew-run permission for the ones that launch a
 * crew's graph (agent, team), since the caller could not start those runs itself
 * without it.
 */
export const DEFINITION_PERMISSIONS: Readonly<Record<DefinitionJobType, readonly string[]>> = {
  compute: [PERMISSIONS.jobsWrite],
  sql: [PERMISSIONS.jobsWrite],
  notebook: [PERMISSIONS.jobsWrite],
  agent: [PERMISSIONS.jobsWrite, PERMISSIONS.teamsWrite],
  team: [PERMISSIONS.jobsWrite, PERMISSIONS.teamsWrite],
};

/** Refuses (403) a caller whose effective authority lacks a permission the job type needs. */
export function assertMayAuthor(auth: AuthContext, jobType: DefinitionJobType): void {
  for (const p of DEFINITION_PERMISSIONS[jobType]) {
    if (!grants(auth.effective, p)) {
      throw forbidden(`a ${jobType} definition acts with its author's authority, which must include ${p}`, { reason: 'missing_permission', required_permission: p });
    }
  }
}

/** Why a definition may not act now. */
export type AuthorityLapse = 'author_inactive' | 'author_lacks_permission' | 'author_authority_unknown';

/**
 * Whether the definition's author may still act through it: null when yes,
 * else the reason. `authorAuthority` is the stored JSON (null for a definition
 * authored before authority was recorded: it fails closed).
 */
export function authorityLapse(db: Reader, d: { job_type: DefinitionJobType; author_id: string; author_authority: string | null }): AuthorityLapse | null {
  const author = getPrincipal(db, d.author_id);
  if (!author || author.status !== 'active') return 'author_inactive';
  if (d.author_authority === null) return 'author_authority_unknown';
  let recorded: unknown;
  try { recorded = JSON.parse(d.author_authority); } catch { return 'author_authority_unknown'; }
  if (!Array.isArray(recorded) || !recorded.every((s) => typeof s === 'string')) return 'author_authority_unknown';
  const now = intersectSelectors(recorded as string[], principalPermissions(db, author));
  return DEFINITION_PERMISSIONS[d.job_type].every((p) => grants(now, p)) ? null : 'author_lacks_permission';
}
