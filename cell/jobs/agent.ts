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
import type { Reason } from '../../core/reasons.ts';
import { requesterOf, type DriveResult, type Run } from '../runs/api.ts';
import type { JobsContext } from './context.ts';

export interface AgentSpec {
  graph_id: string;
  input?: unknown;
}

async function refuse(ctx: JobsContext, runId: string, reason: Reason, message: string, details: JsonObject): Promise<DriveResult> {
  try {
    await ctx.runs.appendJournal(runId, { step_id: 'run', kind: 'refusal', data: { reason, ...details } });
  } catch {
    // Already terminal (cancelled meanwhile): nothing to add.
  }
  await ctx.runs.finishRun(runId, 'refused', { error: { code: 'refused', message, reason, details }, data: { reason } });
  return { state: (await ctx.runs.getRun(runId))?.state ?? 'refused', result: null };
}

/** Drives an agent job run: resolve the pinned graph, check placement, run it with the crew's ports. */
export async function driveAgentRun(ctx: JobsContext, run: Run): Promise<DriveResult> {
  const spec = run.spec as AgentSpec;
  const found = await ctx.teams.crewByGraph(spec.graph_id);
  if (!found) {
    return refuse(
      ctx,
      run.run_id,
      'graph_unknown',
      `graph ${spec.graph_id} is not a graph this cell knows (its formation or crew changed)`,
      { graph_id: spec.graph_id },
    );
  }
  const { crew, graph, graphHash } = found;
  const unmet = ctx.teams.unmetPlacement(graph);
  if (unmet.length) {
    return refuse(
      ctx,
      run.run_id,
      'placement_unmet',
      `this cell does not meet the run's placement constraints: ${unmet.map((u) => u.constraint).join(', ')}`,
      { unmet: unmet.map((u) => ({ ...u })) },
    );
  }
  const workspaceId = run.workspace_id ?? crew.workspace_id;
  return ctx.runs.driveRun(
    run.run_id,
    graph,
    ctx.teams.crewPorts(run.run_id, workspaceId, { requester: run.requester, crewId: crew.crew_id }),
    spec.input ?? null,
    {
      requester: run.requester,
      requesterActors: requesterOf(run).actors,
      graphHash,
      context: { crew_id: crew.crew_id, workspace_id: workspaceId, graph_id: spec.graph_id },
    },
  );
}
