/**
 * From stored resources to the pure compiler (core/compiler): the formation,
 * its billets in order, and (for a crew) the agent bound to each billet with
 * its authority, model and system prompt. Compile errors become
 * invalid_request with `details.reason` = the compiler's code.
 */
import { createHash } from 'node:crypto';
import { compileFormation } from '../../../core/compiler/compile.ts';
import type { BilletInput, FormationInput, SeatBinding } from '../../../core/compiler/types.ts';
import type { Graph, SeatAuthority } from '../../../core/engine/types.ts';
import type { AuthorityEnvelope } from '../../../core/authority/envelope.ts';
import { ServiceError, invalid } from '../../../core/errors.ts';
import type { AuthContext } from '../../context.ts';
import { getAgent } from '../resources/agents.ts';
import type { TeamsContext } from '../context.ts';
import { frozen, listBillets } from './formations.ts';
import type { Billet, Crew, Formation } from './types.ts';
import { getSkillByName } from '../resources/resources.ts';

/** node:crypto's SHA-256 for the compiler (same hashes as core's pure-JS default, faster). */
const NATIVE = { sha256: (b: Uint8Array) => new Uint8Array(createHash('sha256').update(b).digest()) };

export interface CompilerInput {
  formation: FormationInput;
  billets: BilletInput[];
  bindings: Record<string, SeatBinding> | undefined;
  /** The pins of the imported tools the graph calls (`Graph.tool_pins`), in an export for the edge. */
  tool_pins?: Record<string, string>;
}

/**
 * A `skill` stage (or a map/loop body of kind skill) may name a stored skill as
 * `{ skill: 'skill:<name>' }`; it is replaced by the skill's spec, so the graph
 * (and its hash) carries the definition that runs.
 */
async function resolveStageSkills(ctx: TeamsContext, stages: unknown[] | undefined, field: string): Promise<unknown[] | undefined> {
  if (!stages) return stages;
  const fix = async (node: unknown, path: string): Promise<unknown> => {
    if (typeof node !== 'object' || node === null) return node;
    const n = node as { kind?: unknown; config?: Record<string, unknown> };
    if (n.kind === 'skill' && typeof n.config?.['skill'] === 'string') {
      const ref = n.config['skill'];
      const m = /^skill:(.+)$/.exec(ref);
      const sk = m ? await getSkillByName(ctx, m[1]!) : undefined;
      if (!sk)
        throw invalid(`${path}.config.skill names no skill (write skill:<name>)`, {
          reason: 'unknown_skill',
          field: `${path}.config.skill`,
          refs: [ref],
        });
      const spec: Record<string, unknown> = { name: sk.name, skill_kind: sk.skill_kind };
      if (sk.model_preference !== null) spec['model_preference'] = sk.model_preference;
      if (sk.definition !== null) spec['definition'] = sk.definition;
      return { ...n, config: { ...n.config, skill: spec } };
    }
    if ((n.kind === 'map' || n.kind === 'loop') && n.config?.['body']) {
      return { ...n, config: { ...n.config, body: await fix(n.config['body'], `${path}.config.body`) } };
    }
    return node;
  };
  const out: unknown[] = [];
  for (const [i, s] of stages.entries()) out.push(await fix(s, `${field}.${i}`));
  return out;
}

/**
 * The stages of a formation body with every `skill:<name>` reference
 * replaced by the skill's spec, as a version stores them: a version then
 * holds the skills it runs, so a later change of a skill does not change it
 * (versions written before this was done resolve their references when
 * compiled). 400 unknown_skill for a reference that names no skill.
 */
export async function inlineStageSkills<B extends { pre?: unknown[] | null | undefined; post?: unknown[] | null | undefined }>(
  ctx: TeamsContext,
  body: B,
): Promise<B> {
  const out = { ...body };
  if (Array.isArray(body.pre)) out.pre = await resolveStageSkills(ctx, body.pre, 'pre');
  if (Array.isArray(body.post)) out.post = await resolveStageSkills(ctx, body.post, 'post');
  return out;
}

/** The compiler's input for a formation (bound to a crew when given), from the stored resources (its billets as given, else read). */
export async function compilerInput(ctx: TeamsContext, f: Formation, crew?: Crew, billetsOf?: readonly Billet[]): Promise<CompilerInput> {
  const formation: FormationInput = JSON.parse(
    JSON.stringify({
      name: f.name,
      coordination_policy: f.coordination_policy,
      consensus_mode: f.consensus_mode,
      limits: f.limits,
      topology: f.topology,
      pre: await resolveStageSkills(ctx, f.pre, 'pre'),
      post: await resolveStageSkills(ctx, f.post, 'post'),
      prompt: f.prompt,
    }),
  ) as FormationInput;
  const billets: BilletInput[] = (billetsOf ?? (await listBillets(ctx, f))).map((b) => ({
    id: b.billet_id,
    role_label: b.role_label,
    required_skills: b.required_skills,
    reports_to: b.reports_to,
    authority_cap: b.authority_cap as BilletInput['authority_cap'],
    position: b.position,
    ...(b.timeout_ms !== undefined ? { timeout_ms: b.timeout_ms } : {}),
    ...(b.retry !== undefined ? { retry: b.retry } : {}),
    ...(b.tool_choice !== undefined ? { tool_choice: b.tool_choice } : {}),
  }));
  let bindings: Record<string, SeatBinding> | undefined;
  if (crew) {
    bindings = {};
    for (const [billetId, agentId] of Object.entries(crew.assignments)) {
      const a = await getAgent(ctx, agentId);
      const binding: SeatBinding = { agent_id: agentId };
      if (a) {
        binding.authority = a.authority as NonNullable<SeatBinding['authority']>;
        binding.model = a.model_preference;
        binding.system_prompt = a.system_prompt;
      }
      bindings[billetId] = binding;
    }
  }
  return { formation, billets, bindings };
}

