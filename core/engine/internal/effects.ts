/**
 * Side-effecting tool calls: their effect key, and the crash rule. A call
 * whose `intent` record has no result was in flight when an earlier drive
 * stopped (a crash between its dispatch and its result): whether it acted is
 * unknown. A call declared idempotent (ToolDescriptor.idempotent) is issued
 * again with the same effect key, at most once, as a model call is
 * (RunContext.beginCall). Any other side-effecting call is not issued blindly
 * again: the run waits `outcome_unknown` (a `waiting` record naming the tool,
 * the effect key and the attempt) until an operator resolves that attempt
 * (`ports.outcomes`): `retry` issues it again with the same key, `record`
 * makes the operator's value its result, `fail` fails the run.
 *
 * The rule is the engine's, so the cell and the edge apply it alike: it reads
 * only the journal's intents and the resolutions port.
 */
import type { JsonObject } from '../../journal/record.ts';
import { effectKey } from '../effect-key.ts';
import type { ToolDescriptor } from '../types.ts';
import type { RunContext } from './context.ts';
import { fail, Stop } from './stop.ts';

/** The effect of one side-effecting call: its key, and whether issuing it again is harmless. */
export interface CallEffect {
  key: string;
  idempotent: boolean;
}

/** The effect of calling `desc` with `args` at `stepId`; null for a tool without side effects. */
export function callEffect(ctx: RunContext, desc: ToolDescriptor, stepId: string, args: JsonObject): CallEffect | null {
  if (!desc.side_effects) return null;
  return { key: effectKey(ctx.runId, stepId), idempotent: idempotentCall(desc, args) };
}

/** Whether this call of the tool is declared idempotent (every call, or those whose argument is one of the values). */
export function idempotentCall(desc: ToolDescriptor, args: JsonObject): boolean {
  const d = desc.idempotent;
  if (d === true) return true;
  if (d === undefined || d === false) return false;
  const v = args[d.argument];
  return typeof v === 'string' && d.values.includes(v);
}

/** What to do with a non-idempotent call: issue it (nothing was in flight, or an operator said retry), or take a recorded result. */
export type Settled = { issue: true; resolution?: JsonObject } | { issue: false; result: unknown; resolution: JsonObject };

/**
 * Before a side-effecting call not declared idempotent is issued: when an earlier issue of it is in
 * flight, it waits for (or follows) the operator's resolution of that attempt. Throws the run's wait
 * (`outcome_unknown`) or its failure (`fail`).
 */
export async function settleLostOutcome(
  ctx: RunContext,
  stepId: string,
  effect: CallEffect,
  about: { tool: string; seat: string | null },
): Promise<Settled> {
  const prior = ctx.ports.intents !== undefined ? await ctx.ports.intents(stepId) : 0;
  if (prior === 0) return { issue: true };
  const details = lostDetails(stepId, effect, about, prior);
  const r = ctx.ports.outcomes !== undefined ? await ctx.ports.outcomes(stepId) : undefined;
  // A resolution of an earlier attempt (a retry that was lost in its turn) does not resolve this one.
  if (r === undefined || r.attempt !== prior) throw waitForOperator(stepId, details);
  const resolution: JsonObject = { resolution: r.resolution, by: r.by, attempt: r.attempt };
  if (r.resolution === 'fail') throw fail('outcome_unknown', { ...details, resolved_by: r.by });
  if (r.resolution === 'record') return { issue: false, result: r.result ?? null, resolution };
  return { issue: true, resolution };
}

/**
 * A tool that says the outcome of this issue is unknown (details.reason `outcome_unknown`: http.request's
 * POST that may have reached the service and got no answer) left it as a crash would: its intent has no
 * result. A call not declared idempotent then waits for an operator too (without intents to count, the
 * run fails `outcome_unknown`: nothing could tell a later drive the call was made).
 */
export async function lostOnTheWire(
  ctx: RunContext,
  stepId: string,
  effect: CallEffect,
  about: { tool: string; seat: string | null },
  cause: unknown,
): Promise<Stop> {
  if (ctx.ports.intents === undefined) return fail('outcome_unknown', lostDetails(stepId, effect, about, 1), cause);
  return waitForOperator(stepId, lostDetails(stepId, effect, about, await ctx.ports.intents(stepId)));
}

/** True when a port's error says the call may have acted and its outcome is unknown. */
export function isLostOutcome(e: unknown): boolean {
  return (e as { details?: { reason?: unknown } } | null)?.details?.reason === 'outcome_unknown';
}

function lostDetails(stepId: string, effect: CallEffect, about: { tool: string; seat: string | null }, attempt: number): JsonObject {
  return { step_id: stepId, tool: about.tool, seat: about.seat, effect_key: effect.key, attempt };
}

function waitForOperator(stepId: string, details: JsonObject): Stop {
  return new Stop('waiting', 'outcome_unknown', details, { step_id: stepId, for: 'outcome', wake_at: null });
}
