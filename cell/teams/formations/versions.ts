/**
 * Versions of a formation, and every change that makes one: changing the
 * formation (name, policy, limits, topology, stages, prompt, workspace),
 * changing a billet, removing a billet (adding one: formations.ts). Each
 * writes version N+1 in one transaction; version N and older never change,
 * and stay readable (`GET …/formations/{id}/versions/{n}`). A change that
 * leaves the formation as it is writes nothing. Two changes racing on the
 * same version: the second is refused (409 formation_changed) rather than
 * silently dropping the first.
 *
 * Billet changes keep the authoring rules of adding one: skills resolve,
 * tools and contracts exist, the cap is within the caller (403
 * wider_than_caller) and within its manager's (400 over_authority, audited),
 * and now also covers the caps of the billets reporting to it; a new
 * reporting line may not form a cycle (400 reports_to_cycle). A billet others
 * report to cannot be removed (409 billet_has_reports), nor one a stage
 * names as its seat (409 billet_seats_stage).
 *
 * Deleting a formation (every version) is refused while a crew uses it (409
 * in_use, naming the crews).
 */
import { checkInputSchema } from '../../../core/input-schema/check.ts';
import { isSubset } from '../../../core/authority/envelope.ts';
import { parseAuthority } from '../../../core/authority/schema.ts';
import { canonicalJson } from '../../../core/canonical.ts';
import { ServiceError, conflict, invalid, notFound, inUse } from '../../../core/errors.ts';
import type { AuthContext } from '../../context.ts';
import type { Tx } from '../../store/types.ts';
import { checkFormationCompiles, compileFor, inlineStageSkills } from './compile.ts';
import type { TeamsContext } from '../context.ts';
import { POLICIES, type Billet, type Formation, type FormationBody, type Policy } from './types.ts';
import {
  assertWithinManager,
  billetPolicy,
  bodyOf,
  checkToolChoice,
  getBillet,
  getFormation,
  listBillets,
  overAuthority,
} from './formations.ts';
import * as repo from './repository.ts';
import { checkContracts, checkTools, resolveSkillRefs } from '../resources/resources.ts';
import { formationReach } from '../reach.ts';
import { formationUsers, anyUser } from '../usage.ts';

/** What a version changed, as version lists show it. */
export const CHANGE_KINDS = ['created', 'migrated', 'updated', 'billet_added', 'billet_updated', 'billet_removed'] as const;
export type ChangeKind = (typeof CHANGE_KINDS)[number];
const isChangeKind = (k: string): k is ChangeKind => (CHANGE_KINDS as readonly string[]).includes(k);

/** Reads the head in `tx` and refuses when it moved past the version the change was prepared on. */
async function headAt(tx: Tx, formationId: string, version: number): Promise<Formation> {
  const head = await repo.formationById(tx, formationId);
  if (!head) throw notFound('formation');
  if (head.version !== version) {
    throw conflict(`the formation changed meanwhile (now version ${head.version}); read it again`, {
      reason: 'formation_changed',
      version: head.version,
    });
  }
  return head;
}

const same = (a: unknown, b: unknown) => canonicalJson(JSON.parse(JSON.stringify(a))) === canonicalJson(JSON.parse(JSON.stringify(b)));

/** Fields of a formation PATCH; `null` removes an optional field. */
export interface FormationPatch {
  name?: string | undefined;
  coordination_policy?: Policy | undefined;
  consensus_mode?: 'majority' | 'unanimity' | null | undefined;
  limits?: Record<string, number | undefined> | null | undefined;
  topology?: Record<string, string> | null | undefined;
  pre?: unknown[] | null | undefined;
  post?: unknown[] | null | undefined;
  prompt?: string | null | undefined;
  workspace_id?: string | null | undefined;
  purpose?: string | null | undefined;
  input_schema?: Record<string, unknown> | null | undefined;
}

