/**
 * A step's deadline (its policy's `timeout_ms`, core/engine/policy.ts) joined
 * with the signal of whatever else may stop the call (the run's driver: a
 * cancel, a lost lease), for the ports that make the call: the cell's model
 * and tools ports, the edge's local model port. The call gets `signal` and
 * stops its work when it aborts (an HTTP request is aborted, a statement
 * cancelled, a sandbox interrupted, a local generation broken off); `race`
 * ends the step at the deadline with StepTimeout even when a call cannot be
 * interrupted at once, so the run never waits past its `timeout_ms`.
 */
import { StepTimeout } from '../core/engine/timeout.ts';
import { timedSignal } from './timed-signal.ts';

export interface StepDeadline {
  /** Aborts at the deadline or with the other signal; undefined when there is neither. */
  readonly signal: AbortSignal | undefined;
  /** True once the deadline (not the other signal) stopped the call. */
  timedOut(): boolean;
  /**
   * Settles as `call`, except: at the deadline it rejects with StepTimeout at once, and a
   * failure of `call` after the deadline is the StepTimeout (the call failed because it was stopped).
   * Releases the deadline once settled.
   */
  race<T>(call: Promise<T>): Promise<T>;
  /**
   * Lets go of the deadline's timer and its listener on the other signal (runtime/timed-signal.ts): once the
   * call has ended, by a caller that does not `race` it, or that may end before it does. Idempotent.
   */
  release(): void;
}

/** The deadline of a call of a step with `timeoutMs` (none when undefined), joined with `other`. */
export function stepDeadline(timeoutMs: number | undefined, other?: AbortSignal): StepDeadline {
  if (timeoutMs === undefined) return { signal: other, timedOut: () => false, race: (call) => call, release: () => undefined };
  const ms = timeoutMs;
  const bound = timedSignal(ms, other);
  const { signal, timedOut } = bound;
  return {
    signal,
    timedOut,
    release: bound.release,
    race<T>(call: Promise<T>): Promise<T> {
      let onAbort: (() => void) | undefined;
      const late = new Promise<never>((_, reject) => {
        onAbort = () => {
          if (timedOut()) reject(new StepTimeout(ms));
        };
        if (signal.aborted) onAbort();
        else signal.addEventListener('abort', onAbort, { once: true });
      });
      const settled = call.catch((e: unknown) => {
        throw timedOut() ? new StepTimeout(ms) : e;
      });
      return Promise.race([settled, late]).finally(() => {
        if (onAbort) signal.removeEventListener('abort', onAbort);
        bound.release();
      });
    },
  };
}
