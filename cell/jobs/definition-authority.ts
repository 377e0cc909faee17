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
 *
 * What a capped credential makes stays capped and dies with it
 * (docs/security.md, rule 4): authored through a credential whose root is an
 * API key (the key itself, or a token or SAT derived from it), a definition
 * records that key (`author_root`); at each fire the key must still be active
 * and unexpired, and the recorded authority is also met with what the key
 * holds now (its owner's permissions ∩ its scopes, and its envelope for the
 * seats). Authored through a console session (no key behind it), only the
 * author rules above apply.
 */
import { withinCeiling } from '../../core/authority/ceiling.ts';
import { grants, intersectSelectors } from '../../core/authority/scopes.ts';
import { conflict, forbidden } from '../../core/errors.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import type { AuthContext } from '../context.ts';
import type { Holding } from '../../core/authority/contain.ts';
import type { Reader, Tx } from '../store/types.ts';
import type { JobsContext } from './context.ts';
import * as repo from './repository.ts';
import type { DefinitionJobType } from './shapes.ts';

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
      throw forbidden(`a ${jobType} definition acts with its author's authority, which must include ${p}`, {
        reason: 'missing_permission',
        required_permission: p,
      });
    }
  }
}

/** Why a definition may not act now. */
export type AuthorityLapse =
  | 'author_inactive'
  | 'author_lacks_permission'
  | 'author_authority_unknown'
  | 'author_lacks_authority'
  | 'root_revoked'
  | 'root_expired'
  | 'root_lacks_permission'
  | 'root_lacks_authority';

const KEY_ROOT = /^api_key:(key_[0-9a-f]{20})$/;

/** The root a definition records for the caller: its credential's root when that is an API key, else null. */
export function authorRoot(auth: AuthContext): string | null {
  return KEY_ROOT.test(auth.credential.root) ? auth.credential.root : null;
}

/** What the definition's root key lets it do now (null: no key root), or why it may not act. */
async function rootGrant(ctx: JobsContext, root: string | null): Promise<Holding | null | 'root_revoked' | 'root_expired'> {
  if (root === null) return null;
  const m = KEY_ROOT.exec(root);
  const row = m ? await ctx.iam.keyRow(m[1]!) : undefined;
  if (row?.status !== 'active') return 'root_revoked';
  if (row.expires_at !== null && row.expires_at <= ctx.core.clock.now()) return 'root_expired';
  const owner = await ctx.iam.principal(row.owner_id);
  if (owner?.status !== 'active') return 'root_revoked';
  return { permissions: (await ctx.iam.keyAuthority(row)).permissions ?? [], envelope: ctx.iam.keyEnvelope(row, owner) };
}

/** The crew's current graph an agent or team definition runs (its seats carry envelope authority), if any. */
async function definitionGraph(ctx: JobsContext, d: { job_type: DefinitionJobType; spec?: unknown }) {
  const spec = (d.spec ?? {}) as { crew_id?: unknown; graph_id?: unknown };
  if (d.job_type === 'team' && typeof spec.crew_id === 'string') return ctx.teams.crewGraph(spec.crew_id);
  if (d.job_type === 'agent' && typeof spec.graph_id === 'string') return ctx.teams.crewByGraph(spec.graph_id);
  return undefined;
}

/**
 * Authoring an agent or team definition hands its crew's seats to a schedule that acts
 * later as the caller: every seat must be within the caller's envelope authority (403
 * wider_than_caller, audited), as for running the crew by hand.
 */
export async function assertDefinitionSeats(
  ctx: JobsContext,
  auth: AuthContext,
  d: { job_type: DefinitionJobType; spec?: unknown },
  action: string,
): Promise<void> {
  const found = await definitionGraph(ctx, d);
  if (found) await ctx.teams.assertSeatsWithinCaller(auth, found.graph, { action, target: found.crew.crew_id });
}

/**
 * Whether the definition's author may still act through it: null when yes,
 * else the reason. `author_authority` is the stored JSON (null for a definition
 * authored before authority was recorded: it fails closed). The seats of the
 * crew an agent or team definition runs must be within the author's ceiling now.
 */
