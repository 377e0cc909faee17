/**
 * Attempts of one call under a step's retry policy (../policy.ts). Without a
 * retry policy the call is made once and nothing is added to the journal,
 * unless it fails having consumed tokens: then one failed `attempt` record
 * says how many (`usage`), so that a journal shows all a run spent (a
 * device's journal is charged from its records: core/journal/usage.ts).
 * With one, every attempt ends with an `attempt` record under the call's step
 * id (data: call, attempt, outcome ok | failed, reason, retry_at, and `usage`: the tokens a failed
 * model attempt consumed and was charged, when any); a failure
 * whose reason the policy retries, with attempts left, records the due time of
 * the next attempt and the run waits for it like a timer (a `waiting` run,
 * woken at `retry_at`): a later drive (a restart, a peer's takeover) reads the
 * due time back from the journal and waits for what is left of it.
 */
import type { JsonObject } from '../../journal/record.ts';
import { consumedBy } from '../budget.ts';
import { backoffAfter, type StepPolicy } from '../policy.ts';
import type { RunContext } from './context.ts';
import { Stop } from './stop.ts';
import { isLostOutcome } from './effects.ts';

export async function withAttempts<T>(
  ctx: RunContext,
  stepId: string,
  call: 'model' | 'tool',
  policy: StepPolicy,
  input: unknown,
  once: () => Promise<T>,
  reasonOf: (e: unknown) => string | null,
): Promise<{ value: T; data: JsonObject }> {
  const retry = policy.retry;
  if (retry === undefined) {
    try {
      return { value: await once(), data: {} };
    } catch (e) {
      const usage = consumedUsage(e);
      if (usage !== null && !(e instanceof Stop) && !isLostOutcome(e))
        await ctx.append('attempt', stepId, input, null, { call, attempt: 1, outcome: 'failed', reason: reasonOf(e) ?? 'error', usage });
      throw e;
    }
  }
  const prior = ctx.ports.attempts !== undefined ? await ctx.ports.attempts(stepId) : { count: 0, retry_at: null };
  const wait = (at: number, attempt: number) =>
    new Stop('waiting', 'retry_backoff', { step_id: stepId, attempt, retry_at: at }, { step_id: stepId, for: 'timer', wake_at: at });
  if (prior.retry_at !== null && ctx.ports.clock.now() < prior.retry_at) throw wait(prior.retry_at, prior.count);
  for (let n = prior.count + 1; ; n++) {
    try {
      const value = await once();
      await ctx.append('attempt', stepId, input, null, { call, attempt: n, outcome: 'ok' });
      return { value, data: { attempts: n } };
    } catch (e) {
      if (e instanceof Stop) throw e; // a refusal or a wait decided before the call: not an attempt
      if (isLostOutcome(e)) throw e; // the call may have acted: its intent stays open for the crash rule (effects.ts)
      const reason = reasonOf(e);
      const again = reason !== null && (retry.on as readonly string[]).includes(reason) && n < retry.max_attempts;
      const consumed = consumedUsage(e);
      const usage = consumed !== null ? { usage: consumed } : {};
      if (!again) {
        await ctx.append('attempt', stepId, input, null, { call, attempt: n, outcome: 'failed', reason: reason ?? 'error', ...usage });
        throw e;
      }
      const backoff = backoffAfter(retry, n);
      const at = ctx.ports.clock.now() + backoff;
      await ctx.append('attempt', stepId, input, null, { call, attempt: n, outcome: 'failed', reason, retry_at: at, ...usage });
      if (backoff > 0) throw wait(at, n);
    }
  }
}

/** What a failed attempt consumed (and was charged: ../budget.ts) in tokens, or null when nothing. */
function consumedUsage(e: unknown): number | null {
  const c = consumedBy(e);
  return c !== null && c.input_tokens + c.output_tokens > 0 ? c.input_tokens + c.output_tokens : null;
}
