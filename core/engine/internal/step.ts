/**
 * Shared shapes of the executors and the memoized execution of one step
 * (a graph node, or an item / iteration of map and loop).
 */
import type { JsonObject } from '../../journal/record.ts';
import type { RunContext } from './context.ts';
import type { ExecutorKind, RecordedStep, TraceSpan } from '../types.ts';
import { contentHash } from '../../canonical.ts';
import { approvalReusable, leadsTo, recordedRequester } from '../approval-rule.ts';
import { refuse, Stop } from './stop.ts';

/** A node, or a leaf body under a derived step id. */
export interface StepRef {
  id: string;
  kind: ExecutorKind;
  seat?: string;
  config: unknown;
}
/** A live incoming edge's source and its output, in edge order. */
export interface Inbound {
  from: string;
  output: unknown;
}
export interface ExecResult {
  output: unknown;
  /** Routing choice (conditional: then/else; delegate: the chosen report). */
  route?: string;
  /** Journal the step as a `decision` (gate, approval, delegate, consensus). */
  decision?: boolean;
  data?: JsonObject;
}
export type Executor = (ctx: RunContext, step: StepRef, input: unknown, inbound: Inbound[]) => Promise<ExecResult>;

/** Runs a step once across drives: a recorded output (and route) is reused; otherwise it executes and is journaled. */
export async function executeStep(
  ctx: RunContext,
  step: StepRef,
  exec: Executor,
  input: unknown,
  inbound: Inbound[],
): Promise<{ output: unknown; route: string | undefined }> {
  ctx.count(step.seat ?? null);
  const rec = ctx.ports.recorded !== undefined ? await ctx.ports.recorded(step.id) : undefined;
  if (rec !== undefined) {
    if (step.kind === 'human_approval' && rec.data?.['reused'] !== undefined) assertApprovalStands(ctx, step, input, rec);
    const route = rec.data?.route;
    return { output: rec.output, route: typeof route === 'string' ? route : undefined };
  }
  await ctx.checkCancelled();
  const run = async (): Promise<{ output: unknown; route: string | undefined }> => {
    const r = await exec(ctx, step, input, inbound);
    const data: JsonObject = { ...(r.data ?? {}), executor: step.kind, ...(r.route !== undefined ? { route: r.route } : {}) };
    const output = r.output === undefined ? null : r.output;
    await ctx.append(r.decision === true ? 'decision' : 'step', step.id, input, output, data);
    return { output, route: r.route };
  };
  const tracer = ctx.ports.tracer;
  return tracer === undefined ? run() : tracer.span(`step ${step.id}`, stepAttributes(ctx, step), (s) => traced(s, run));
}

/**
 * A fork's or rerun's copy of its parent's approval stands only for the same input, the same
 * requester and chain, and no replaced input after it (approvalReusable). The cell copies only the
 * approvals that stand (cell/runs/fork.ts); a copy that does not is refused here, never reused.
 */
function assertApprovalStands(ctx: RunContext, step: StepRef, input: unknown, rec: RecordedStep): void {
  const replace = ctx.opts.replace?.step_id;
  const node = step.id.split(/[/[#]/)[0] ?? step.id;
  const stands = approvalReusable(
    { input_hash: rec.input_hash, requester: recordedRequester(rec.data) },
    {
      input_hash: contentHash(input ?? null),
      requester: ctx.requester,
      replacedAfter: replace !== undefined && replace !== node && leadsTo(ctx.graph.edges, node, replace),
    },
  );
  if (!stands) throw refuse('approval_input_changed', { step_id: step.id });
}

/** What a step's span says of it: its id, executor, seat and the seat's agent. Never its input or output. */
function stepAttributes(ctx: RunContext, step: StepRef): Record<string, string | number | boolean> {
  const a: Record<string, string | number | boolean> = { 'agent_cell.step.id': step.id, 'agent_cell.step.kind': step.kind };
  if (step.seat !== undefined) {
    a['agent_cell.seat'] = step.seat;
    const agent = ctx.graph.seats[step.seat]?.agent_id;
    if (typeof agent === 'string') a['gen_ai.agent.id'] = agent;
  }
  return a;
}

/** Runs a step in its span: a refusal or failure marks it, a stop to wait does not. */
async function traced<T>(s: TraceSpan, run: () => Promise<T>): Promise<T> {
  try {
    const out = await run();
    s.set({ 'agent_cell.step.outcome': 'completed' });
    return out;
  } catch (e) {
    if (e instanceof Stop) {
      s.set({ 'agent_cell.step.outcome': e.outcome, 'agent_cell.step.reason': e.reason });
      if (e.outcome === 'waiting' || e.outcome === 'cancelled') s.ok();
      else s.fail(e.reason);
    }
    throw e;
  }
}

/** An object input usable as tool arguments, else `{ input }`. */
export function asArgs(input: unknown): JsonObject {
  return typeof input === 'object' && input !== null && !Array.isArray(input) ? (input as JsonObject) : { input };
}
