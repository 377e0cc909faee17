/**
 * Step policies: `timeout_ms` and `retry` on the steps that call out (a billet's
 * agent step, a skill step, a tool step). One validator, used by the compiler
 * (billets and stages: the policy is part of the graph and its hash), by the
 * graph validator, and by the cell's authoring routes (400 naming the field).
 *
 * - `timeout_ms`: each call of the step (model or tool) is cancelled after it;
 *   the step fails `step_timeout` (not a retry reason: a timeout is the step's
 *   answer).
 * - `retry`: `{ max_attempts, backoff_ms, max_backoff_ms, on }`: a call failing
 *   for a reason in `on` (closed set RETRY_REASONS) is issued again, at most
 *   `max_attempts` calls in all, after `min(backoff_ms * 2^(n-1), max_backoff_ms)`
 *   ms (n = the attempt that failed). Every attempt is an `attempt` journal
 *   record; the wait is a durable timer (its due time is in the record).
 */
import type { JsonObject } from '../journal/record.ts';

/** Failure reasons a retry policy may name (closed set). */
export const RETRY_REASONS = [
  'provider_timeout',
  'provider_rate_limited',
  'provider_error',
  'provider_unreachable',
  'tool_unreachable',
  'tool_error',
] as const;
export type RetryReason = (typeof RETRY_REASONS)[number];

export interface RetryPolicy {
  /** Calls in all, the first included (2..10). */
  max_attempts: number;
  /** Wait before the second call, ms; doubles per attempt (0..3 600 000). */
  backoff_ms: number;
  /** Cap of a wait, ms (>= backoff_ms, <= 86 400 000). */
  max_backoff_ms: number;
  /** Failure reasons that are retried (non-empty, from RETRY_REASONS). */
  on: RetryReason[];
}

export interface StepPolicy {
  /** Bound on each call of the step, ms (1..86 400 000). */
  timeout_ms?: number;
  retry?: RetryPolicy;
}

export const MAX_STEP_TIMEOUT_MS = 86_400_000;
export const MAX_ATTEMPTS = 10;
export const MAX_BACKOFF_MS = 86_400_000;

const isInt = (v: unknown, min: number, max: number): v is number =>
  typeof v === 'number' && Number.isSafeInteger(v) && v >= min && v <= max;

/**
 * The first problem of a step policy's fields in `v` (an object that may hold
 * other fields too), as `{ field, problem }` with the field's dotted path under
 * `prefix`; null when `timeout_ms` and `retry` are absent or valid.
 */
export function stepPolicyProblem(v: Record<string, unknown>, prefix = ''): { field: string; problem: string } | null {
  const f = (name: string) => (prefix ? `${prefix}.${name}` : name);
  if (v['timeout_ms'] !== undefined && !isInt(v['timeout_ms'], 1, MAX_STEP_TIMEOUT_MS))
    return { field: f('timeout_ms'), problem: `timeout_ms must be an integer from 1 to ${MAX_STEP_TIMEOUT_MS}` };
  const r = v['retry'];
  if (r === undefined) return null;
  if (typeof r !== 'object' || r === null || Array.isArray(r)) return { field: f('retry'), problem: 'retry must be an object' };
  const x = r as Record<string, unknown>;
  for (const k of Object.keys(x))
    if (!['max_attempts', 'backoff_ms', 'max_backoff_ms', 'on'].includes(k))
      return { field: f(`retry.${k}`), problem: `unknown field ${k}` };
  if (!isInt(x['max_attempts'], 2, MAX_ATTEMPTS))
    return { field: f('retry.max_attempts'), problem: `max_attempts must be an integer from 2 to ${MAX_ATTEMPTS}` };
  if (!isInt(x['backoff_ms'], 0, 3_600_000))
    return { field: f('retry.backoff_ms'), problem: 'backoff_ms must be an integer from 0 to 3600000' };
  if (!isInt(x['max_backoff_ms'], 0, MAX_BACKOFF_MS) || x['max_backoff_ms'] < x['backoff_ms'])
    return { field: f('retry.max_backoff_ms'), problem: `max_backoff_ms must be an integer from backoff_ms to ${MAX_BACKOFF_MS}` };
  const on = x['on'];
  if (!Array.isArray(on) || on.length === 0 || on.length > RETRY_REASONS.length)
    return { field: f('retry.on'), problem: `on must be a non-empty list of ${RETRY_REASONS.join(', ')}` };
  for (const [i, reason] of on.entries())
    if (!(RETRY_REASONS as readonly unknown[]).includes(reason))
      return {
        field: f(`retry.on.${i}`),
        problem: `unknown retry reason ${String(reason).slice(0, 40)}; one of ${RETRY_REASONS.join(', ')}`,
      };
  if (new Set(on).size !== on.length) return { field: f('retry.on'), problem: 'on lists a reason twice' };
  return null;
}

/** The policy fields of a valid object in canonical form (reasons sorted), or {} when none: what a graph carries. */
export function stepPolicyOf(v: Record<string, unknown>): StepPolicy & JsonObject {
  const out: StepPolicy & JsonObject = {};
  if (typeof v['timeout_ms'] === 'number') out.timeout_ms = v['timeout_ms'];
  const r = v['retry'] as RetryPolicy | undefined;
  if (r !== undefined)
    out.retry = {
      backoff_ms: r.backoff_ms,
      max_attempts: r.max_attempts,
      max_backoff_ms: r.max_backoff_ms,
      on: [...r.on].sort(),
    };
  return out;
}

/** The wait after attempt `n` (1-based) failed, ms. */
export function backoffAfter(policy: RetryPolicy, n: number): number {
  return Math.min(policy.backoff_ms * 2 ** Math.min(n - 1, 40), policy.max_backoff_ms);
}