/** Changes a formation: a new version unless nothing changed. */
export async function updateFormation(
  ctx: TeamsContext,
  auth: AuthContext,
  formationId: string,
  patch: FormationPatch,
): Promise<{ formation: Formation; changed: boolean }> {
  const f = await getFormation(ctx, formationId);
  if (!f) throw notFound('formation');
  if (patch.input_schema) checkInputSchema(patch.input_schema);
  const merged: Record<string, unknown> = { ...bodyOf(f) };
  for (const [k, v] of Object.entries(await inlineStageSkills(ctx, patch))) {
    if (v === undefined) continue;
    if (v === null) delete merged[k];
    else merged[k] = v;
  }
  const body = merged as unknown as FormationBody;
  if (!POLICIES.includes(body.coordination_policy)) throw new TypeError('updateFormation: policy not validated');
  if (same(body, bodyOf(f))) return { formation: f, changed: false };
  const at = ctx.core.clock.now();
  const next: Formation = {
    ...body,
    formation_id: formationId,
    version: f.version + 1,
    created_at: f.created_at,
    created_by: f.created_by,
    updated_at: at,
  };
  await checkFormationCompiles(ctx, next);
  await ctx.iam.assertMayChangeShared(
    auth,
    { kind: 'formation', id: formationId },
    await formationReach(ctx, formationId),
    'formation.update',
  );
  await ctx.core.store.write(async (tx) => {
    await headAt(tx, formationId, f.version);
    await repo.insertFormationVersion(tx, formationId, body, {
      version: next.version,
      change_kind: 'updated',
      change_billet: null,
      created_at: at,
      created_by: auth.principal.id,
    });
    await ctx.iam.audit(tx, {
      at,
      actor: auth.principal.id,
      action: 'formation.update',
      target: formationId,
      outcome: 'ok',
      details: { version: next.version, fields: Object.keys(patch) },
    });
  });
  return { formation: next, changed: true };
}

export interface BilletPatch {
  role_label?: string | undefined;
  required_skills?: string[] | undefined;
  reports_to?: string | null | undefined;
  authority_cap?: unknown;
  /** `null` removes the step policy field. */
  timeout_ms?: number | null | undefined;
  retry?: unknown;
  tool_choice?: unknown;
}

/** The billet of the formation's latest version, or 404. */
async function currentBillet(ctx: TeamsContext, formationId: string, billetId: string): Promise<{ f: Formation; b: Billet }> {
  const f = await getFormation(ctx, formationId);
  if (!f) throw notFound('formation');
  const b = await getBillet(ctx, billetId);
  if (b?.formation_id !== formationId) throw notFound('billet');
  return { f, b };
}

