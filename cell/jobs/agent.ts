/**
 * Agent job runs: what a scheduled `agent` definition produces. Its template
 * `{ graph_id, input? }` pins a compiled agent graph this cell knows by its
 * graph hash: the graph of a crew (formation + bound agents) as the Agent
 * Teams compiler produces it. The run is a job run (kind job, job_type agent)
 * submitted through the same path as POST jobs/runs; it executes that graph on
 * the engine with the crew's ports (model, governed tools, approvals, budget
 * ledgers, contracts). Before the first step it is refused when the graph is no
 * longer known (`graph_unknown`: the formation or the crew changed) or the
 * cell does not meet its placement constraints (`placement_unmet`); the
 * engine refuses a run whose agents have no budget ledger (`no_budget_ledger`).
 */
import type { JsonObject } from '../../core/journal/record.ts';
import type { Cell } from '../context.ts';
import { driveRun, type DriveResult } from '../runs/drive.ts';
import { appendJournal, finishRun } from '../runs/journal.ts';
import { getRun, type Run } from '../runs/runs.ts';
import { compileFor } from '../teams/compile.ts';
import { getCrew, getFormation, listCrews } from '../teams/formations.ts';
import { checkPlacement } from '../teams/placement.ts';
import { crewPorts } from '../teams/ports.ts';

export interface AgentSpec { graph_id: string; input?: unknown }

/** The crew whose current compiled graph has `graphHash`, if any. */
export function crewForGraph(cell: Cell, graphHash: string): string | undefined {
  for (let offset = 0; offset < 100_000; offset += 500) {
    const crews = listCrews(cell, 500, offset);
    for (const crew of crews) {
      const f = getFormation(cell, crew.formation_id);
      if (!f) continue;
      try {
        if (compileFor(cell, f, crew).graphHash === graphHash) return crew.crew_id;
      } catch {
        // A crew whose formation no longer compiles has no graph: not a match.
      }
    }
    if (crews.length < 500) break;
  }
  return undefined;
}

async function refuse(cell: Cell, runId: string, reason: string, message: string, details: JsonObject): Promise<DriveResult> {
  try {
    await appendJournal(cell, runId, { step_id: 'run', kind: 'refusal', data: { reason, ...details } });
  } catch {
    // Already terminal (cancelled meanwhile): nothing to add.
  }
  await finishRun(cell, runId, 'refused', { error: { code: 'refused', message, reason, details }, data: { reason } });
  return { state: getRun(cell, runId)?.state ?? 'refused', result: null };
}

/** Drives an agent job run: resolve the pinned graph, check placement, run it with the crew's ports. */
export async function driveAgentRun(cell: Cell, run: Run): Promise<DriveResult> {
  const spec = run.spec as AgentSpec;
  const crewId = crewForGraph(cell, spec.graph_id);
  const crew = crewId ? getCrew(cell, crewId) : undefined;
  const formation = crew ? getFormation(cell, crew.formation_id) : undefined;
  if (!crew || !formation) {
    return refuse(cell, run.run_id, 'graph_unknown', `graph ${spec.graph_id} is not a graph this cell knows (its formation or crew changed)`, { graph_id: spec.graph_id });
  }
  const compiled = compileFor(cell, formation, crew);
  const unmet = checkPlacement(compiled.graph.placement, cell.config);
  if (unmet.length) {
    return refuse(cell, run.run_id, 'placement_unmet', `this cell does not meet the run's placement constraints: ${unmet.map((u) => u.constraint).join(', ')}`, { unmet: unmet as unknown as JsonObject[] } as JsonObject);
  }
  const workspaceId = run.workspace_id ?? crew.workspace_id;
  return driveRun(cell, run.run_id, compiled.graph, crewPorts(cell, run.run_id, workspaceId), spec.input ?? null, {
    requester: run.requester, graphHash: compiled.graphHash,
    context: { crew_id: crew.crew_id, workspace_id: workspaceId, graph_id: spec.graph_id },
  });
}
