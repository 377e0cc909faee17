/**
 * Everything a crew bundle for the edge needs, read in one place: the crew,
 * its formation and billets, the compiled graph and hashes, the bound agents,
 * their blueprints, the skills they reference, the governing contracts they
 * name, and each seat's effective grants (from the compiled graph).
 */
import type { Graph } from '../../core/engine/types.ts';
import { notFound } from '../../core/errors.ts';
import type { Cell } from '../context.ts';
import { getAgent, type Agent } from './agents.ts';
import { compileFor } from './compile.ts';
import { getCrew, getFormation, listBillets, type Billet, type Crew, type Formation } from './formations.ts';
import { getBlueprint, getContract, getSkillByName, type Blueprint, type Contract, type Skill } from './resources.ts';

export interface CrewExport {
  crew: Crew;
  formation: Formation;
  billets: Billet[];
  graph: Graph;
  graph_hash: string;
  formation_hash: string;
  agents: Agent[];
  blueprints: Blueprint[];
  skills: Skill[];
  contracts: Contract[];
  /** billet id -> the seat's effective authority (agent authority ∩ billet cap), as compiled. */
  grants: Record<string, unknown>;
}

export function loadCrewForExport(cell: Cell, crewId: string): CrewExport {
  const crew = getCrew(cell, crewId);
  if (!crew) throw notFound('crew');
  const formation = getFormation(cell, crew.formation_id);
  if (!formation) throw notFound('formation');
  const billets = listBillets(cell, formation.formation_id);
  const compiled = compileFor(cell, formation, crew);
  const agents = [...new Set(Object.values(crew.assignments))].sort().map((id) => getAgent(cell, id)).filter((a): a is Agent => a !== undefined);
  const blueprints = [...new Set(agents.map((a) => a.blueprint_id).filter((x): x is string => x !== null))].sort()
    .map((id) => getBlueprint(cell, id)).filter((b): b is Blueprint => b !== undefined);
  const skillNames = new Set<string>();
  for (const b of billets) for (const r of b.required_skills) skillNames.add(r.replace(/^skill:/, ''));
  for (const bp of blueprints) {
    for (const r of bp.required_skills) skillNames.add(r.replace(/^skill:/, ''));
    if (bp.system_prompt_ref?.startsWith('skill:')) skillNames.add(bp.system_prompt_ref.slice(6));
  }
  const skills = [...skillNames].sort().map((n) => getSkillByName(cell, n)).filter((s): s is Skill => s !== undefined);
  const grants: Record<string, unknown> = {};
  const contractIds = new Set<string>();
  for (const [id, seat] of Object.entries(compiled.graph.seats)) {
    grants[id] = seat.authority;
    for (const id of seat.authority.governing_contract_ids) contractIds.add(id);
  }
  const contracts = [...contractIds].sort().map((id) => getContract(cell, id)).filter((k): k is Contract => k !== undefined);
  return {
    crew, formation, billets, graph: compiled.graph, graph_hash: compiled.graphHash, formation_hash: compiled.formationHash,
    agents, blueprints, skills, contracts, grants,
  };
}
