/**
 * Who uses a resource of Agent Teams: what a delete (or a change that would
 * leave something dangling) is refused for. The refusal is 409 conflict,
 * reason `in_use`, with `details.used_by` naming the users by kind
 * (`crews`, `agents`, `blueprints`, `formations`, `runs`, `job_definitions`),
 * at most USED_BY_LIMIT of each.
 *
 * References are found with a text prefilter in the store (the rooms' repository.ts) and
 * then checked exactly on the decoded rows.
 */
import { contractsOf } from '../../core/authority/envelope.ts';
import type { Reader } from '../store/types.ts';
import type { TeamsContext } from './context.ts';
import type { Crew } from './formations/types.ts';
import * as formationsRepo from './formations/repository.ts';
import * as resourcesRepo from './resources/repository.ts';
import type { CrewDefinitionUser, UsedBy } from './types.ts';

/** Users named per kind in a refusal. */
export const USED_BY_LIMIT = 100;

/** True when some kind names at least one user. */
export function anyUser(usedBy: UsedBy): boolean {
  return Object.values(usedBy).some((ids) => ids.length > 0);
}

const quoted = (s: string) => JSON.stringify(s);

/** Crews that bind the agent. */
export async function agentUsers(db: Reader, agentId: string): Promise<UsedBy> {
  const crews = (await formationsRepo.crewsMentioning(db, quoted(agentId), 1000))
    .filter((c) => Object.values(c.assignments).includes(agentId))
    .map((c) => c.crew_id);
  return { crews: crews.slice(0, USED_BY_LIMIT) };
}

/** Agents (not purged) minted from the blueprint. */
export async function blueprintUsers(ctx: TeamsContext, db: Reader, blueprintId: string): Promise<UsedBy> {
  const agents: string[] = [];
  for (const a of await resourcesRepo.agentsOfBlueprint(db, blueprintId, 1000)) {
    if ((await ctx.iam.principal(a.agent_id))?.status !== 'purged') agents.push(a.agent_id);
  }
  return { agents: agents.slice(0, USED_BY_LIMIT) };
}

/** Agents (not purged) that call the provider by id (agents without a provider_id use the oldest one). */
export async function providerUsers(ctx: TeamsContext, db: Reader, providerId: string): Promise<UsedBy> {
  const agents: string[] = [];
  for (const a of await resourcesRepo.agentsMentioning(db, quoted(providerId), 1000)) {
    if (a.provider_id === providerId && (await ctx.iam.principal(a.agent_id))?.status !== 'purged') agents.push(a.agent_id);
  }
  return { agents: agents.slice(0, USED_BY_LIMIT) };
}

/** Formations with a version that mentions `text` exactly (a quoted JSON string) in its body or billets. */
async function formationsWith(db: Reader, text: string): Promise<string[]> {
  const out: string[] = [];
  for (const id of await formationsRepo.formationsMentioning(db, text, 1000)) {
    if ((await formationsRepo.formationTexts(db, id)).some((t) => t.includes(text))) out.push(id);
    if (out.length >= USED_BY_LIMIT) break;
  }
  return out;
}

/** Blueprints that reference the skill (required_skills, system_prompt_ref) and formations (any version) whose billets or stages do. */
export async function skillUsers(db: Reader, name: string): Promise<UsedBy> {
  const ref = `skill:${name}`;
  const blueprints = (await resourcesRepo.blueprintsMentioning(db, quoted(ref), 1000))
    .filter((b) => b.required_skills.includes(ref) || b.system_prompt_ref === ref)
    .map((b) => b.blueprint_id);
  return { blueprints: blueprints.slice(0, USED_BY_LIMIT), formations: await formationsWith(db, quoted(ref)) };
}

/** Blueprints, agents (not purged) and formations (any version's billet caps) that name the contract. */
export async function contractUsers(ctx: TeamsContext, db: Reader, contractId: string): Promise<UsedBy> {
  const q = quoted(contractId);
  const blueprints = (await resourcesRepo.blueprintsMentioning(db, q, 1000))
    .filter((b) => contractsOf(b.authority_template).includes(contractId))
    .map((b) => b.blueprint_id);
  const agents: string[] = [];
  for (const a of await resourcesRepo.agentsMentioning(db, q, 1000)) {
    if (contractsOf(a.authority).includes(contractId) && (await ctx.iam.principal(a.agent_id))?.status !== 'purged')
      agents.push(a.agent_id);
  }
  return {
    blueprints: blueprints.slice(0, USED_BY_LIMIT),
    agents: agents.slice(0, USED_BY_LIMIT),
    formations: await formationsWith(db, q),
  };
}

/** Formations (any version's billets or stages), blueprints and agents (not purged) that name one of the catalog tools. */
export async function toolUsers(ctx: TeamsContext, db: Reader, names: readonly string[]): Promise<UsedBy> {
  const blueprints = new Set<string>();
  const agents = new Set<string>();
  const formations = new Set<string>();
  for (const name of names) {
    const q = quoted(name);
    for (const b of await resourcesRepo.blueprintsMentioning(db, q, 1000))
      if ((b.authority_template?.allowed_tools ?? []).includes(name)) blueprints.add(b.blueprint_id);
    for (const a of await resourcesRepo.agentsMentioning(db, q, 1000))
      if ((a.authority.allowed_tools ?? []).includes(name) && (await ctx.iam.principal(a.agent_id))?.status !== 'purged')
        agents.add(a.agent_id);
    for (const f of await formationsWith(db, q)) formations.add(f);
  }
  const first = (s: Set<string>) => [...s].slice(0, USED_BY_LIMIT);
  return { formations: first(formations), blueprints: first(blueprints), agents: first(agents) };
}

/** Crews of the formation (any version). */
export async function formationUsers(db: Reader, formationId: string): Promise<UsedBy> {
  return { crews: await formationsRepo.crewsOfFormation(db, formationId, USED_BY_LIMIT) };
}

/**
 * Live (non-terminal) runs of the crew, job definitions that name it, and
 * (a subset of those) the agent definitions that pin its current graph.
 */
export async function crewUsers(ctx: TeamsContext, crew: Crew, graphHash: string | null, db: Reader = ctx.core.store): Promise<UsedBy> {
  const runs = (await ctx.runs.activeRuns('crew', db)).filter((r) => r.crew_id === crew.crew_id).map((r) => r.run_id);
  const defs: CrewDefinitionUser[] = [];
  for (const hook of ctx.crewUserHooks) defs.push(...(await hook({ crew_id: crew.crew_id, graph_hash: graphHash }, db)));
  return {
    runs: runs.slice(0, USED_BY_LIMIT),
    job_definitions: defs.map((d) => d.schedule_id).slice(0, USED_BY_LIMIT),
    job_definitions_pinning_graph: defs
      .filter((d) => d.job_type === 'agent')
      .map((d) => d.schedule_id)
      .slice(0, USED_BY_LIMIT),
  };
}
