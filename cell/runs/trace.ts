/**
 * The span of one drive of a run (docs/operations.md "Traces"): a crew run's
 * `invoke_agent {crew name}` span on the GenAI conventions (the crew is the
 * agent: `gen_ai.agent.id`, `gen_ai.agent.name`; the providers its model
 * calls went to and the tokens they used, added up by the calls' own spans;
 * `error.type` the run's reason), a job run's `job {job_type}` span, with
 * the run's id, crew, formation and graph hash. Every drive of a run joins
 * the run's trace: the trace is kept with the run in its signed journal
 * (`data.traceparent` of its `run_started` record, written inside the first
 * drive's span, or of its `run_requested` record, written by the request
 * that started it), so a drive after an approval, a restart or a takeover by
 * a peer continues the same trace as a child of the first; the request that
 * woke it is a link. Only used when spans are exported (`core.traces.spans`).
 */
import type { Graph, RunResult, TracerPort } from '../../core/engine/types.ts';
import type { UsageTally } from '../http/trace.ts';
import type { RunsContext } from './context.ts';
import { recordsOfKinds } from './repository.ts';
import { getRun } from './runs.ts';

/** The trace a run's drives continue: the first drive's run span, else the request that started the run. */
async function storedTrace(ctx: RunsContext, runId: string): Promise<string | undefined> {
  const recs = await recordsOfKinds(ctx.core.store, runId, ['run_requested', 'run_started']);
  const of = (kind: string) => {
    const tp = recs.find((r) => r.kind === kind)?.data?.['traceparent'];
    return typeof tp === 'string' ? tp : undefined;
  };
  return of('run_started') ?? of('run_requested');
}

/** The drive's tally as the GenAI conventions name it: one provider when the calls went to one, usage when any call was made. */
function usageAttributes(t: UsageTally): Record<string, string | number | string[] | undefined> {
  const providers = [...t.providers].sort();
  return {
    'gen_ai.provider.name': providers.length === 1 ? providers[0] : undefined,
    'agent_cell.provider.names': providers.length > 1 ? providers : undefined,
    'gen_ai.usage.input_tokens': providers.length ? t.inputTokens : undefined,
    'gen_ai.usage.output_tokens': providers.length ? t.outputTokens : undefined,
  };
}

/**
 * Runs one drive of `runId` in its span; `drive` is given the tracer port the engine opens step spans with.
 * `agentName`: what a crew run's span calls its agent (the crew's name; else the span is `invoke_agent`).
 */
export async function inRunSpan<T extends { state: string; result: RunResult | null }>(
  ctx: RunsContext,
  runId: string,
  graph: Graph,
  takeover: boolean,
  agentName: string | undefined,
  drive: (tracer: TracerPort) => Promise<T>,
): Promise<T> {
  const traces = ctx.core.traces;
  const stored = await storedTrace(ctx, runId);
  const current = traces.traceparent();
  const run = await getRun(ctx, runId);
  const crew = run?.kind === 'crew';
  // The conventions' `invoke_agent {gen_ai.agent.name}`: a name, not an id (ids go in the attributes).
  const name = crew ? (agentName ? `invoke_agent ${agentName}` : 'invoke_agent') : `job ${run?.job_type ?? ''}`.trim();
  const tally: UsageTally = { providers: new Set(), inputTokens: 0, outputTokens: 0 };
  const tracer: TracerPort = { span: (n, attributes, fn) => traces.span(n, { attributes }, fn) };
  return traces.span(
    name,
    {
      parent: stored,
      ...(crew ? { tally } : {}),
      // Woken from another trace (an approving request): linked, not joined.
      ...(stored !== undefined && current !== undefined && current.slice(3, 35) !== stored.slice(3, 35) ? { links: [current] } : {}),
      attributes: {
        'gen_ai.operation.name': crew ? 'invoke_agent' : undefined,
        'gen_ai.agent.id': crew ? (run.crew_id ?? undefined) : undefined,
        'gen_ai.agent.name': crew ? agentName : undefined,
        'agent_cell.run.id': runId,
        'agent_cell.run.kind': run?.kind,
        'agent_cell.crew.id': run?.crew_id ?? undefined,
        'agent_cell.job.type': run?.job_type ?? undefined,
        'agent_cell.formation.hash': graph.formation_hash,
        'agent_cell.graph.hash': run?.graph_hash ?? undefined,
        'agent_cell.cell.id': ctx.core.config.cellId,
        'agent_cell.run.takeover': takeover,
      },
    },
    async (s) => {
      const r = await drive(tracer);
      s.set({ 'agent_cell.run.state': r.state, ...(crew ? usageAttributes(tally) : {}) });
      // `error.type`: the run's reason (low cardinality, from core/reasons.ts), else the conventions' `_OTHER`.
      if (r.state === 'failed' || r.state === 'refused') s.fail(r.result?.reason ?? '_OTHER');
      return r;
    },
  );
}
