/**
 * Everything a crew bundle for the edge needs, read in one place: the crew,
 * its formation and billets, the compiled graph and hashes with the
 * compiler's input, the bound agents, their blueprints (their budgets are held
 * for the device when the bundle is issued: resources/holds.ts),
 * the skills they reference, the governing contracts they name, and each
 * seat's effective grants (from the compiled graph).
 */
import type { Graph } from '../../../core/engine/types.ts';
import { notFound } from '../../../core/errors.ts';
import { getAgent } from '../resources/agents.ts';
import type { Agent } from '../resources/types.ts';
import { compileFor, compilerInput, type CompilerInput } from './compile.ts';
import type { TeamsContext } from '../context.ts';
import { crewFormation, getCrew, listBillets } from './formations.ts';
import type { Billet, Crew, Formation } from './types.ts';
import { getBlueprint, getContract, getSkillByName } from '../resources/resources.ts';
import type { Blueprint, Contract, Skill } from '../resources/types.ts';

export interface CrewExport {
  crew: Crew;
  formation: Formation;
  billets: Billet[];
  graph: Graph;
  graph_hash: string;
  formation_hash: string;
  /** What the compiler compiled (a device recompiles it to check the graph hash). */
  compiler_input: CompilerInput;
  agents: Agent[];
  blueprints: Blueprint[];
  skills: Skill[];
  contracts: Contract[];
  /** billet id -> the seat's effective authority (agent authority ∩ billet cap), as compiled. */
  grants: Record<string, unknown>;
}

/** Defined items of `ids` in order, each read by `get`. */
async function each<T>(ids: readonly string[], get: (id: string) => Promise<T | undefined>): Promise<T[]> {
  const out: T[] = [];
  for (const id of ids) {
    const x = await get(id);
    if (x !== undefined) out.push(x);
  }
  return out;
}

export async function loadCrewForExport(ctx: TeamsContext, crewId: string): Promise<CrewExport> {
  const crew = await getCrew(ctx, crewId);
  if (!crew) throw notFound('crew');
  const formation = await crewFormation(ctx, crew);
  if (!formation) throw notFound('formation');
  const billets = await listBillets(ctx, formation);
  const compiled = await compileFor(ctx, formation, crew);
  const agents = await each([...new Set(Object.values(crew.assignments))].sort(), (id) => getAgent(ctx, id));
  const blueprints = await each([...new Set(agents.map((a) => a.blueprint_id).filter((x): x is string => x !== null))].sort(), (id) =>
    getBlueprint(ctx, id),
  );
  const skillNames = new Set<string>();
  for (const b of billets) for (const r of b.required_skills) skillNames.add(r.replace(/^skill:/, ''));
  for (const bp of blueprints) {
    for (const r of bp.required_skills) skillNames.add(r.replace(/^skill:/, ''));
    if (bp.system_prompt_ref?.startsWith('skill:')) skillNames.add(bp.system_prompt_ref.slice(6));
  }
  const skills = await each([...skillNames].sort(), (n) => getSkillByName(ctx, n));
  const grants: Record<string, unknown> = {};
  const contractIds = new Set<string>();
  for (const [id, seat] of Object.entries(compiled.graph.seats)) {
    grants[id] = seat.authority;
    for (const id of seat.authority.governing_contract_ids) contractIds.add(id);
  }
  const contracts = await each([...contractIds].sort(), (id) => getContract(ctx, id));
  return {
    crew,
    formation,
    billets,
    graph: compiled.graph,
    graph_hash: compiled.graphHash,
    formation_hash: compiled.formationHash,
    compiler_input: {
      ...(await compilerInput(ctx, formation, crew)),
      // The pins the graph carries, so a device recompiles the same graph (none for a crew of built-in tools).
      ...(compiled.graph.tool_pins ? { tool_pins: compiled.graph.tool_pins } : {}),
    },
    agents,
    blueprints,
    skills,
    contracts,
    grants,
  };
}
