/**
 * A crew as the edge carries it, from the teams module's export
 * (`teams.exportCrew`): compiled graph and hash, agents,
 * blueprints, skills, contracts, each agent's tool grants (its seat's
 * effective allowed_tools) and each agent's remaining budget (ledger limit
 * minus spent and reserved at issue time; no ledger, no entry: the edge then
 * refuses the run with no_budget_ledger, as the cell does).
 */
import type { CrewContent } from '../../bundles/crew-bundle.ts';
import type { Graph } from '../../core/engine/types.ts';
import type { Teams } from '../teams/api.ts';

/** The crew as a device carries it; `check` judges its compiled graph first (the caller may run it) and throws to refuse. */
export async function crewForEdge(teams: Teams, crewId: string, check: (graph: Graph) => Promise<void>): Promise<CrewContent> {
  const x = await teams.exportCrew(crewId);
  await check(x.graph);
  const toolGrants: Record<string, string[]> = {};
  for (const seat of Object.values(x.graph.seats)) {
    if (seat.agent_id)
      toolGrants[seat.agent_id] = [...new Set([...(toolGrants[seat.agent_id] ?? []), ...seat.authority.allowed_tools])].sort();
  }
  const budgets: Record<string, number> = {};
  for (const a of x.agents) {
    const l = x.ledgers[a.agent_id];
    if (l) budgets[a.agent_id] = Math.max(0, l.budget_limit - l.spent - l.reserved);
  }
  return {
    crew_id: x.crew.crew_id,
    name: x.crew.name,
    formation_id: x.formation.formation_id,
    graph: x.graph,
    graph_hash: x.graph_hash,
    compiler_input: JSON.parse(JSON.stringify(x.compiler_input)) as CrewContent['compiler_input'],
    agents: x.agents,
    blueprints: x.blueprints,
    skills: x.skills,
    contracts: x.contracts.map((k) => ({ id: k.contract_id, rules: k.rules.map((r) => ({ name: r.name, expr: r.expr })) })),
    tool_grants: toolGrants,
    budgets,
    // Whose storage the kv tools use on the device (edge/tools.ts), as a crew run at the cell does.
    workspace_id: x.crew.workspace_id,
  };
}
