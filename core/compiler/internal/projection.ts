/**
 * Validation and canonical projection of a formation and its billets: the
 * document whose content hash is the formation hash (the replay anchor).
 *
 * Projection rules (format version 1):
 * - formation: name, coordination_policy (default sequential), consensus_mode
 *   (default majority), limits (resolved against DEFAULT_LIMITS), topology
 *   (object; canonical JSON sorts keys), prompt (or null), pre and post stages
 *   (arrays, order kept: they are sequences), billets;
 * - billets sorted by id (code-unit order); each: id, role_label,
 *   required_skills (sorted, unique), reports_to (or null), position (or null),
 *   authority_cap normalized (core/authority/envelope normalizeAuthority: lists
 *   sorted and unique, absent fields stay absent, one spelling of contracts);
 * - ids of the formation row, timestamps and owners are not part of it.
 * Canonical JSON is RFC 8785, so key order and billet insertion order never
 * change the hash.
 */
import { normalizeAuthority, PERMISSION_MODES, type AuthorityEnvelope } from '../../authority/envelope.ts';
import type { CoordinationPolicy, GraphLimits } from '../../engine/types.ts';
import type { JsonObject } from '../../journal/record.ts';
import type { BilletInput, CompileErrorCode, FormationInput, StageSpec } from '../types.ts';
import { sortedKeys } from '../../json-hash.ts';
import { stepPolicyOf, stepPolicyProblem, type RetryPolicy } from '../../engine/policy.ts';
import { canonicalToolChoice, seatToolChoiceProblem, toolChoiceProblem, type ToolChoice } from '../../engine/tool-choice.ts';

export const FORMATION_FORMAT_VERSION = 1;
export const MAX_BILLETS = 50_000;
export const MAX_STAGES = 32;

/** Defaults of the graph limits; a formation may lower or raise them up to HARD_LIMITS. */
export const DEFAULT_LIMITS: GraphLimits = { max_steps: 1_000, max_steps_per_seat: 100, max_tool_rounds: 8, default_max_tokens: 1_024 };
export const HARD_LIMITS: GraphLimits = {
  max_steps: 100_000,
  max_steps_per_seat: 10_000,
  max_tool_rounds: 64,
  default_max_tokens: 200_000,
};

const POLICIES: readonly CoordinationPolicy[] = ['sequential', 'parallel', 'consensus', 'manager-delegates'];
const STAGE_KINDS = ['gate', 'human_approval', 'transform', 'timer', 'conditional', 'tool', 'skill', 'map', 'loop'];

export interface ProjectedBillet {
  id: string;
  role_label: string;
  required_skills: string[];
  reports_to: string | null;
  position: number | null;
  authority_cap: AuthorityEnvelope;
  /** Present only when authored (a formation without step policies hashes as before). */
  timeout_ms?: number;
  retry?: RetryPolicy;
  /** Present only when authored and not `auto` (core/engine/tool-choice.ts). */
  tool_choice?: Exclude<ToolChoice, 'auto'>;
}
export interface Projection {
  v: 1;
  name: string;
  coordination_policy: CoordinationPolicy;
  consensus_mode: 'majority' | 'unanimity';
  limits: GraphLimits;
  topology: Record<string, string>;
  prompt: string | null;
  pre: StageSpec[];
  post: StageSpec[];
  billets: ProjectedBillet[];
}

export class CompileError {
  constructor(
    readonly code: CompileErrorCode,
    readonly message: string,
    readonly details: JsonObject = {},
  ) {}
}

