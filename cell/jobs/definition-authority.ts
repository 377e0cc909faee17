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
import { withinCeiling } from '../../core/authority/ceiling.ts';
import type { AuthContext, Cell } from '../context.ts';
import { assertSeatsWithinCaller, compileFor, seatEnvelope } from '../teams/compile.ts';
import { loadCrew } from '../teams/runs.ts';
import { crewForGraph } from './agent.ts';
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
export type AuthorityLapse = 'author_inactive' | 'author_lacks_permission' | 'author_authority_unknown' | 'author_lacks_authority';

/** The crew an agent or team definition runs (its seats carry envelope authority), if any. */
function definitionCrew(cell: Cell, d: { job_type: DefinitionJobType; spec?: unknown }): string | undefined {
  const spec = (d.spec ?? {}) as { crew_id?: unknown; graph_id?: unknown };
  if (d.job_type === 'team' && typeof spec.crew_id === 'string') return spec.crew_id;
  if (d.job_type === 'agent' && typeof spec.graph_id === 'string') return crewForGraph(cell, spec.graph_id);
  return undefined;
}

/** The crew's compiled seats, or null when the crew is gone or no longer compiles (the run itself refuses that). */
function crewSeats(cell: Cell, crewId: string) {
  try {
    const { crew, formation } = loadCrew(cell, crewId);
    return Object.values(compileFor(cell, formation, crew).graph.seats);
  } catch {
    return null;
  }
}

/**
 * Authoring an agent or team definition hands its crew's seats to a schedule that acts
 * later as the caller: every seat must be within the caller's envelope authority (403
 * wider_than_caller, audited), as for running the crew by hand.
 */
export async function assertDefinitionSeats(cell: Cell, auth: AuthContext, d: { job_type: DefinitionJobType; spec?: unknown }, action: string): Promise<void> {
  const crewId = definitionCrew(cell, d);
  if (!crewId) return;
  const { crew, formation } = loadCrew(cell, crewId);
  await assertSeatsWithinCaller(cell, auth, compileFor(cell, formation, crew).graph, { action, target: crewId });
}

/**
 * Whether the definition's author may still act through it: null when yes,
 * else the reason. `authorAuthority` is the stored JSON (null for a definition
 * authored before authority was recorded: it fails closed).
 */
export function authorityLapse(db: Reader, d: { job_type: DefinitionJobType; author_id: string; author_authority: string | null; spec?: unknown }, cell?: Cell): AuthorityLapse | null {
  const author = getPrincipal(db, d.author_id);
  if (!author || author.status !== 'active') return 'author_inactive';
  if (d.author_authority === null) return 'author_authority_unknown';
  let recorded: unknown;
  try { recorded = JSON.parse(d.author_authority); } catch { return 'author_authority_unknown'; }
  if (!Array.isArray(recorded) || !recorded.every((s) => typeof s === 'string')) return 'author_authority_unknown';
  const now = intersectSelectors(recorded as string[], principalPermissions(db, author));
  if (!DEFINITION_PERMISSIONS[d.job_type].every((p) => grants(now, p))) return 'author_lacks_permission';
  // The seats of the crew it runs, within the author's envelope ceiling as it is now.
  const crewId = cell ? definitionCrew(cell, d) : undefined;
  const seats = cell && crewId ? crewSeats(cell, crewId) : null;
  if (seats && !seats.every((s) => withinCeiling(seatEnvelope(s.authority), author.authority).ok)) return 'author_lacks_authority';
  return null;
}
