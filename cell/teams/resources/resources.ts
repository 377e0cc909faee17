/**
 * Skills, blueprints and governing contracts: validation and storage.
 *
 * - A skill has one of eight kinds; its `definition` is checked per kind
 *   (tool skills name a catalog tool, transformer skills carry CEL, chains
 *   hold steps).
 * - A blueprint references skills as `skill:<name>`; every reference must
 *   resolve when the blueprint is authored. `system_prompt_ref` is either
 *   `skill:<name>` of a prompt skill (its `definition.prompt`) or the prompt
 *   text itself. `authority_template` is an authority envelope (core schema).
 * - A contract holds named CEL rules, parsed at authoring; the value gate
 *   evaluates them over `tool`, `args`, `authority` and `context`.
 */
import { compileExpr } from '../../../core/expr/compile.ts';
import { parseAuthority } from '../../../core/authority/schema.ts';
import type { AuthorityEnvelope } from '../../../core/authority/envelope.ts';
import { conflict, invalid } from '../../../core/errors.ts';
import type { AuthContext } from '../../context.ts';
import { newId } from '../../ids.ts';
import type { Tools } from '../../tools/api.ts';
import type { TeamsContext } from '../context.ts';
import * as repo from './repository.ts';
import { SKILL_KINDS, iso, type SkillKindName } from '../schema.ts';

export { SKILL_KINDS, type SkillKindName } from '../schema.ts';
import type { Blueprint, Contract, ContractRule, Skill } from './types.ts';
import type { BlueprintView, ContractView, SkillView } from './routes-resources.ts';

export const MAX_EXPR = 2048;

/** Variables of a contract rule (the value gate) and of a transformer skill. */
export const CONTRACT_VARIABLES = ['tool', 'args', 'authority', 'context'] as const;
export const TRANSFORM_VARIABLES = ['input', 'context'] as const;

/** Parses and checks a CEL expression at authoring (core/expr limits); refuses with the path of the field. */
export function checkCel(expr: unknown, path: string, variables: readonly string[] = TRANSFORM_VARIABLES): string {
  if (typeof expr !== 'string' || expr.length === 0 || expr.length > MAX_EXPR) {
    throw invalid(`${path} must be a CEL expression of 1 to ${MAX_EXPR} characters`, { reason: 'invalid_expression', field: path });
  }
  const r = compileExpr(expr, { variables });
  if (!r.ok)
    throw invalid(`${path} is not a valid expression: ${r.error.message}`, {
      reason: 'invalid_expression',
      field: path,
      code: r.error.code,
    });
  return expr;
}

function checkDefinition(tools: Tools, kind: SkillKindName, def: Record<string, unknown> | undefined, path: string, depth = 0): void {
  if (depth > 2) throw invalid('skill chains nest at most 2 deep', { reason: 'invalid_skill', field: path });
  const d = def ?? {};
  if (kind === 'tool') {
    if (typeof d['tool'] !== 'string' || !tools.has(d['tool']))
      throw invalid(`${path}.tool must name a tool of the catalog`, { reason: 'invalid_skill', field: `${path}.tool` });
  } else if (kind === 'transformer') {
    checkCel(d['expr'], `${path}.expr`);
  } else if (kind === 'chain') {
    const steps = d['steps'];
    if (!Array.isArray(steps) || steps.length === 0 || steps.length > 16)
      throw invalid(`${path}.steps must hold 1 to 16 skills`, { reason: 'invalid_skill', field: `${path}.steps` });
    steps.forEach((s: unknown, i) => {
      const st = s as { skill_kind?: unknown; definition?: unknown };
      if (!SKILL_KINDS.includes(st?.skill_kind as SkillKindName))
        throw invalid(`${path}.steps.${i}.skill_kind is not a skill kind`, { reason: 'invalid_skill', field: `${path}.steps.${i}` });
      checkDefinition(
        tools,
        st.skill_kind as SkillKindName,
        st.definition as Record<string, unknown> | undefined,
        `${path}.steps.${i}.definition`,
        depth + 1,
      );
    });
  } else {
    if (d['prompt'] !== undefined && (typeof d['prompt'] !== 'string' || d['prompt'].length > 20_000))
      throw invalid(`${path}.prompt must be a string`, { reason: 'invalid_skill', field: `${path}.prompt` });
    if (kind === 'classifier') {
      const labels = d['labels'];
      if (!Array.isArray(labels) || labels.length < 2 || !labels.every((l) => typeof l === 'string' && l.length > 0)) {
        throw invalid(`${path}.labels must list at least two labels`, { reason: 'invalid_skill', field: `${path}.labels` });
      }
    }
  }
}

