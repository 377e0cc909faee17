/**
 * runGraph: the run loop. Validates the graph, writes `run_started`, refuses
 * immediately when a bound agent has no budget ledger, then executes the nodes
 * in graph order (a stable topological order): a node runs once its
 * predecessors settled, or is skipped when none of its incoming edges is live.
 * Each completed node (and each model call, tool call, map item, loop
 * iteration...) is journaled durably before the next starts, and reused from the
 * journal on a later drive (recovery, approvals arriving, timers due). The drive
 * ends completed, refused, failed, cancelled or waiting, with a final record.
 */
import { contentHash } from '../canonical.ts';
import type { JsonObject } from '../journal/record.ts';
import { asJson, RunContext } from './internal/context.ts';
import { refuse, Stop } from './internal/stop.ts';
import { EXECUTORS } from './executors/registry.ts';
import { executeStep, type Inbound, type StepRef } from './internal/step.ts';
import { validateGraph } from './validate.ts';
import type { EnginePorts, Graph, GraphEdge, RunOptions, RunResult } from './types.ts';

async function preflightBudget(ctx: RunContext): Promise<void> {
  for (const seatId of Object.keys(ctx.graph.seats).sort()) {
    const agentId = ctx.graph.seats[seatId]!.agent_id;
    if (agentId === null) continue;
    if (ctx.ports.budget === undefined || !(await ctx.ports.budget.hasLedger(agentId))) {
      throw refuse('no_budget_ledger', { agent_id: agentId, seat: seatId });
    }
  }
}

/**
 * Executes (or continues) a run of `graph` on `input`.
 * @example const r = await runGraph(compiled.graph, 'task', { clock, model, budget, journal, recorded }, { run_id, requester, graph_hash })
 */
export async function runGraph(graph: Graph, input: unknown, ports: EnginePorts, options: RunOptions): Promise<RunResult> {
  const verdict = validateGraph(graph);
  const graphHash = options.graph_hash ?? (verdict.ok ? contentHash(graph) : 'sha256:' + '0'.repeat(64));
  const ctx = new RunContext(graph, graphHash, ports, options);
  const runInput = asJson(input);
  let current = 'run';
  try {
    if (!verdict.ok) throw refuse('invalid_graph', { node: verdict.node, problem: verdict.problem });
    const started = ports.recorded !== undefined ? await ports.recorded('run') : undefined;
    if (started === undefined)
      await ctx.append('run_started', 'run', runInput, null, {
        policy: graph.policy,
        nodes: graph.nodes.length,
        requester: options.requester,
        ...(options.requester_actors?.length ? { requester_actors: options.requester_actors } : {}),
      });
    await preflightBudget(ctx);

    const incoming = new Map<string, GraphEdge[]>();
    for (const e of graph.edges) {
      const list = incoming.get(e.to);
      if (list === undefined) incoming.set(e.to, [e]);
      else list.push(e);
    }
    const ran = new Map<string, { output: unknown; route: string | undefined }>();
    let last: unknown = null;
    for (const node of graph.nodes) {
      current = node.id;
      const edges = incoming.get(node.id);
      let nodeInput: unknown = runInput;
      let inbound: Inbound[] = [];
      if (edges !== undefined) {
        for (const e of edges) {
          const src = ran.get(e.from);
          if (src !== undefined && (e.when === undefined || e.when === src.route)) inbound.push({ from: e.from, output: src.output });
        }
        if (inbound.length === 0) continue; // skipped: no live incoming edge
        if (inbound.length === 1) nodeInput = inbound[0]!.output;
        else {
          const obj: Record<string, unknown> = {};
          for (const i of inbound) obj[i.from] = i.output;
          nodeInput = obj;
        }
      } else inbound = [{ from: 'run', output: runInput }];
      // A fork's replacement input of the step it was forked at.
      if (options.replace !== undefined && options.replace.step_id === node.id) nodeInput = asJson(options.replace.input);
      const step: StepRef = {
        id: node.id,
        kind: node.kind,
        config: node.config,
        ...('seat' in node && node.seat !== undefined ? { seat: node.seat } : {}),
      };
      const r = await executeStep(ctx, step, EXECUTORS[node.kind], nodeInput, inbound);
      ran.set(node.id, r);
      last = r.output;
    }
    const output = ran.get(graph.exit)?.output ?? last;
    current = 'run';
    await ctx.append('run_finished', 'run/end', runInput, output, { outcome: 'completed' });
    return { outcome: 'completed', output, steps: ctx.steps };
  } catch (e) {
    return finish(ctx, e, current);
  }
}

async function finish(ctx: RunContext, e: unknown, current: string): Promise<RunResult> {
  const stop = e instanceof Stop ? e : new Stop('failed', 'internal_error', { step_id: current }, null, e);
  const stepId = typeof stop.details.step_id === 'string' ? stop.details.step_id : current;
  const details: JsonObject = { ...stop.details };
  try {
    if (stop.outcome === 'waiting') {
      await ctx.append('waiting', stop.waiting?.step_id ?? stepId, null, null, {
        reason: stop.reason,
        for: stop.waiting?.for ?? null,
        wake_at: stop.waiting?.wake_at ?? null,
        // A lost outcome names the call (tool, seat, effect key, attempt): what an operator resolves.
        ...(stop.waiting?.for === 'outcome' ? { effect: details } : {}),
      });
    } else {
      if (stop.outcome === 'refused') await ctx.append('refusal', stepId, null, null, { ...details, reason: stop.reason });
      // The step the run ended in: a model call leaves no record before its answer (its reservation is its intent),
      // so a run failed or cancelled inside one names it here (the console shows where it stopped).
      await ctx.append('run_finished', 'run/end', null, null, {
        outcome: stop.outcome,
        reason: stop.reason,
        ...(stepId !== 'run' && stop.outcome !== 'refused' ? { step_id: stepId } : {}),
      });
    }
  } catch (journalError) {
    return {
      outcome: 'failed',
      output: null,
      reason: 'journal_error',
      details: { step_id: stepId },
      steps: ctx.steps,
      cause: journalError,
    };
  }
  const result: RunResult = { outcome: stop.outcome, output: null, reason: stop.reason, details, steps: ctx.steps };
  if (stop.waiting !== null) result.waiting = stop.waiting;
  if (stop.cause !== undefined) result.cause = stop.cause;
  return result;
}
