/**
 * The query of the device's run lists (edge/offline.ts), as the cell's run list reads it
 * (cell/teams/crew-runs/routes-runs.ts: `pageQuery(100, 1000)` and `state`, `crew_id`): a value the cell
 * refuses is refused here with the cell's 400 (`request failed validation`, the fields named, never the values).
 */
import { ServiceError } from '../core/errors.ts';

/** The cell's run states (cell/runs/repository.ts RUN_STATES): a device has only some, the others list nothing. */
const STATES = ['queued', 'running', 'waiting', 'outcome_unknown', 'completed', 'failed', 'refused', 'cancelled'] as const;
const MAX_LIMIT = 1000;
const DEFAULT_LIMIT = 100;
/** The cell's largest offset (cell/http/openapi.ts MAX_OFFSET). */
const MAX_OFFSET = 1_000_000_000;

export interface RunListQuery {
  state?: (typeof STATES)[number] | undefined;
  limit: number;
  offset: number;
}

export function runListQuery(q: Record<string, string>): RunListQuery {
  const issues: { path: string; code: string; message: string }[] = [];
  const int = (name: string, min: number, max: number, dflt: number): number => {
    const v = q[name];
    if (v === undefined) return dflt;
    const n = /^[0-9]{1,16}$/.test(v) ? Number(v) : NaN;
    if (Number.isInteger(n) && n >= min && n <= max) return n;
    issues.push({ path: name, code: 'invalid_type', message: `must be a decimal integer from ${min} to ${max}` });
    return dflt;
  };
  const limit = int('limit', 1, MAX_LIMIT, DEFAULT_LIMIT);
  const offset = int('offset', 0, MAX_OFFSET, 0);
  const state = q['state'];
  if (state !== undefined && !(STATES as readonly string[]).includes(state))
    issues.push({ path: 'state', code: 'invalid_value', message: `must be one of ${STATES.join(', ')}` });
  const crewId = q['crew_id'];
  if (crewId !== undefined && (crewId.length < 1 || crewId.length > 200))
    issues.push({ path: 'crew_id', code: 'too_big', message: 'must be 1 to 200 characters' });
  if (issues.length) throw new ServiceError('invalid_request', 'request failed validation', { details: { issues } });
  return { state: state as RunListQuery['state'], limit, offset };
}
