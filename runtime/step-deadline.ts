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

export interface StepDeadline {
  /** Aborts at the deadline or with the other signal; undefined when there is neither. */
  readonly signal: AbortSignal | undefined;
  /** True once the deadline (not the other signal) stopped the call. */
  timedOut(): boolean;
  /**
   * Settles as `call`, except: at the deadline it rejects with StepTimeout at once, and a
   * failure of `call` after the deadline is the StepTimeout (the call failed because it was stopped).
   */
  race<T>(call: Promise<T>): Promise<T>;
}

/** The deadline of a call of a step with `timeoutMs` (none when undefined), joined with `other`. */
export function stepDeadline(timeoutMs: number | undefined, other?: AbortSignal): StepDeadline {
  const deadline = timeoutMs !== undefined ? AbortSignal.timeout(timeoutMs) : undefined;
  const signal = deadline && other ? AbortSignal.any([other, deadline]) : (deadline ?? other);
  const timedOut = () => deadline?.aborted === true && other?.aborted !== true;
  return {
    signal,
    timedOut,
    race<T>(call: Promise<T>): Promise<T> {
      if (deadline === undefined) return call;
      const ms = timeoutMs!;
      let onAbort: (() => void) | undefined;
      const late = new Promise<never>((_, reject) => {
        onAbort = () => {
          if (timedOut()) reject(new StepTimeout(ms));
        };
        if (deadline.aborted) onAbort();
        else deadline.addEventListener('abort', onAbort, { once: true });
      });
      const settled = call.catch((e: unknown) => {
        throw timedOut() ? new StepTimeout(ms) : e;
      });
      return Promise.race([settled, late]).finally(() => {
        if (onAbort) deadline.removeEventListener('abort', onAbort);
      });
    },
  };
}