/** Changes a billet: a new version unless nothing changed. */
export async function updateBillet(
  ctx: TeamsContext,
  auth: AuthContext,
  formationId: string,
  billetId: string,
  patch: BilletPatch,
): Promise<{ billet: Billet; version: number; changed: boolean }> {
  const { iam } = ctx;
  const actor = auth.principal.id;
  // The step policy as it will be (null removes a field), checked before anything else: 400 naming the field.
  const policy = billetPolicy({
    ...(patch.timeout_ms !== undefined && patch.timeout_ms !== null ? { timeout_ms: patch.timeout_ms } : {}),
    ...(patch.retry !== undefined && patch.retry !== null ? { retry: patch.retry } : {}),
    ...(patch.tool_choice !== undefined && patch.tool_choice !== null ? { tool_choice: patch.tool_choice } : {}),
  });
  const { f, b } = await currentBillet(ctx, formationId, billetId);
  await iam.assertMayChangeShared(auth, { kind: 'formation', id: formationId }, await formationReach(ctx, formationId), 'billet.update');
  const billets = await listBillets(ctx, f);
  const byId = new Map(billets.map((x) => [x.billet_id, x]));
  if (patch.required_skills !== undefined) await resolveSkillRefs(ctx, patch.required_skills, 'required_skills');
  let cap = b.authority_cap;
  if (patch.authority_cap !== undefined) {
    cap = parseAuthority(patch.authority_cap);
    checkTools(ctx.tools, cap, 'authority_cap');
    await checkContracts(ctx, cap, 'authority_cap');
    await iam.assertWithinCaller(auth, { envelope: cap }, { action: 'billet.update', target: billetId });
  }
  const reportsTo = patch.reports_to === undefined ? b.reports_to : patch.reports_to;
  if (reportsTo !== null) {
    if (!byId.has(reportsTo) || reportsTo === billetId) {
      throw invalid('reports_to must name another billet of the same formation', { reason: 'unknown_reports_to', field: 'reports_to' });
    }
    // Walking up from the new manager must not come back to this billet.
    const path = [billetId];
    for (let cur: string | null = reportsTo; cur !== null; cur = byId.get(cur)?.reports_to ?? null) {
      path.push(cur);
      if (cur === billetId) {
        throw invalid(`reporting lines would form a cycle: ${path.join(' -> ')}`, { reason: 'reports_to_cycle', cycle: path });
      }
      if (path.length > billets.length + 1) break;
    }
    await assertWithinManager(ctx, actor, 'billet.update', formationId, cap, byId.get(reportsTo)!);
  }
  const reports = billets.filter((x) => x.reports_to === billetId && !isSubset(x.authority_cap, cap).ok);
  if (reports.length) {
    const details = {
      reason: 'over_authority' as const,
      billet_id: billetId,
      reports: reports.map((x) => x.billet_id),
      formation_id: formationId,
    };
    await iam.auditNow({ actor, action: 'billet.update', target: formationId, outcome: 'refused', details });
    throw new ServiceError('invalid_request', 'the new authority_cap no longer covers the caps of the billets reporting to it', {
      details,
    });
  }
  const at = ctx.core.clock.now();
  const { timeout_ms: oldTimeout, retry: oldRetry, tool_choice: oldChoice, ...rest } = b;
  const timeout = patch.timeout_ms === undefined ? oldTimeout : (policy.timeout_ms ?? undefined);
  const retry = patch.retry === undefined ? oldRetry : (policy.retry ?? undefined);
  const toolChoice = patch.tool_choice === undefined ? oldChoice : (policy.tool_choice ?? undefined);
  // The cap as it will be must honour the choice as it will be (either may change here).
  checkToolChoice(toolChoice, cap);
  const next: Billet = {
    ...rest,
    ...(timeout !== undefined ? { timeout_ms: timeout } : {}),
    ...(retry !== undefined ? { retry } : {}),
    ...(toolChoice !== undefined ? { tool_choice: toolChoice } : {}),
    role_label: patch.role_label ?? b.role_label,
    required_skills: patch.required_skills ? [...patch.required_skills] : b.required_skills,
    reports_to: reportsTo,
    authority_cap: cap,
    updated_at: at,
    updated_by: actor,
  };
  const unchanged = (x: Billet) => ({
    r: x.role_label,
    s: x.required_skills,
    t: x.reports_to,
    c: x.authority_cap,
    o: x.timeout_ms ?? null,
    y: x.retry ?? null,
    k: x.tool_choice ?? null,
  });
  if (same(unchanged(next), unchanged(b))) return { billet: b, version: f.version, changed: false };
  const version = f.version + 1;
  await ctx.core.store.write(async (tx) => {
    const head = await headAt(tx, formationId, f.version);
    if (reportsTo !== null) {
      const parent = await repo.billetById(tx, reportsTo);
      if (parent?.formation_id !== formationId)
        throw invalid('reports_to must name a billet of the same formation', { reason: 'unknown_reports_to', field: 'reports_to' });
      if (!isSubset(cap, parent.authority_cap).ok) throw overAuthority(formationId, cap, parent);
    }
    await repo.closeBillet(tx, billetId, version);
    await repo.insertBillet(tx, next, version);
    await repo.insertFormationVersion(tx, formationId, bodyOf(head), {
      version,
      change_kind: 'billet_updated',
      change_billet: billetId,
      created_at: at,
      created_by: actor,
    });
    await iam.audit(tx, {
      at,
      actor,
      action: 'billet.update',
      target: billetId,
      outcome: 'ok',
      details: { formation_id: formationId, version, fields: Object.keys(patch) },
    });
  });
  return { billet: next, version, changed: true };
}

/** The stages (`pre:<i>`, `post:<i>`) of `f` that name `billetId` as a seat, themselves or in a body (plain JSON). */
function stagesSeatedOn(f: Formation, billetId: string): string[] {
  const names = (x: unknown): boolean =>
    Array.isArray(x)
      ? x.some(names)
      : typeof x === 'object' && x !== null && Object.entries(x).some(([k, v]) => (k === 'seat' && v === billetId) || names(v));
  const out: string[] = [];
  for (const side of ['pre', 'post'] as const) for (const [i, s] of (f[side] ?? []).entries()) if (names(s)) out.push(`${side}:${i}`);
  return out;
}

