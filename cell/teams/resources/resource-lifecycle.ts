/**
 * Changing and deleting skills, blueprints and governing contracts.
 *
 * - Skill: `model_preference` and `definition` change (the definition is
 *   checked for the skill's kind again); `name` (what references say,
 *   `skill:<name>`) and `skill_kind` do not. A formation version stores the
 *   skills its stages run, so a change reaches formations at their next
 *   version; blueprints and billets name skills, they do not copy them.
 *   Deleting is refused while a blueprint or any formation version names
 *   the skill.
 * - Blueprint: every field changes, under the authoring checks; the caller
 *   must hold the blueprint's authority template as it is and as it becomes
 *   (403 wider_than_caller). Agents minted from it keep what they copied.
 *   Deleting is refused while an agent minted from it exists (not purged).
 * - Contract: name, description and rules change (rules parsed again); every
 *   seat it governs is judged by the new rules from its next tool call.
 *   Deleting is refused while a blueprint, an agent or a formation version
 *   names it.
 *
 * Refusals of a delete in use: 409 conflict, reason in_use, details.used_by.
 */
import { canonicalJson } from '../../../core/canonical.ts';
import { notFound, inUse } from '../../../core/errors.ts';
import type { AuthContext } from '../../context.ts';
import type { TeamsContext } from '../context.ts';
import * as repo from './repository.ts';
import { checkContracts, getBlueprint, getContract, getSkill, prepareBlueprint, prepareContract, prepareSkill } from './resources.ts';
import type { Blueprint, Contract, ContractRule, Skill } from './types.ts';
import { blueprintReach, contractReach, skillReach } from '../reach.ts';
import { anyUser, blueprintUsers, contractUsers, skillUsers } from '../usage.ts';

const audit = (
  ctx: TeamsContext,
  tx: Parameters<TeamsContext['iam']['audit']>[0],
  actor: string,
  action: string,
  target: string,
  details?: Record<string, unknown>,
) => ctx.iam.audit(tx, { actor, action, target, outcome: 'ok', ...(details ? { details } : {}) });

/** Equal as JSON values (key order aside). */
export const sameJson = (a: unknown, b: unknown) =>
  canonicalJson(JSON.parse(JSON.stringify(a))) === canonicalJson(JSON.parse(JSON.stringify(b)));

const fieldsOf = (patch: object) => Object.keys(patch).filter((k) => (patch as Record<string, unknown>)[k] !== undefined);

// ---------------------------------------------------------------- skills

export interface SkillPatch {
  model_preference?: string | null | undefined;
  definition?: Record<string, unknown> | null | undefined;
}

export async function updateSkill(ctx: TeamsContext, auth: AuthContext, skillId: string, patch: SkillPatch): Promise<Skill> {
  const s = await getSkill(ctx, skillId);
  if (!s) throw notFound('skill');
  const model = patch.model_preference === undefined ? s.model_preference : patch.model_preference;
  const definition = patch.definition === undefined ? s.definition : patch.definition;
  // The same checks as at creation, for the skill's kind.
  prepareSkill(
    ctx.tools,
    { name: s.name, skill_kind: s.skill_kind, model_preference: model ?? undefined, definition: definition ?? undefined },
    auth.principal.id,
    0,
  );
  const next: Skill = { ...s, model_preference: model, definition };
  if (sameJson(next, s)) return s;
  // Every blueprint and formation naming the skill runs the new definition: the caller covers what they reach.
  await ctx.iam.assertMayChangeShared(auth, { kind: 'skill', id: skillId }, await skillReach(ctx, s.name), 'skill.update');
  await ctx.core.store.write(async (tx) => {
    if (!(await repo.skillById(tx, skillId))) throw notFound('skill');
    await repo.updateSkill(tx, next);
    await audit(ctx, tx, auth.principal.id, 'skill.update', skillId, { fields: fieldsOf(patch) });
  });
  return next;
}

export async function deleteSkill(ctx: TeamsContext, auth: AuthContext, skillId: string): Promise<Skill> {
  const s = await getSkill(ctx, skillId);
  if (!s) throw notFound('skill');
  await ctx.core.store.write(async (tx) => {
    if (!(await repo.skillById(tx, skillId))) throw notFound('skill');
    const users = await skillUsers(tx, s.name);
    if (anyUser(users)) throw inUse('skill', skillId, users, 'remove the references (skill:' + s.name + ') first');
    await repo.deleteSkill(tx, skillId);
    await audit(ctx, tx, auth.principal.id, 'skill.delete', skillId, { name: s.name });
  });
  return s;
}

// ---------------------------------------------------------------- blueprints

export interface BlueprintPatch {
  name?: string | undefined;
  role_label?: string | undefined;
  system_prompt_ref?: string | null | undefined;
  model_preference?: string | null | undefined;
  required_skills?: string[] | undefined;
  authority_template?: unknown;
  scope?: string | undefined;
}

