/**
 * Lost outcomes: a side-effecting call not declared idempotent that was in
 * flight when its driver stopped (a crash between dispatch and result) is not
 * issued blindly again (core/engine/internal/effects.ts): the run waits in
 * state `outcome_unknown`, its last `waiting` record naming the call (tool,
 * seat, effect key, attempt). It has no timer and nothing to take over: it
 * waits for an operator, on any cell, who resolves that attempt:
 *
 * - `retry`: the call is issued again, with the same effect key;
 * - `record`: the operator's JSON value is the call's result (it is not issued);
 * - `fail`: the run fails (`outcome_unknown`).
 *
 * A resolution is a row of `run_outcome_resolutions` (one per attempt: a second
 * is 409 already_resolved), audited in the same transaction, then an
 * `outcome_resolved` journal record; it moves the run back to `waiting` with
 * the resolving cell as coordinator, so a cell that dies before it drives the
 * run leaves it to a peer's (or its own restart's) sweep of waiting runs. The
 * engine reads it through its outcomes port (`outcomesPort`) when the run is
 * driven again. Who may resolve is the caller's route's business (the crew and
 * job routes: the run's authority within the caller).
 */
import type { OutcomeResolution } from '../../core/engine/types.ts';
import { lastLost as lastLostOf, resolutionRecord, type LostOutcome, type ResolutionAsk } from '../../core/engine/outcome-resolution.ts';
import { ServiceError, notFound } from '../../core/errors.ts';
import { isoTime } from '../../core/iso-time.ts';
import type { JsonObject } from '../../core/journal/record.ts';
import type { RunsContext } from './context.ts';
import { appendJournal, RunClosedError } from './journal.ts';
import * as repo from './repository.ts';
import { getRun, isTerminal, setRunStateTx, type Run } from './runs.ts';

export type { LostOutcome, ResolutionAsk };

/** The engine's outcomes port of one run: the latest resolution of a step's lost outcome. */
export function outcomesPort(ctx: RunsContext, runId: string): (stepId: string) => Promise<OutcomeResolution | undefined> {
  return async (stepId) => {
    const r = await repo.latestResolution(ctx.core.store, runId, stepId);
    if (!r) return undefined;
    return {
      resolution: r.resolution,
      attempt: r.attempt,
      by: r.principal,
      at: r.at,
      ...(r.resolution === 'record' ? { result: r.result } : {}),
    };
  };
}

/** The call the run last waited on for a lost outcome (whatever its state now), or null. */
async function lastLost(ctx: RunsContext, runId: string): Promise<LostOutcome | null> {
  return lastLostOf(await repo.recordsOfKinds(ctx.core.store, runId, ['waiting']));
}

/** The call a run in state `outcome_unknown` waits on; null for a run in any other state. */
export async function lostOutcome(ctx: RunsContext, run: Run): Promise<LostOutcome | null> {
  return run.state === 'outcome_unknown' ? lastLost(ctx, run.run_id) : null;
}

/** A lost outcome as run views show it (`unknown_outcome`; the time as ISO 8601). */
export async function lostOutcomeView(ctx: RunsContext, run: Run): Promise<(Omit<LostOutcome, 'since'> & { since: string }) | null> {
  const l = await lostOutcome(ctx, run);
  return l ? { ...l, since: isoTime(l.since) } : null;
}

const conflict = (reason: 'run_terminal' | 'no_unknown_outcome' | 'already_resolved', message: string, details: JsonObject = {}) =>
  new ServiceError('conflict', message, { details: { reason, ...details } });

/**
 * Records an operator's resolution of the lost outcome the run waits on at `stepId` (audited as `action`),
 * then an `outcome_resolved` journal record. True when the caller should wake the run (drive it again);
 * false when it ended meanwhile. 409 `run_terminal`, `no_unknown_outcome` (not waiting on a lost outcome),
 * `already_resolved`; 404 for a step it does not wait on.
 */
export async function resolveOutcome(
  ctx: RunsContext,
  actor: string,
  run: Run,
  stepId: string,
  ask: ResolutionAsk,
  action: string,
): Promise<boolean> {
  const runId = run.run_id;
  if (isTerminal(run.state)) throw conflict('run_terminal', `the run is ${run.state}`, { state: run.state });
  const lost = await lastLost(ctx, runId);
  if (lost === null) throw conflict('no_unknown_outcome', 'the run does not wait on the lost outcome of a call', { state: run.state });
  if (lost.step_id !== stepId) throw notFound('lost outcome of that step');
  const at = ctx.core.clock.now();
  const rec = resolutionRecord(actor, lost, ask);
  const details = rec.details;
  await ctx.core.store.write(async (tx) => {
    if (await repo.hasResolution(tx, runId, stepId, lost.attempt))
      throw conflict('already_resolved', 'this lost outcome was resolved already', { attempt: lost.attempt });
    const now = await getRun(ctx, runId, tx);
    if (now?.state !== 'outcome_unknown')
      throw conflict('no_unknown_outcome', `the run is ${now?.state ?? 'gone'}, not waiting on a lost outcome`, {
        state: now?.state ?? null,
      });
    await repo.insertResolution(tx, runId, stepId, {
      attempt: lost.attempt,
      resolution: ask.resolution,
      result: ask.result ?? null,
      principal: actor,
      comment: ask.comment ?? null,
      at,
    });
    // Waiting to be driven again, by this cell; if it dies first, the sweeps of waiting runs drive it.
    await setRunStateTx(tx, runId, 'waiting', at, { coordinator: ctx.core.config.cellId });
    await ctx.iam.audit(tx, { at, actor, action, target: `${runId}:${stepId}`, outcome: 'ok', details });
  });
  try {
    await appendJournal(ctx, runId, rec.fields, [rec.value]);
  } catch (e) {
    if (!(e instanceof RunClosedError)) throw e;
    return false; // cancelled meanwhile; the resolution stays recorded (audit)
  }
  return true;
}