export async function authorityLapse(
  ctx: JobsContext,
  d: { job_type: DefinitionJobType; author_id: string; author_authority: string | null; author_root?: string | null; spec?: unknown },
): Promise<AuthorityLapse | null> {
  const author = await ctx.iam.principal(d.author_id);
  if (author?.status !== 'active') return 'author_inactive';
  const root = await rootGrant(ctx, d.author_root ?? null);
  if (root === 'root_revoked' || root === 'root_expired') return root;
  if (d.author_authority === null) return 'author_authority_unknown';
  let recorded: unknown;
  try {
    recorded = JSON.parse(d.author_authority);
  } catch {
    return 'author_authority_unknown';
  }
  if (!Array.isArray(recorded) || !recorded.every((s) => typeof s === 'string')) return 'author_authority_unknown';
  const now = intersectSelectors(recorded as string[], await ctx.iam.permissionsOf(author));
  if (!DEFINITION_PERMISSIONS[d.job_type].every((p) => grants(now, p))) return 'author_lacks_permission';
  if (root !== null) {
    const viaRoot = intersectSelectors(now, root.permissions);
    if (!DEFINITION_PERMISSIONS[d.job_type].every((p) => grants(viaRoot, p))) return 'root_lacks_permission';
  }
  const found = await definitionGraph(ctx, d);
  if (!found) return null;
  const seats = Object.values(found.graph.seats).map((s) => {
    const { budget_ceiling, ...rest } = s.authority;
    return budget_ceiling === null ? rest : { ...rest, budget_ceiling };
  });
  if (!seats.every((s) => withinCeiling(s, author.authority).ok)) return 'author_lacks_authority';
  if (root !== null && !seats.every((s) => withinCeiling(s, root.envelope).ok)) return 'root_lacks_authority';
  return null;
}

/** Refuses (409 definition_quota_reached) a principal that already authors the cell's quota of live definitions. */
export async function assertWithinQuota(ctx: JobsContext, tx: Reader, authorId: string): Promise<void> {
  const quota = ctx.core.config.definitionQuota;
  if ((await repo.countAuthored(tx, authorId)) >= quota) {
    throw conflict(`at most ${quota} live definitions may act as one principal`, { reason: 'definition_quota_reached', quota });
  }
}

/**
 * Disables every enabled, live definition authored by `authorId` (its author
 * was archived, deleted or purged). Audited per definition; returns their ids.
 */
export async function disableAuthoredTx(
  ctx: JobsContext,
  tx: Tx,
  authorId: string,
  reason: string,
  actor: string,
  at: number,
): Promise<string[]> {
  const ids = await repo.enabledAuthoredBy(tx, authorId);
  for (const id of ids) {
    await repo.disableDefinition(tx, id, reason, at);
    await ctx.iam.audit(tx, {
      at,
      actor,
      action: 'jobs.definition.disable',
      target: id,
      outcome: 'ok',
      details: { reason, author: authorId },
    });
  }
  return ids;
}

/**
 * At fire time: disables the definition instead of firing it (compare-and-set
 * on the fire time `fireAt`, so one cell does it once), records the fire as
 * refused and audits it. False when another fire or a change got there first.
 */
export async function disableAtFireTx(
  ctx: JobsContext,
  tx: Tx,
  d: { schedule_id: string; author_id: string },
  fireAt: number,
  reason: string,
  now: number,
): Promise<boolean> {
  if (!(await repo.disableAtFire(tx, d.schedule_id, fireAt, reason, now))) return false;
  await repo.recordFire(tx, {
    schedule_id: d.schedule_id,
    fire_at: fireAt,
    state: 'refused',
    run_id: null,
    detail: reason,
    cell_id: ctx.core.config.cellId,
    at: now,
  });
  await ctx.iam.audit(tx, {
    at: now,
    actor: 'system:scheduler',
    action: 'jobs.definition.disable',
    target: d.schedule_id,
    outcome: 'ok',
    details: { reason, author: d.author_id },
  });
  return true;
}