export async function updateBlueprint(
  ctx: TeamsContext,
  auth: AuthContext,
  blueprintId: string,
  patch: BlueprintPatch,
): Promise<Blueprint> {
  const b = await getBlueprint(ctx, blueprintId);
  if (!b) throw notFound('blueprint');
  // Whoever changes a blueprint could have written it as it is.
  await ctx.iam.assertWithinCaller(auth, { envelope: b.authority_template }, { action: 'blueprint.update', target: blueprintId });
  const pick = <K extends keyof BlueprintPatch & keyof Blueprint>(k: K) => (patch[k] === undefined ? b[k] : patch[k]);
  const prepared = await prepareBlueprint(
    ctx,
    {
      name: pick('name') as string,
      role_label: pick('role_label') as string,
      system_prompt_ref: (pick('system_prompt_ref') as string | null) ?? undefined,
      model_preference: (pick('model_preference') as string | null) ?? undefined,
      required_skills: pick('required_skills') as string[],
      authority_template: pick('authority_template'),
      scope: pick('scope') as string,
    },
    b.created_by,
    b.created_at,
  );
  const next: Blueprint = { ...prepared, blueprint_id: b.blueprint_id };
  await checkContracts(ctx, next.authority_template, 'authority_template');
  await ctx.iam.assertWithinCaller(auth, { envelope: next.authority_template }, { action: 'blueprint.update', target: blueprintId });
  if (sameJson(next, b)) return b;
  await ctx.iam.assertMayChangeShared(
    auth,
    { kind: 'blueprint', id: blueprintId },
    await blueprintReach(ctx, blueprintId),
    'blueprint.update',
  );
  await ctx.core.store.write(async (tx) => {
    if (!(await repo.blueprintById(tx, blueprintId))) throw notFound('blueprint');
    await repo.updateBlueprint(tx, next);
    await audit(ctx, tx, auth.principal.id, 'blueprint.update', blueprintId, { fields: fieldsOf(patch) });
  });
  return next;
}

export async function deleteBlueprint(ctx: TeamsContext, auth: AuthContext, blueprintId: string): Promise<Blueprint> {
  const b = await getBlueprint(ctx, blueprintId);
  if (!b) throw notFound('blueprint');
  await ctx.core.store.write(async (tx) => {
    if (!(await repo.blueprintById(tx, blueprintId))) throw notFound('blueprint');
    const users = await blueprintUsers(ctx, tx, blueprintId);
    if (anyUser(users)) throw inUse('blueprint', blueprintId, users, 'delete the agents minted from it first');
    await repo.deleteBlueprint(tx, blueprintId);
    await audit(ctx, tx, auth.principal.id, 'blueprint.delete', blueprintId, { name: b.name });
  });
  return b;
}

// ---------------------------------------------------------------- contracts

export interface ContractPatch {
  name?: string | undefined;
  description?: string | null | undefined;
  rules?: ContractRule[] | undefined;
}

export async function updateContract(ctx: TeamsContext, auth: AuthContext, contractId: string, patch: ContractPatch): Promise<Contract> {
  const k = await getContract(ctx, contractId);
  if (!k) throw notFound('contract');
  const prepared = prepareContract(
    {
      name: patch.name ?? k.name,
      description: (patch.description === undefined ? k.description : patch.description) ?? undefined,
      rules: patch.rules ?? k.rules,
    },
    k.created_by,
    k.created_at,
  );
  const next: Contract = { ...prepared, contract_id: k.contract_id };
  if (sameJson(next, k)) return k;
  // The rules gate every seat the contract governs: the caller covers each of them, or manages their owners.
  await ctx.iam.assertMayChangeShared(auth, { kind: 'contract', id: contractId }, await contractReach(ctx, contractId), 'contract.update');
  await ctx.core.store.write(async (tx) => {
    if (!(await repo.contractById(tx, contractId))) throw notFound('contract');
    await repo.updateContract(tx, next);
    await audit(ctx, tx, auth.principal.id, 'contract.update', contractId, { fields: fieldsOf(patch) });
  });
  return next;
}

export async function deleteContract(ctx: TeamsContext, auth: AuthContext, contractId: string): Promise<Contract> {
  const k = await getContract(ctx, contractId);
  if (!k) throw notFound('contract');
  await ctx.core.store.write(async (tx) => {
    if (!(await repo.contractById(tx, contractId))) throw notFound('contract');
    const users = await contractUsers(ctx, tx, contractId);
    if (anyUser(users)) throw inUse('contract', contractId, users, 'remove it from their authority (governing_contract_id) first');
    await repo.deleteContract(tx, contractId);
    await audit(ctx, tx, auth.principal.id, 'contract.delete', contractId, { name: k.name });
  });
  return k;
}

/** A skill name or kind in a PATCH (kept for the message of the immutable refusal). */
export const SKILL_IMMUTABLE = {
  name: 'skills are referenced as skill:<name>; create a skill with the new name',
  skill_kind: 'create a skill of the other kind',
};