/** A compiled formation: the execution graph and its hashes. */
export interface Compiled {
  graph: Graph;
  graphHash: string;
  formationHash: string;
}

/** Compiles a formation (bound to a crew when given); throws invalid_request on a compile error. */
export async function compileFor(ctx: TeamsContext, f: Formation, crew?: Crew, billets?: readonly Billet[]): Promise<Compiled> {
  return compiled(await compilerInput(ctx, f, crew, billets), ctx.tools.pins());
}

/**
 * compileFor of a crew run's start: the compiler is pure, so the same input (the formation, its
 * billets, the agents bound to them as they stand now, read through their caches, and the catalog's
 * pins) gives the same graph; it is compiled once and kept under that input's text (TeamsContext.
 * compiledRuns), frozen, shared by every start that asks for it. A change of any input is a new key.
 */
export async function compileForRun(ctx: TeamsContext, f: Formation, crew: Crew, billets: readonly Billet[]): Promise<Compiled> {
  const i = await compilerInput(ctx, f, crew, billets);
  const pins = ctx.tools.pins();
  let byInput = ctx.compiledRuns.get(pins);
  if (byInput === undefined) {
    byInput = new Map();
    ctx.compiledRuns.set(pins, byInput);
  }
  const key = JSON.stringify([i.formation, i.billets, i.bindings ?? null]);
  const kept = byInput.get(key);
  if (kept !== undefined) return kept;
  const c = frozen(compiled(i, pins));
  if (byInput.size >= COMPILED_KEPT) byInput.clear();
  byInput.set(key, c);
  return c;
}

/** Compiled inputs a cell keeps for its runs' starts (per set of pins). */
const COMPILED_KEPT = 256;

function compiled(i: CompilerInput, toolPins: Readonly<Record<string, string>>): Compiled {
  const r = compileFormation(i.formation, i.billets, i.bindings, { ...NATIVE, toolPins });
  if (!r.ok) {
    throw new ServiceError('invalid_request', `the formation does not compile: ${r.message}`, {
      details: { reason: r.code, ...r.details },
    });
  }
  return { graph: r.graph, graphHash: r.graphHash, formationHash: r.formationHash };
}

/** Billet-independent compile errors (stages, limits, fields) are refused when the formation is authored. */
const BILLET_CODES = new Set([
  'empty_formation',
  'too_many_billets',
  'duplicate_billet',
  'unknown_reports_to',
  'reports_to_cycle',
  'root_count',
  'over_authority',
  'unbound_seat',
]);

/** `x` (plain JSON: the compiler's input) with every `seat` that names one of `billets` made the probe's, at any depth. */
function seatedOnProbe(x: unknown, billets: ReadonlySet<string>): unknown {
  if (Array.isArray(x)) return x.map((y) => seatedOnProbe(y, billets));
  if (typeof x !== 'object' || x === null) return x;
  return Object.fromEntries(
    Object.entries(x).map(([k, v]) => [k, k === 'seat' && typeof v === 'string' && billets.has(v) ? 'probe' : seatedOnProbe(v, billets)]),
  );
}

/**
 * Compiles the formation around one probe seat to refuse bad stages and limits at authoring, whatever
 * its billets are so far (a hierarchy still being built does not hide a bad stage). A stage seated on a
 * billet of the formation (`seat: <billet_id>`) is checked on the probe; a seat that names no billet is
 * refused (`unknown seat`), so a seated stage is authored once its billet exists.
 */
export async function checkFormationCompiles(ctx: TeamsContext, f: Formation): Promise<void> {
  const i = await compilerInput(ctx, f);
  const probe = { id: 'probe', role_label: 'probe', required_skills: [], reports_to: null, authority_cap: {}, position: 0 };
  const ids = new Set(i.billets.map((b) => b.id));
  const formation = seatedOnProbe(i.formation, ids) as FormationInput;
  const r = compileFormation(formation, [probe], undefined, NATIVE);
  if (!r.ok && !BILLET_CODES.has(r.code)) {
    throw new ServiceError('invalid_request', `the formation does not compile: ${r.message}`, {
      details: { reason: r.code, ...r.details },
    });
  }
}

/** A compiled seat's authority as an envelope (no seat budget ceiling = none). */
export function seatEnvelope(a: SeatAuthority): AuthorityEnvelope {
  const { budget_ceiling, ...rest } = a;
  return budget_ceiling === null ? rest : { ...rest, budget_ceiling };
}

/**
 * Whether every seat of `graph` lies within the caller's envelope authority: the verdict
 * assertSeatsWithinCaller refuses on (the same containment check), without its audit record, for
 * what only shows what a caller could run (MCP's tools/list).
 */
export function seatsWithinCaller(ctx: TeamsContext, auth: AuthContext, graph: Graph): boolean {
  return Object.values(graph.seats).every((seat) => ctx.iam.withinCaller(auth, { envelope: seatEnvelope(seat.authority) }).ok);
}

/**
 * Binding agents to seats and running them exercises each seat's authority
 * (agent ∩ billet cap): refused (audited, wider_than_caller) unless every
 * seat stays inside the caller's envelope authority.
 */
export async function assertSeatsWithinCaller(
  ctx: TeamsContext,
  auth: AuthContext,
  graph: Graph,
  what: { action: string; target: string },
): Promise<void> {
  for (const seat of Object.values(graph.seats)) {
    await ctx.iam.assertWithinCaller(auth, { envelope: seatEnvelope(seat.authority) }, what);
  }
}
