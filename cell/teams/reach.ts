/**
 * What a change of a shared thing of Agent Teams reaches: the agents (and so
 * the seats, an agent's authority ∩ its billet's cap) whose behaviour the
 * change alters. The rule (docs/security.md, "Changing a shared thing"): the
 * caller's effective authority covers every one of them, or the caller
 * manages its owner (who minted it); `iam.assertMayChangeShared` decides.
 *
 * - a governing contract: agents whose authority names it, agents minted
 *   from blueprints that name it, agents bound in crews of formations whose
 *   billets name it;
 * - a skill: agents minted from blueprints that reference it, agents bound in
 *   crews of formations whose stages or billets reference it;
 * - a blueprint: agents minted from it;
 * - a formation (its prompt, stages, billets): agents bound in its crews;
 * - a crew: the agents it binds, before and after the change;
 * - a model provider: agents that name it, and (the oldest provider) agents
 *   that name none;
 * - a catalog tool (a source's change or re-pin): agents granted it, agents
 *   minted from blueprints granting it, agents bound in crews of formations
 *   whose billets or stages name it.
 */
import { contractsOf } from '../../core/authority/envelope.ts';
import type { Reached } from '../iam/api.ts';
import type { Reader } from '../store/types.ts';
import type { TeamsContext } from './context.ts';
import type { Agent } from './resources/types.ts';
import * as formationsRepo from './formations/repository.ts';
import * as resourcesRepo from './resources/repository.ts';
import { contractUsers, skillUsers, toolUsers } from './usage.ts';

/** How many rows each lookup reads at most (a prefilter's limit, as usage.ts). */
const LIMIT = 1000;
/** Pages of agents read at most for a default provider's reach. */
const AGENT_PAGES = 50;

async function reachedAgents(ctx: TeamsContext, db: Reader, ids: Iterable<string>): Promise<Reached[]> {
  const out: Reached[] = [];
  const seen = new Set<string>();
  for (const id of ids) {
    if (seen.has(id)) continue;
    seen.add(id);
    const a = await resourcesRepo.agentById(db, id);
    const r = await ctx.iam.reachedAgent(id, a?.created_by ?? null);
    if (r) out.push(r);
  }
  return out;
}

/** Agents bound in the crews of the formations (every crew of each). */
async function agentsOfFormations(db: Reader, formationIds: readonly string[]): Promise<string[]> {
  const ids: string[] = [];
  for (const f of formationIds) {
    for (const crewId of await formationsRepo.crewsOfFormation(db, f, LIMIT)) {
      const crew = await formationsRepo.crewById(db, crewId);
      if (crew) ids.push(...Object.values(crew.assignments));
    }
  }
  return ids;
}

async function agentsOfBlueprints(db: Reader, blueprintIds: readonly string[]): Promise<string[]> {
  const ids: string[] = [];
  for (const b of blueprintIds) ids.push(...(await resourcesRepo.agentsOfBlueprint(db, b, LIMIT)).map((a) => a.agent_id));
  return ids;
}

export async function contractReach(ctx: TeamsContext, contractId: string, db: Reader = ctx.core.store): Promise<Reached[]> {
  const users = await contractUsers(ctx, db, contractId);
  const direct = (await resourcesRepo.agentsMentioning(db, JSON.stringify(contractId), LIMIT))
    .filter((a) => contractsOf(a.authority).includes(contractId))
    .map((a) => a.agent_id);
  return reachedAgents(ctx, db, [
    ...direct,
    ...(users['agents'] ?? []),
    ...(await agentsOfBlueprints(db, users['blueprints'] ?? [])),
    ...(await agentsOfFormations(db, users['formations'] ?? [])),
  ]);
}

export async function skillReach(ctx: TeamsContext, skillName: string, db: Reader = ctx.core.store): Promise<Reached[]> {
  const users = await skillUsers(db, skillName);
  return reachedAgents(ctx, db, [
    ...(await agentsOfBlueprints(db, users['blueprints'] ?? [])),
    ...(await agentsOfFormations(db, users['formations'] ?? [])),
  ]);
}

export async function blueprintReach(ctx: TeamsContext, blueprintId: string, db: Reader = ctx.core.store): Promise<Reached[]> {
  return reachedAgents(ctx, db, await agentsOfBlueprints(db, [blueprintId]));
}

export async function formationReach(ctx: TeamsContext, formationId: string, db: Reader = ctx.core.store): Promise<Reached[]> {
  return reachedAgents(ctx, db, await agentsOfFormations(db, [formationId]));
}

/** Agents granted one of the catalog tools: directly, by the blueprint they were minted from, or bound in a crew of a formation naming it. */
export async function toolReach(ctx: TeamsContext, names: readonly string[], db: Reader = ctx.core.store): Promise<Reached[]> {
  const users = await toolUsers(ctx, db, names);
  return reachedAgents(ctx, db, [
    ...(users['agents'] ?? []),
    ...(await agentsOfBlueprints(db, users['blueprints'] ?? [])),
    ...(await agentsOfFormations(db, users['formations'] ?? [])),
  ]);
}

/** The agents a crew binds before and after a change of its bindings. */
export async function crewReach(
  ctx: TeamsContext,
  assignments: readonly Record<string, string>[],
  db: Reader = ctx.core.store,
): Promise<Reached[]> {
  return reachedAgents(
    ctx,
    db,
    assignments.flatMap((a) => Object.values(a)),
  );
}

/** Agents that call the provider: those naming it, and those naming none when it is the default (oldest). */
export async function providerReach(ctx: TeamsContext, db: Reader, providerId: string, isDefault: boolean): Promise<Reached[]> {
  const ids = (await resourcesRepo.agentsMentioning(db, JSON.stringify(providerId), LIMIT))
    .filter((a) => a.provider_id === providerId)
    .map((a) => a.agent_id);
  if (isDefault) {
    for (let page = 0; page < AGENT_PAGES; page++) {
      const rows: Agent[] = await resourcesRepo.listAgents(db, LIMIT, page * LIMIT);
      ids.push(...rows.filter((a) => !a.provider_id).map((a) => a.agent_id));
      if (rows.length < LIMIT) break;
    }
  }
  return reachedAgents(ctx, db, ids);
}