const bad = (message: string, details: JsonObject = {}) => new CompileError('invalid_formation', message, details);
const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isStrList = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');
const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function authority(v: unknown, field: string): AuthorityEnvelope {
  if (!isObj(v)) throw bad(`${field} must be an object`, { field });
  for (const f of ['allowed_tools', 'data_grant_ids', 'egress_allowlist', 'compartments', 'governing_contract_ids'] as const) {
    if (v[f] !== undefined && !isStrList(v[f])) throw bad(`${field}.${f} must be a list of strings`, { field: `${field}.${f}` });
  }
  if (v.clearance_level !== undefined && !(Number.isSafeInteger(v.clearance_level) && (v.clearance_level as number) >= 0))
    throw bad(`${field}.clearance_level must be a non-negative integer`, { field: `${field}.clearance_level` });
  if (
    v.budget_ceiling !== undefined &&
    v.budget_ceiling !== null &&
    !(typeof v.budget_ceiling === 'number' && Number.isFinite(v.budget_ceiling) && v.budget_ceiling >= 0)
  )
    throw bad(`${field}.budget_ceiling must be a non-negative number`, { field: `${field}.budget_ceiling` });
  if (v.permission_mode !== undefined && !(PERMISSION_MODES as readonly unknown[]).includes(v.permission_mode))
    throw bad(`${field}.permission_mode must be one of ${PERMISSION_MODES.join(', ')}`, { field: `${field}.permission_mode` });
  if (v.governing_contract_id !== undefined && v.governing_contract_id !== null && typeof v.governing_contract_id !== 'string')
    throw bad(`${field}.governing_contract_id must be a string`, { field: `${field}.governing_contract_id` });
  const e: AuthorityEnvelope = {};
  for (const f of ['allowed_tools', 'data_grant_ids', 'egress_allowlist', 'compartments', 'governing_contract_ids'] as const)
    if (v[f] !== undefined) e[f] = v[f] as string[];
  if (v.clearance_level !== undefined) e.clearance_level = v.clearance_level as number;
  if (v.budget_ceiling !== undefined && v.budget_ceiling !== null) e.budget_ceiling = v.budget_ceiling as number;
  if (v.permission_mode !== undefined) e.permission_mode = v.permission_mode as AuthorityEnvelope['permission_mode'] & string;
  if (typeof v.governing_contract_id === 'string') e.governing_contract_id = v.governing_contract_id;
  return normalizeAuthority(e);
}

export { authority as parseAuthority };

function limits(v: unknown): GraphLimits {
  if (v === undefined || v === null) return { ...DEFAULT_LIMITS };
  if (!isObj(v)) throw bad('limits must be an object', { field: 'limits' });
  const out = { ...DEFAULT_LIMITS };
  for (const k of Object.keys(DEFAULT_LIMITS) as (keyof GraphLimits)[]) {
    const x = v[k];
    if (x === undefined) continue;
    const min = k === 'max_tool_rounds' ? 0 : 1;
    if (!Number.isSafeInteger(x) || (x as number) < min || (x as number) > HARD_LIMITS[k])
      throw bad(`limits.${k} must be an integer from ${min} to ${HARD_LIMITS[k]}`, { field: `limits.${k}` });
    out[k] = x as number;
  }
  return out;
}

function stages(v: unknown, field: string): StageSpec[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || v.length > MAX_STAGES) throw bad(`${field} must be a list of at most ${MAX_STAGES} stages`, { field });
  return v.map((s, i) => {
    if (!isObj(s) || typeof s.kind !== 'string' || !STAGE_KINDS.includes(s.kind) || !isObj(s.config))
      throw bad(`${field}[${i}] must be { kind: ${STAGE_KINDS.join('|')}, config: object }`, { field: `${field}[${i}]` });
    if (s.seat !== undefined && typeof s.seat !== 'string')
      throw bad(`${field}[${i}].seat must be a billet id`, { field: `${field}[${i}].seat` });
    return JSON.parse(JSON.stringify(s)) as StageSpec;
  });
}