export function prepareSkill(
  tools: Tools,
  input: {
    name: string;
    skill_kind: SkillKindName;
    model_preference?: string | undefined;
    definition?: Record<string, unknown> | undefined;
  },
  by: string,
  at: number,
): Skill {
  checkDefinition(tools, input.skill_kind, input.definition, 'definition');
  return {
    skill_id: newId('skl'),
    name: input.name,
    skill_kind: input.skill_kind,
    model_preference: input.model_preference ?? null,
    definition: input.definition ?? null,
    created_at: at,
    created_by: by,
  };
}

export function getSkill(ctx: TeamsContext, id: string): Promise<Skill | undefined> {
  return repo.skillById(ctx.core.store, id);
}
export function getSkillByName(ctx: TeamsContext, name: string): Promise<Skill | undefined> {
  return repo.skillByName(ctx.core.store, name);
}
export function listSkills(ctx: TeamsContext, limit: number, offset: number): Promise<Skill[]> {
  return repo.listSkills(ctx.core.store, limit, offset);
}
export const skillView = (s: Skill): SkillView => ({ ...s, created_at: iso(s.created_at) });

/** Creates a skill (names are unique: 409 name_taken), audited. */
export async function createSkill(ctx: TeamsContext, actor: string, input: Parameters<typeof prepareSkill>[1]): Promise<Skill> {
  if (await getSkillByName(ctx, input.name)) throw conflict(`a skill named '${input.name}' exists`, { reason: 'name_taken' });
  const s = prepareSkill(ctx.tools, input, actor, ctx.core.clock.now());
  await ctx.core.store.write(async (tx) => {
    await repo.insertSkill(tx, s);
    await ctx.iam.audit(tx, { at: s.created_at, actor: s.created_by, action: 'skill.create', target: s.skill_id, outcome: 'ok' });
  });
  return s;
}

/** Resolves `skill:<name>` references; refuses naming every unknown one. */
export async function resolveSkillRefs(ctx: TeamsContext, refs: readonly string[], field: string): Promise<Skill[]> {
  const out: Skill[] = [];
  const unknown: string[] = [];
  const malformed: string[] = [];
  for (const ref of refs) {
    const m = /^skill:(.+)$/.exec(ref);
    if (!m) {
      malformed.push(ref);
      continue;
    }
    const s = await getSkillByName(ctx, m[1]!);
    if (!s) unknown.push(ref);
    else out.push(s);
  }
  if (malformed.length)
    throw invalid(`${field} entries must be written skill:<name>`, { reason: 'invalid_skill_ref', field, refs: malformed });
  if (unknown.length) throw invalid(`${field} names skills that do not exist`, { reason: 'unknown_skill', field, refs: unknown });
  return out;
}

// ---------------------------------------------------------------- blueprints

export async function prepareBlueprint(
  ctx: TeamsContext,
  input: {
    name: string;
    role_label: string;
    system_prompt_ref?: string | undefined;
    model_preference?: string | undefined;
    required_skills?: string[] | undefined;
    authority_template?: unknown;
    scope?: string | undefined;
  },
  by: string,
  at: number,
): Promise<Blueprint> {
  await resolveSkillRefs(ctx, input.required_skills ?? [], 'required_skills');
  if (input.system_prompt_ref?.startsWith('skill:')) {
    const [s] = await resolveSkillRefs(ctx, [input.system_prompt_ref], 'system_prompt_ref');
    if (typeof s?.definition?.['prompt'] !== 'string')
      throw invalid('system_prompt_ref must name a skill with definition.prompt', {
        reason: 'invalid_prompt_ref',
        field: 'system_prompt_ref',
      });
  }
  const authority = input.authority_template === undefined ? {} : parseAuthority(input.authority_template);
  checkTools(ctx.tools, authority, 'authority_template');
  return {
    blueprint_id: newId('bp'),
    name: input.name,
    role_label: input.role_label,
    system_prompt_ref: input.system_prompt_ref ?? null,
    model_preference: input.model_preference ?? null,
    required_skills: [...(input.required_skills ?? [])],
    authority_template: authority,
    scope: input.scope ?? 'workspace',
    created_at: at,
    created_by: by,
  };
}