/** Removes a billet from the formation (a new version); refused while billets report to it or a stage is seated on it. */
export async function removeBillet(ctx: TeamsContext, auth: AuthContext, formationId: string, billetId: string): Promise<Formation> {
  const { f } = await currentBillet(ctx, formationId, billetId);
  await ctx.iam.assertMayChangeShared(
    auth,
    { kind: 'formation', id: formationId },
    await formationReach(ctx, formationId),
    'billet.delete',
  );
  const reports = (await listBillets(ctx, f)).filter((x) => x.reports_to === billetId).map((x) => x.billet_id);
  if (reports.length) {
    throw conflict('billets report to this billet: remove them or change their reports_to first', {
      reason: 'billet_has_reports',
      billets: reports,
    });
  }
  const stages = stagesSeatedOn(f, billetId);
  if (stages.length) {
    throw conflict('a stage names this billet as its seat: change or remove the stage first', { reason: 'billet_seats_stage', stages });
  }
  const at = ctx.core.clock.now();
  const version = f.version + 1;
  await ctx.core.store.write(async (tx) => {
    const head = await headAt(tx, formationId, f.version);
    await repo.closeBillet(tx, billetId, version);
    await repo.insertFormationVersion(tx, formationId, bodyOf(head), {
      version,
      change_kind: 'billet_removed',
      change_billet: billetId,
      created_at: at,
      created_by: auth.principal.id,
    });
    await ctx.iam.audit(tx, {
      at,
      actor: auth.principal.id,
      action: 'billet.remove',
      target: billetId,
      outcome: 'ok',
      details: { formation_id: formationId, version },
    });
  });
  return { ...f, version, updated_at: at };
}

/** Deletes a formation with all its versions; refused (409 in_use) while a crew uses it. */
export async function deleteFormation(ctx: TeamsContext, auth: AuthContext, formationId: string): Promise<void> {
  if (!(await getFormation(ctx, formationId))) throw notFound('formation');
  await ctx.core.store.write(async (tx) => {
    if (!(await repo.formationById(tx, formationId))) throw notFound('formation');
    const users = await formationUsers(tx, formationId);
    if (anyUser(users)) throw inUse('formation', formationId, users, 'delete its crews first');
    await repo.deleteFormation(tx, formationId);
    await ctx.iam.audit(tx, { actor: auth.principal.id, action: 'formation.delete', target: formationId, outcome: 'ok' });
  });
}

/** One entry of a formation's version list. */
export interface VersionSummary {
  version: number;
  change: { kind: ChangeKind; billet_id: string | null };
  created_at: number;
  created_by: string;
}

function summary(r: repo.FormationVersionRow): VersionSummary {
  // Every writer of a version names one of CHANGE_KINDS (the migration that introduced versions: `migrated`).
  if (!isChangeKind(r.change_kind)) throw new TypeError(`a formation version with an unknown change kind: ${r.change_kind}`);
  return {
    version: r.version,
    change: { kind: r.change_kind, billet_id: r.change_billet },
    created_at: r.created_at,
    created_by: r.created_by,
  };
}

/** A formation's versions, oldest first, and how many there are. */
export async function listVersions(
  ctx: TeamsContext,
  formationId: string,
  limit: number,
  offset: number,
): Promise<{ items: VersionSummary[]; total: number }> {
  if (!(await getFormation(ctx, formationId))) throw notFound('formation');
  const r = await repo.listFormationVersions(ctx.core.store, formationId, limit, offset);
  return { items: r.items.map(summary), total: r.total };
}

/** One version: the formation as it was, its billets, what changed, and its formation hash (null when it does not compile alone). */
export async function getVersion(
  ctx: TeamsContext,
  formationId: string,
  version: number,
): Promise<{ formation: Formation; billets: Billet[]; summary: VersionSummary; formationHash: string | null }> {
  const formation = await getFormation(ctx, formationId, version);
  const row = formation ? await repo.formationVersionRow(ctx.core.store, formationId, version) : undefined;
  if (!formation || !row) throw notFound('formation version');
  let formationHash: string | null = null;
  try {
    formationHash = (await compileFor(ctx, formation)).formationHash;
  } catch {
    formationHash = null;
  }
  return { formation, billets: await listBillets(ctx, formation), summary: summary(row), formationHash };
}
