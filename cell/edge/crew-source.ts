/**
 * A crew as the edge carries it, from the teams module's export
 * (`teams.exportCrew`): compiled graph and hash, agents,
 * blueprints, skills, contracts, each agent's tool grants (its seat's
 * effective allowed_tools), no budgets yet (issueCrewBundle holds them on the
 * ledgers in its transaction and fills them in: export.ts), and the catalog
 * entries and pins of the imported (MCP) tools the crew can call
 * (`mcpToolsForEdge`).
 */
import type { CrewContent, CrewMcpTool } from '../../bundles/crew-bundle.ts';
import { graphToolUses } from '../../core/compiler/compile.ts';
import type { Graph } from '../../core/engine/types.ts';
import { ServiceError } from '../../core/errors.ts';
import type { Teams } from '../teams/api.ts';
import type { Tools } from '../tools/api.ts';

/** The crew as a device carries it; `check` judges its compiled graph first (the caller may run it) and throws to refuse. */
export async function crewForEdge(
  ctx: { teams: Teams; tools: Tools },
  crewId: string,
  check: (graph: Graph) => Promise<void>,
): Promise<CrewContent> {
  const x = await ctx.teams.exportCrew(crewId);
  await check(x.graph);
  const mcpTools = mcpToolsForEdge(ctx.tools, x.graph);
  const toolGrants: Record<string, string[]> = {};
  for (const seat of Object.values(x.graph.seats)) {
    if (seat.agent_id)
      toolGrants[seat.agent_id] = [...new Set([...(toolGrants[seat.agent_id] ?? []), ...seat.authority.allowed_tools])].sort();
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
    // Filled in by issueCrewBundle from what it holds for the device (budgets a device holds: docs/edge.md).
    budgets: {},
    // Whose storage the kv tools use on the device (edge/tools.ts), as a crew run at the cell does.
    workspace_id: x.crew.workspace_id,
    ...(mcpTools.length > 0 ? { mcp_tools: mcpTools } : {}),
  };
}

/**
 * The catalog entries of the imported tools `graph` can call (a seat's grant or a step's tool named
 * `mcp.…`), each under the pin the graph carries. A device holds each server to that pin, so a crew one of
 * whose imported tools the graph does not pin (the catalog has no pin for it, or re-pinned it since the
 * graph was compiled) is refused, 409 `crew_tools_unpinned`, naming each tool and seat.
 */
export function mcpToolsForEdge(tools: Tools, graph: Graph): CrewMcpTool[] {
  const out = new Map<string, CrewMcpTool>();
  const unpinned: { tool: string; seat: string | null; why: string }[] = [];
  for (const { tool, seat } of graphToolUses(graph.nodes, graph.seats)) {
    if (!tool.startsWith('mcp.')) continue;
    const pin = graph.tool_pins?.[tool];
    const entry = tools.pinnedTool(tool);
    const why =
      entry === undefined
        ? 'the catalog has no pinned definition of it'
        : pin === undefined
          ? "the crew's graph carries no pin of it"
          : entry.pin !== pin
            ? "the catalog's pin is not the graph's (re-pinned since the graph was compiled)"
            : null;
    if (why !== null) unpinned.push({ tool, seat, why });
    else out.set(tool, entry!);
  }
  if (unpinned.length > 0) {
    throw new ServiceError('conflict', `the crew's MCP tools are not all pinned: ${[...new Set(unpinned.map((u) => u.tool))].join(', ')}`, {
      details: { reason: 'crew_tools_unpinned', tools: unpinned },
    });
  }
  return [...out.values()].sort((a, b) => (a.name < b.name ? -1 : 1));
}
