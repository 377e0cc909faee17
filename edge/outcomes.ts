/**
 * Lost outcomes on the device (docs/edge.md, "Lost outcomes on the device"): a side-effecting call whose
 * outcome was lost leaves the run waiting (reason `outcome_unknown`, internal/effects.ts); an operator
 * resolves that attempt as at the cell (retry with the same effect key, record its result, fail the run).
 * The resolution is an `outcome_resolved` record of the run's journal, written by core's one rule
 * (core/engine/outcome-resolution.ts), signed by the device, naming the operator and the key bundle the
 * device judged the operator's credential with (`key_bundle`), so the cell re-judges it on import. The
 * engine reads it back from the journal (`deviceOutcomesPort`).
 * Pure journal work: the route (edge/offline.ts) serialises it with the run's drives.
 */
import { ServiceError, invalid, notFound } from '../core/errors.ts';
import { isoTime } from '../core/iso-time.ts';
import type { OutcomeResolution } from '../core/engine/types.ts';
import { isResolved, journalResolution, lastLost, resolutionRecord, type ResolutionAsk } from '../core/engine/outcome-resolution.ts';
import type { JsonObject } from '../core/journal/record.ts';
import type { JournalFile, RunFile } from './runs.ts';

const TERMINAL: readonly RunFile['state'][] = ['completed', 'failed', 'refused', 'cancelled'];

const conflict = (reason: 'run_terminal' | 'no_unknown_outcome' | 'already_resolved', message: string, details: JsonObject = {}) =>
  new ServiceError('conflict', message, { details: { reason, ...details } });

/** The lost outcome the run waits on now (it waits, its last wait names a lost call not resolved yet), or null. */
function waitingOn(run: RunFile, journal: JournalFile) {
  if (run.state !== 'waiting' || run.reason !== 'outcome_unknown') return null;
  const lost = lastLost(journal.records);
  return lost !== null && !isResolved(journal.records, lost) ? lost : null;
}

/** The run view's `unknown_outcome` in the cell's shape (cell/runs/api.ts UnknownOutcomeSchema), null when none. */
export function unknownOutcomeView(run: RunFile, journal: JournalFile) {
  const l = waitingOn(run, journal);
  return l ? { ...l, since: isoTime(l.since) } : null;
}

/** The engine's outcomes port of a run: the latest resolution its journal (the live one the drive appends to) records. */
export function deviceOutcomesPort(journal: () => JournalFile): (stepId: string) => Promise<OutcomeResolution | undefined> {
  return async (stepId) => {
    const j = journal();
    return journalResolution(j.records, (h) => j.values[h], stepId);
  };
}

/**
 * Judges a resolution as the cell's route does (cell/runs/outcomes.ts resolveOutcome): 409 `run_terminal`,
 * `no_unknown_outcome`, `already_resolved`; 404 for a step the run does not wait on. Returns the record to
 * append (core's `outcome_resolved`, naming the key bundle version the device judged the caller with).
 */
export function judgeResolution(
  run: RunFile,
  journal: JournalFile,
  stepId: string,
  actor: string,
  ask: ResolutionAsk,
  keyBundleVersion: number | null,
) {
  if (TERMINAL.includes(run.state)) throw conflict('run_terminal', `the run is ${run.state}`, { state: run.state });
  const lost = lastLost(journal.records);
  if (lost === null || run.reason !== 'outcome_unknown')
    throw conflict('no_unknown_outcome', 'the run does not wait on the lost outcome of a call', { state: run.state });
  if (lost.step_id !== stepId) throw notFound('lost outcome of that step');
  if (isResolved(journal.records, lost))
    throw conflict('already_resolved', 'this lost outcome was resolved already', { attempt: lost.attempt });
  return resolutionRecord(actor, lost, ask, keyBundleVersion !== null ? { key_bundle: keyBundleVersion } : {});
}

/** A resolution's body as the cell's route takes it (OutcomeResolutionSchema: `result` with `record` only; comment ≤ 2000). */
export function resolutionBody(body: unknown): ResolutionAsk {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalid('the body must be an object');
  const b = body as Record<string, unknown>;
  for (const k of Object.keys(b)) if (k !== 'resolution' && k !== 'result' && k !== 'comment') throw invalid(`unknown field ${k}`);
  const r = b['resolution'];
  if (r !== 'retry' && r !== 'record' && r !== 'fail') throw invalid("resolution must be 'retry', 'record' or 'fail'");
  if ((r === 'record') !== (b['result'] !== undefined)) throw invalid('`result` is required with `record` and refused otherwise');
  if (b['comment'] !== undefined && (typeof b['comment'] !== 'string' || b['comment'].length > 2000))
    throw invalid('comment must be a string of at most 2000 characters');
  return { resolution: r, ...(r === 'record' ? { result: b['result'] } : {}), comment: b['comment'] as string | undefined };
}
