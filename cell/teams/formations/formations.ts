/**
 * Formations, billets and crews.
 *
 * - A formation is versioned: creating it writes version 1 (no billets);
 *   adding a billet here, and every other change (versions.ts), writes the
 *   next version. Old versions never change.
 * - A billet's `reports_to` names a billet of the same formation that already
 *   exists (so adding billets can never form a cycle), and its
 *   `authority_cap` must stay inside its manager's cap (core `isSubset`);
 *   otherwise the billet is refused at authoring (400, reason
 *   `over_authority`, `details.fields` naming each offending field) and the
 *   refusal is audited.
 * - A crew pins a version and binds one active agent to every billet of it
 *   (`assignments`); the seat's authority is the agent's authority ∩ the
 *   billet cap (the compiler intersects). A new version of the formation
 *   leaves the crew (and its runs) as they are until it is upgraded.
 */
import { checkInputSchema } from '../../../core/input-schema/check.ts';
import { isSubset, type AuthorityEnvelope } from '../../../core/authority/envelope.ts';
import { stepPolicyOf, stepPolicyProblem, type StepPolicy } from '../../../core/engine/policy.ts';
import { canonicalToolChoice, seatToolChoiceProblem, toolChoiceProblem, type ToolChoice } from '../../../core/engine/tool-choice.ts';
import { parseAuthority } from '../../../core/authority/schema.ts';
import { ServiceError, invalid, notFound } from '../../../core/errors.ts';
import type { AuthContext } from '../../context.ts';
import { newId } from '../../ids.ts';
import { agentActive, getAgent } from '../resources/agents.ts';
import type { CrewInputs, TeamsContext } from '../context.ts';
import { formationReach } from '../reach.ts';
import * as repo from './repository.ts';
import { checkContracts, checkTools, resolveSkillRefs } from '../resources/resources.ts';
import { iso } from '../schema.ts';
import type { Billet, Crew, Formation, FormationBody } from './types.ts';
import type { BilletView, CrewView, FormationView } from './routes-formations.ts';

/** The formation at its latest version, or at `version` when given. */
export function getFormation(ctx: TeamsContext, id: string, version?: number): Promise<Formation | undefined> {
  return version === undefined ? repo.formationById(ctx.core.store, id) : repo.formationAt(ctx.core.store, id, version);
}
/**
 * The crew, the formation version it pins and that version's billets (the formation and the billets
 * read together), through the cache of the crews runs start from (TeamsContext.crewInputs): frozen,
 * shared by every caller.
 */
export function crewInputs(ctx: TeamsContext, crewId: string): Promise<CrewInputs> {
  return ctx.crewInputs.read(crewId, async () => {
    const crew = await getCrew(ctx, crewId);
    if (!crew) return frozen({ crew: undefined, formation: undefined, billets: [] });
    const [formation, billets] = await Promise.all([
      crewFormation(ctx, crew),
      listBillets(ctx, { formation_id: crew.formation_id, version: crew.formation_version }),
    ]);
    return frozen({ crew, formation, billets });
  });
}

/** `x` frozen to its leaves (a cached value: a caller that would change it throws instead). */
export function frozen<T>(x: T): T {
  if (x !== null && typeof x === 'object' && !Object.isFrozen(x)) {
    Object.freeze(x);
    for (const v of Object.values(x)) frozen(v);
  }
  return x;
}

/** The formation at the version a crew pins. */
export function crewFormation(ctx: TeamsContext, crew: Crew): Promise<Formation | undefined> {
  return repo.formationAt(ctx.core.store, crew.formation_id, crew.formation_version);
}
export function listFormations(ctx: TeamsContext, limit: number, offset: number): Promise<Formation[]> {
  return repo.listFormations(ctx.core.store, limit, offset);
}
export const formationView = (f: Formation): FormationView => ({ ...f, created_at: iso(f.created_at), updated_at: iso(f.updated_at) });

export async function createFormation(
  ctx: TeamsContext,
  actor: string,
  body: FormationBody,
  check?: (f: Formation) => Promise<void>,
): Promise<Formation> {
  if (body.input_schema) checkInputSchema(body.input_schema);
  const now = ctx.core.clock.now();
  const f: Formation = { formation_id: newId('frm'), version: 1, ...body, created_at: now, created_by: actor, updated_at: now };
  await check?.(f);
  await ctx.core.store.write(async (tx) => {
    await repo.insertFormation(tx, f, body);
    await ctx.iam.audit(tx, { at: f.created_at, actor, action: 'formation.create', target: f.formation_id, outcome: 'ok' });
  });
  return f;
}