/** Every allowed tool must be in the catalog. */
export function checkTools(tools: Tools, a: AuthorityEnvelope, field: string): void {
  const unknown = (a.allowed_tools ?? []).filter((t) => !tools.has(t));
  if (unknown.length)
    throw invalid(`${field}.allowed_tools names tools that are not in the catalog`, {
      reason: 'unknown_tool',
      field: `${field}.allowed_tools`,
      tools: unknown,
    });
}

export function getBlueprint(ctx: TeamsContext, id: string): Promise<Blueprint | undefined> {
  return repo.blueprintById(ctx.core.store, id);
}
export function listBlueprints(ctx: TeamsContext, limit: number, offset: number): Promise<Blueprint[]> {
  return repo.listBlueprints(ctx.core.store, limit, offset);
}
export const blueprintView = (b: Blueprint): BlueprintView => ({ ...b, created_at: iso(b.created_at) });

/**
 * Creates a blueprint: skill references resolved, contracts known, and its
 * authority template inside the caller's (403 wider_than_caller, audited).
 */
export async function createBlueprint(
  ctx: TeamsContext,
  auth: AuthContext,
  input: Parameters<typeof prepareBlueprint>[1],
): Promise<Blueprint> {
  const b = await prepareBlueprint(ctx, input, auth.principal.id, ctx.core.clock.now());
  await checkContracts(ctx, b.authority_template, 'authority_template');
  await ctx.iam.assertWithinCaller(auth, { envelope: b.authority_template }, { action: 'blueprint.create', target: b.name });
  await ctx.core.store.write(async (tx) => {
    await repo.insertBlueprint(tx, b);
    await ctx.iam.audit(tx, { at: b.created_at, actor: b.created_by, action: 'blueprint.create', target: b.blueprint_id, outcome: 'ok' });
  });
  return b;
}

/** The system prompt text of a blueprint. */
export async function blueprintPrompt(ctx: TeamsContext, b: { system_prompt_ref: string | null }): Promise<string | null> {
  const ref = b.system_prompt_ref;
  if (!ref) return null;
  if (ref.startsWith('skill:')) {
    const s = await getSkillByName(ctx, ref.slice(6));
    const p = s?.definition?.['prompt'];
    return typeof p === 'string' ? p : null;
  }
  return ref;
}

// ---------------------------------------------------------------- contracts

export function prepareContract(
  input: { name: string; description?: string | undefined; rules: ContractRule[] },
  by: string,
  at: number,
): Contract {
  const names = new Set<string>();
  input.rules.forEach((r, i) => {
    if (names.has(r.name)) throw invalid(`rule names must be unique (${r.name})`, { reason: 'duplicate_rule', field: `rules.${i}.name` });
    names.add(r.name);
    checkCel(r.expr, `rules.${i}.expr`, CONTRACT_VARIABLES);
  });
  return {
    contract_id: newId('ctr'),
    name: input.name,
    description: input.description ?? null,
    rules: input.rules,
    created_at: at,
    created_by: by,
  };
}

export function getContract(ctx: TeamsContext, id: string): Promise<Contract | undefined> {
  return repo.contractById(ctx.core.store, id);
}
export function listContracts(ctx: TeamsContext, limit: number, offset: number): Promise<Contract[]> {
  return repo.listContracts(ctx.core.store, limit, offset);
}
export const contractView = (c: Contract): ContractView => ({ ...c, created_at: iso(c.created_at) });

/** Creates a governing contract (its CEL rules parsed now), audited. */
export async function createContract(ctx: TeamsContext, actor: string, input: Parameters<typeof prepareContract>[0]): Promise<Contract> {
  const k = prepareContract(input, actor, ctx.core.clock.now());
  await ctx.core.store.write(async (tx) => {
    await repo.insertContract(tx, k);
    await ctx.iam.audit(tx, { at: k.created_at, actor: k.created_by, action: 'contract.create', target: k.contract_id, outcome: 'ok' });
  });
  return k;
}

/** Every governing contract an envelope names must exist. */
export async function checkContracts(ctx: TeamsContext, a: AuthorityEnvelope, field: string): Promise<void> {
  const ids = [...(a.governing_contract_ids ?? []), ...(a.governing_contract_id ? [a.governing_contract_id] : [])];
  const missing: string[] = [];
  for (const id of ids) if (!(await getContract(ctx, id))) missing.push(id);
  if (missing.length)
    throw invalid(`${field} names governing contracts that do not exist`, {
      reason: 'unknown_contract',
      field: `${field}.governing_contract_id`,
      contracts: missing,
    });
}
