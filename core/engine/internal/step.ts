/**
 * Shared shapes of the executors and the memoized execution of one step
 * (a graph node, or an item / iteration of map and loop).
 */
import type { JsonObject } from '../../journal/record.ts';
import type { RunContext } from './context.ts';
import type { ExecutorKind } from '../types.ts';

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
    const route = rec.data?.route;
    return { output: rec.output, route: typeof route === 'string' ? route : undefined };
  }
  await ctx.checkCancelled();
  const r = await exec(ctx, step, input, inbound);
  const data: JsonObject = { ...(r.data ?? {}), executor: step.kind, ...(r.route !== undefined ? { route: r.route } : {}) };
  const output = r.output === undefined ? null : r.output;
  await ctx.append(r.decision === true ? 'decision' : 'step', step.id, input, output, data);
  return { output, route: r.route };
}

/** An object input usable as tool arguments, else `{ input }`. */
export function asArgs(input: unknown): JsonObject {
  return typeof input === 'object' && input !== null && !Array.isArray(input) ? (input as JsonObject) : { input };
}