/** The billets of a formation version, in position order. */
export function listBillets(ctx: TeamsContext, f: Pick<Formation, 'formation_id' | 'version'>): Promise<Billet[]> {
  return repo.listBillets(ctx.core.store, f.formation_id, f.version);
}
/** The billet as the latest version of its formation has it. */
export function getBillet(ctx: TeamsContext, id: string): Promise<Billet | undefined> {
  return repo.billetById(ctx.core.store, id);
}
export const billetView = (b: Billet, formationVersion: number): BilletView => ({
  ...b,
  formation_version: formationVersion,
  created_at: iso(b.created_at),
  updated_at: iso(b.updated_at),
});

/** Adds a billet after the authoring checks (a new formation version); over-authority is refused and audited. */
export async function addBillet(
  ctx: TeamsContext,
  auth: AuthContext,
  formationId: string,
  input: {
    role_label: string;
    required_skills: string[];
    reports_to?: string | null | undefined;
    authority_cap: unknown;
    timeout_ms?: number | undefined;
    retry?: unknown;
    tool_choice?: unknown;
  },
): Promise<{ billet: Billet; version: number }> {
  const { core, iam } = ctx;
  const policy = billetPolicy(input);
  const f = await getFormation(ctx, formationId);
  if (!f) throw notFound('formation');
  await resolveSkillRefs(ctx, input.required_skills, 'required_skills');
  const cap = parseAuthority(input.authority_cap);
  checkTools(ctx.tools, cap, 'authority_cap');
  checkToolChoice(policy.tool_choice, cap);
  await checkContracts(ctx, cap, 'authority_cap');
  const actor = auth.principal.id;
  await iam.assertWithinCaller(auth, { envelope: cap }, { action: 'billet.create', target: formationId });
  await iam.assertMayChangeShared(auth, { kind: 'formation', id: formationId }, await formationReach(ctx, formationId), 'billet.create');
  const reportsTo = input.reports_to ?? null;
  if (reportsTo !== null) {
    const parent = await getBillet(ctx, reportsTo);
    if (!parent || parent.formation_id !== formationId) {
      throw invalid('reports_to must name a billet of the same formation', { reason: 'unknown_reports_to', field: 'reports_to' });
    }
    await assertWithinManager(ctx, actor, 'billet.create', formationId, cap, parent);
  }
  const at = core.clock.now();
  const billetId = newId('blt');
  return core.store.write(async (tx) => {
    const head = await repo.formationById(tx, formationId);
    if (!head) throw notFound('formation');
    if ((await repo.countBillets(tx, formationId, head.version)) >= MAX_BILLETS) {
      throw invalid(`a formation holds at most ${MAX_BILLETS} billets`, { reason: 'too_many_billets' });
    }
    if (reportsTo !== null) {
      // The manager as it is now (it may have changed since it was checked above).
      const parent = await repo.billetById(tx, reportsTo);
      if (parent?.formation_id !== formationId) {
        throw invalid('reports_to must name a billet of the same formation', { reason: 'unknown_reports_to', field: 'reports_to' });
      }
      if (!isSubset(cap, parent.authority_cap).ok) throw overAuthority(formationId, cap, parent);
    }
    const b: Billet = {
      billet_id: billetId,
      formation_id: formationId,
      position: await repo.nextBilletPosition(tx, formationId),
      role_label: input.role_label,
      required_skills: [...input.required_skills],
      reports_to: reportsTo,
      authority_cap: cap,
      ...policy,
      created_at: at,
      created_by: actor,
      updated_at: at,
      updated_by: actor,
    };
    const version = head.version + 1;
    await repo.insertBillet(tx, b, version);
    await repo.insertFormationVersion(tx, formationId, bodyOf(head), {
      version,
      change_kind: 'billet_added',
      change_billet: billetId,
      created_at: at,
      created_by: actor,
    });
    await iam.audit(tx, {
      at,
      actor,
      action: 'billet.create',
      target: b.billet_id,
      outcome: 'ok',
      details: { formation_id: formationId, version },
    });
    return { billet: b, version };
  });
}

/**
 * A billet's step policy as authored (timeout_ms, retry, tool_choice), validated: 400 invalid_step_policy naming
 * the field. `tool_choice` comes back in its canonical form (absent for `auto`: core/engine/tool-choice.ts).
 */
