/**
 * Lost outcomes in the journal, the one reading and writing both programs use (the cell:
 * cell/runs/outcomes.ts; the device: edge/outcomes.ts). A run that waits `outcome_unknown`
 * (internal/effects.ts) names the call in its `waiting` record (`data.effect`: tool, seat,
 * effect key, attempt); an operator's resolution of that attempt is an `outcome_resolved` record
 * (`data`: by, resolution, attempt, effect_key, tool, comment; its value the recorded result for
 * `record`, else null). Where the resolution is kept for the engine's outcomes port is each
 * program's business (the cell's table; the device's journal itself: `journalResolution`).
 */
import { contentHash } from '../canonical.ts';
import type { JournalRecord, JsonObject } from '../journal/record.ts';
import type { OutcomeResolution } from './types.ts';

/** The journal record kind of a resolution. */
export const OUTCOME_RESOLVED = 'outcome_resolved';

/** The call a run waiting `outcome_unknown` waits on. */
export interface LostOutcome {
  step_id: string;
  tool: string | null;
  seat: string | null;
  effect_key: string;
  /** The issue of the call whose outcome is lost (1 for the first). */
  attempt: number;
  /** When the run began to wait on it (its `waiting` record). */
  since: number;
}

/** What an operator asks: the resolution, `result` for `record`, and a comment kept with it. */
export interface ResolutionAsk {
  resolution: OutcomeResolution['resolution'];
  result?: unknown;
  comment?: string | undefined;
}

/** The lost outcome a `waiting` record names (engine: run.ts finish, `data.effect`), or null. */
export function lostOf(rec: JournalRecord | undefined): LostOutcome | null {
  const d = rec?.data;
  if (!rec || d?.['reason'] !== 'outcome_unknown') return null;
  const e = d['effect'];
  if (typeof e !== 'object' || e === null || Array.isArray(e)) return null;
  const x = e as JsonObject;
  if (typeof x['effect_key'] !== 'string' || typeof x['attempt'] !== 'number') return null;
  return {
    step_id: rec.step_id,
    tool: typeof x['tool'] === 'string' ? x['tool'] : null,
    seat: typeof x['seat'] === 'string' ? x['seat'] : null,
    effect_key: x['effect_key'],
    attempt: x['attempt'],
    since: rec.at,
  };
}

/** The call the run last waited on for a lost outcome (whatever happened since), or null. */
export function lastLost(records: readonly JournalRecord[]): LostOutcome | null {
  for (let i = records.length - 1; i >= 0; i--) if (records[i]!.kind === 'waiting') return lostOf(records[i]);
  return null;
}

/**
 * The `outcome_resolved` record of `actor`'s resolution of `lost`: its fields and its value (the recorded
 * result for `record`, else null). `extra` joins `data` (the device names the key bundle it judged with).
 */
export function resolutionRecord(
  actor: string,
  lost: LostOutcome,
  ask: ResolutionAsk,
  extra: JsonObject = {},
): {
  fields: { step_id: string; kind: typeof OUTCOME_RESOLVED; output_hash: string; data: JsonObject };
  value: unknown;
  details: JsonObject;
} {
  const details: JsonObject = { resolution: ask.resolution, attempt: lost.attempt, effect_key: lost.effect_key, tool: lost.tool };
  const value = ask.resolution === 'record' ? (ask.result ?? null) : null;
  return {
    fields: {
      step_id: lost.step_id,
      kind: OUTCOME_RESOLVED,
      output_hash: contentHash(value),
      data: { by: actor, ...details, ...(ask.comment !== undefined ? { comment: ask.comment } : {}), ...extra },
    },
    value,
    details,
  };
}

/** The latest resolution of `stepId`'s lost outcome recorded in `records` (the engine's outcomes port on a journal). */
export function journalResolution(
  records: readonly JournalRecord[],
  blob: (hash: string) => unknown,
  stepId: string,
): OutcomeResolution | undefined {
  for (let i = records.length - 1; i >= 0; i--) {
    const r = records[i]!;
    if (r.kind !== OUTCOME_RESOLVED || r.step_id !== stepId) continue;
    const d = r.data ?? {};
    const resolution = d['resolution'];
    if (resolution !== 'retry' && resolution !== 'record' && resolution !== 'fail') continue;
    if (typeof d['attempt'] !== 'number' || typeof d['by'] !== 'string') continue;
    return {
      resolution,
      attempt: d['attempt'],
      by: d['by'],
      at: r.at,
      ...(resolution === 'record' ? { result: blob(r.output_hash) ?? null } : {}),
    };
  }
  return undefined;
}

/** Whether `records` resolve the attempt `lost` names already (one resolution per attempt). */
export function isResolved(records: readonly JournalRecord[], lost: LostOutcome): boolean {
  return records.some((r) => r.kind === OUTCOME_RESOLVED && r.step_id === lost.step_id && r.data?.['attempt'] === lost.attempt);
}
