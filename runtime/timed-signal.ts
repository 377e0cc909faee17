/**
 * A signal that aborts after `ms` or with a parent signal, whichever comes
 * first, and lets go of both once the work it bounds has ended. Not
 * `AbortSignal.any([parent, AbortSignal.timeout(ms)])`: that one's timer stays
 * armed for the whole `ms` after the work ended (minutes, for a model call), and
 * the joined signal stays registered on the parent (a run's driver signal) for
 * as long as the parent lives, so a long run at hundreds of calls a second keeps
 * tens of thousands of both alive for the GC to trace. Used by every call a run
 * makes with a time bound: a model call's HTTP attempt (cell/ai/openai-client.ts)
 * and a step's deadline (step-deadline.ts), in the cell and on the edge.
 */

export interface TimedSignal {
  /** Aborts after `ms` (a `TimeoutError` DOMException, as AbortSignal.timeout's) or with the parent's reason. */
  readonly signal: AbortSignal;
  /** True once the time ran out and the parent had not aborted (the parent's abort is not a timeout). */
  timedOut(): boolean;
  /** Clears the timer and the listener on the parent; the signal keeps the state it has. Idempotent. */
  release(): void;
}

/** The signal of work bounded by `ms` and by `parent` (none: the time alone). */
export function timedSignal(ms: number, parent?: AbortSignal): TimedSignal {
  const c = new AbortController();
  if (parent?.aborted) {
    c.abort(parent.reason);
    return { signal: c.signal, timedOut: () => false, release: () => undefined };
  }
  let fired = false;
  const timer = setTimeout(() => {
    fired = true;
    c.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError'));
  }, ms);
  timer.unref?.();
  const onAbort = () => c.abort(parent!.reason);
  parent?.addEventListener('abort', onAbort, { once: true });
  return {
    signal: c.signal,
    timedOut: () => fired && parent?.aborted !== true,
    release: () => {
      clearTimeout(timer);
      parent?.removeEventListener('abort', onAbort);
    },
  };
}