export function billetPolicy(input: { timeout_ms?: unknown; retry?: unknown; tool_choice?: unknown }): StepPolicy & {
  tool_choice?: Exclude<ToolChoice, 'auto'>;
} {
  const fields: Record<string, unknown> = {};
  if (input.timeout_ms !== undefined) fields['timeout_ms'] = input.timeout_ms;
  if (input.retry !== undefined) fields['retry'] = input.retry;
  const problem = stepPolicyProblem(fields);
  if (problem !== null) throw invalid(problem.problem, { reason: 'invalid_step_policy', field: problem.field });
  if (input.tool_choice !== undefined) {
    const tp = toolChoiceProblem(input.tool_choice);
    if (tp !== null) throw invalid(tp, { reason: 'invalid_step_policy', field: 'tool_choice' });
  }
  const choice = canonicalToolChoice(input.tool_choice as ToolChoice | undefined);
  return { ...stepPolicyOf(fields), ...(choice !== undefined ? { tool_choice: choice } : {}) };
}

/** 400 invalid_step_policy when the billet's cap cannot honour its tool_choice (a named tool it does not grant, a forced call with none). */
export function checkToolChoice(choice: ToolChoice | undefined, cap: AuthorityEnvelope): void {
  const p = seatToolChoiceProblem(choice, { allowed_tools: cap.allowed_tools ?? [], permission_mode: cap.permission_mode ?? 'ask' });
  if (p !== null) throw invalid(p, { reason: 'invalid_step_policy', field: 'tool_choice' });
}

/** A formation holds at most this many billets in one version. */
export const MAX_BILLETS = 10_000;

/** The authored body of a formation (what a version stores). */
export function bodyOf(f: Formation): FormationBody {
  const { formation_id, version, created_at, created_by, updated_at, ...body } = f;
  return body;
}

/** Refuses (400 over_authority, audited) a cap that is not inside its manager's. */
export async function assertWithinManager(
  ctx: TeamsContext,
  actor: string,
  action: string,
  formationId: string,
  cap: AuthorityEnvelope,
  parent: Billet,
): Promise<void> {
  if (isSubset(cap, parent.authority_cap).ok) return;
  const err = overAuthority(formationId, cap, parent);
  await ctx.iam.auditNow({ actor, action, target: formationId, outcome: 'refused', details: { ...err.details } });
  throw err;
}

/** 400 over_authority: `cap` is not inside the cap of `parent` (details.fields names where). */
export function overAuthority(formationId: string, cap: AuthorityEnvelope, parent: Billet): ServiceError {
  const sub = isSubset(cap, parent.authority_cap);
  const fields = sub.ok ? [] : sub.fields;
  return new ServiceError('invalid_request', `the billet's authority_cap exceeds its manager's on: ${fields.join(', ')}`, {
    details: { reason: 'over_authority', fields, reports_to: parent.billet_id, formation_id: formationId },
  });
}

export function getCrew(ctx: TeamsContext, id: string): Promise<Crew | undefined> {
  return repo.crewById(ctx.core.store, id);
}
export function listCrews(ctx: TeamsContext, limit: number, offset: number): Promise<Crew[]> {
  return repo.listCrews(ctx.core.store, limit, offset);
}
export const crewView = (c: Crew): Omit<CrewView, 'graph_hash'> => ({ ...c, created_at: iso(c.created_at) });

/** Checks that every billet has an active agent and nothing else is assigned. */
export async function checkAssignments(ctx: TeamsContext, billets: readonly Billet[], assignments: Record<string, string>): Promise<void> {
  const ids = new Set(billets.map((b) => b.billet_id));
  const unbound = billets.filter((b) => !assignments[b.billet_id]).map((b) => b.billet_id);
  const extra = Object.keys(assignments).filter((k) => !ids.has(k));
  if (billets.length === 0) throw invalid('the formation has no billets', { reason: 'empty_formation' });
  if (unbound.length) throw invalid('every billet needs an agent', { reason: 'unbound_seat', billets: unbound });
  if (extra.length) throw invalid('assignments name billets outside the formation', { reason: 'unknown_billet', billets: extra });
  const bad: string[] = [];
  for (const [b, a] of Object.entries(assignments)) {
    if (!(await getAgent(ctx, a)) || !(await agentActive(ctx, a))) bad.push(b);
  }
  if (bad.length) throw invalid('assignments name agents that do not exist or are not active', { reason: 'unknown_agent', billets: bad });
}
