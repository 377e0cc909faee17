/**
 * The `recorded(stepId)` port from a run's journal: the last `step`, `decision`
 * or `run_started` record of a step id, with its output loaded by output_hash
 * from the content-addressed store beside the journal. Used by the cell's run
 * layer, the edge and the in-memory journal, so recovery reuses outputs the
 * same way everywhere. A referenced output missing from the store is
 * corruption: it throws (the run fails) rather than re-executing the step.
 */
import type { RecordedStep } from '../engine/types.ts';
import type { JournalRecord } from './record.ts';

const REUSABLE = new Set(['step', 'decision', 'run_started']);

/** Index of the reusable records of a journal. `blob(hash)` returns a stored value or undefined. */
export function recordedFrom(
  records: readonly JournalRecord[],
  blob: (hash: string) => unknown,
): (stepId: string) => RecordedStep | undefined {
  const byStep = new Map<string, JournalRecord>();
  for (const r of records) {
    if (REUSABLE.has(r.kind)) byStep.set(r.step_id, r);
  }
  return (stepId) => {
    const r = byStep.get(stepId);
    if (r === undefined) return undefined;
    const output = blob(r.output_hash);
    if (output === undefined) throw new TypeError(`journal: output ${r.output_hash} of step ${stepId} is missing from the store`);
    return r.data !== undefined ? { output, data: r.data, input_hash: r.input_hash } : { output, input_hash: r.input_hash };
  };
}

/**
 * How many calls of each step were started (an `intent` record) and never
 * recorded as finished (no reusable record after the intent): the calls in
 * flight when earlier drives stopped.
 */
export function intentsFrom(records: readonly JournalRecord[]): (stepId: string) => number {
  const open = new Map<string, number>();
  for (const r of records) {
    if (REUSABLE.has(r.kind) || r.kind === 'attempt') open.delete(r.step_id);
    else if (r.kind === 'intent') open.set(r.step_id, (open.get(r.step_id) ?? 0) + 1);
  }
  return (stepId) => open.get(stepId) ?? 0;
}

/**
 * The attempts port from a journal: per call step id, the `attempt` records so
 * far and the due time of the next attempt (the last record's `retry_at`).
 */
export function attemptsFrom(records: readonly JournalRecord[]): (stepId: string) => { count: number; retry_at: number | null } {
  const seen = new Map<string, { count: number; retry_at: number | null }>();
  for (const r of records) {
    if (r.kind !== 'attempt') continue;
    const at = r.data?.['retry_at'];
    seen.set(r.step_id, { count: (seen.get(r.step_id)?.count ?? 0) + 1, retry_at: typeof at === 'number' ? at : null });
  }
  return (stepId) => seen.get(stepId) ?? { count: 0, retry_at: null };
}

/** True when a record's step output can be reused on a later drive. */
export function isReusable(kind: string): boolean {
  return REUSABLE.has(kind);
}