/** Validates and projects; throws CompileError. */
export function project(formation: FormationInput, billets: readonly BilletInput[]): Projection {
  if (!isObj(formation) || typeof formation.name !== 'string' || formation.name.length === 0)
    throw bad('formation name is required', { field: 'name' });
  const policy = formation.coordination_policy ?? 'sequential';
  if (!POLICIES.includes(policy)) throw bad(`coordination_policy must be one of ${POLICIES.join(', ')}`, { field: 'coordination_policy' });
  const mode = formation.consensus_mode ?? 'majority';
  if (mode !== 'majority' && mode !== 'unanimity') throw bad('consensus_mode must be majority or unanimity', { field: 'consensus_mode' });
  const topology = formation.topology ?? {};
  if (!isObj(topology) || !Object.values(topology).every((x) => typeof x === 'string'))
    throw bad('topology must map labels to strings', { field: 'topology' });
  if (formation.prompt !== undefined && formation.prompt !== null && typeof formation.prompt !== 'string')
    throw bad('prompt must be a string', { field: 'prompt' });
  if (!Array.isArray(billets)) throw bad('billets must be a list');
  if (billets.length === 0) throw new CompileError('empty_formation', 'a formation needs at least one billet');
  if (billets.length > MAX_BILLETS) throw new CompileError('too_many_billets', `at most ${MAX_BILLETS} billets`, { limit: MAX_BILLETS });
  const seen = new Set<string>();
  // Billets often share a cap: validate and normalize each distinct cap once (same object reused).
  const caps = new Map<string, AuthorityEnvelope>();
  const capOf = (v: unknown, field: string): AuthorityEnvelope => {
    let k: string;
    try {
      k = JSON.stringify(v) ?? '';
    } catch {
      throw bad(`${field} must be plain JSON`, { field });
    }
    let e = caps.get(k);
    if (e === undefined) {
      e = sortedKeys(authority(v, field));
      caps.set(k, e);
    }
    return e;
  };
  const out: ProjectedBillet[] = billets.map((b, i) => {
    if (!isObj(b) || typeof b.id !== 'string' || b.id.length === 0) throw bad(`billet ${i} needs an id`, { field: `billets[${i}].id` });
    if (/[/[\]#]/.test(b.id) || b.id.length > 190)
      throw bad(`billet id ${b.id.slice(0, 50)} must not contain / [ ] # and be at most 190 characters`, { field: `billets[${i}].id` });
    if (seen.has(b.id)) throw new CompileError('duplicate_billet', `billet ${b.id} appears twice`, { billet: b.id });
    seen.add(b.id);
    if (typeof b.role_label !== 'string' || b.role_label.length === 0)
      throw bad(`billet ${b.id} needs a role_label`, { billet: b.id, field: 'role_label' });
    if (b.required_skills !== undefined && !isStrList(b.required_skills))
      throw bad(`billet ${b.id}: required_skills must be a list of strings`, { billet: b.id, field: 'required_skills' });
    if (b.reports_to !== undefined && b.reports_to !== null && typeof b.reports_to !== 'string')
      throw bad(`billet ${b.id}: reports_to must be a billet id`, { billet: b.id, field: 'reports_to' });
    if (b.position !== undefined && b.position !== null && !Number.isSafeInteger(b.position))
      throw bad(`billet ${b.id}: position must be an integer`, { billet: b.id, field: 'position' });
    const pp = stepPolicyProblem(b as unknown as Record<string, unknown>, `billets.${b.id}`);
    if (pp !== null) throw bad(`billet ${b.id}: ${pp.problem}`, { billet: b.id, field: pp.field });
    const policy = stepPolicyOf(b as unknown as Record<string, unknown>);
    if (b.tool_choice !== undefined) {
      const tp = toolChoiceProblem(b.tool_choice);
      if (tp !== null) throw bad(`billet ${b.id}: ${tp}`, { billet: b.id, field: 'tool_choice' });
    }
    const toolChoice = canonicalToolChoice(b.tool_choice as ToolChoice | undefined);
    const cap = capOf(b.authority_cap, `billets.${b.id}.authority_cap`);
    // What the cap lets no seat of this billet do: a named tool it does not grant, a forced call with none.
    const cp = seatToolChoiceProblem(toolChoice, { allowed_tools: cap.allowed_tools ?? [], permission_mode: cap.permission_mode ?? 'ask' });
    if (cp !== null) throw bad(`billet ${b.id}: ${cp}`, { billet: b.id, field: 'tool_choice' });
    // Keys in canonical order, so the formation hash takes hashJson's fast path.
    return {
      authority_cap: cap,
      id: b.id,
      position: (b.position as number | null | undefined) ?? null,
      reports_to: b.reports_to ?? null,
      required_skills: [...new Set(b.required_skills ?? [])].sort(cmp),
      ...(policy.retry !== undefined ? { retry: policy.retry } : {}),
      role_label: b.role_label,
      ...(policy.timeout_ms !== undefined ? { timeout_ms: policy.timeout_ms } : {}),
      ...(toolChoice !== undefined ? { tool_choice: toolChoice } : {}),
    };
  });
  out.sort((a, b) => cmp(a.id, b.id));
  return {
    billets: out,
    consensus_mode: mode,
    coordination_policy: policy,
    limits: sortedKeys(limits(formation.limits)),
    name: formation.name,
    post: sortedKeys(stages(formation.post, 'post')),
    pre: sortedKeys(stages(formation.pre, 'pre')),
    prompt: formation.prompt ?? null,
    topology: sortedKeys({ ...(topology as Record<string, string>) }),
    v: FORMATION_FORMAT_VERSION,
  };
}

/** Seat order: (position, id); billets without a position come after, by id. */
export function seatOrder(billets: readonly ProjectedBillet[]): ProjectedBillet[] {
  return [...billets].sort((a, b) => {
    const pa = a.position ?? Number.MAX_SAFE_INTEGER;
    const pb = b.position ?? Number.MAX_SAFE_INTEGER;
    return pa !== pb ? pa - pb : cmp(a.id, b.id);
  });
}
