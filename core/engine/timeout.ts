/**
 * StepTimeout: how a port (model, tools) says a call ran past the step's
 * `timeout_ms` and was cancelled. The engine fails the step `step_timeout`
 * (never retried). Recognized by its name, not by instanceof, so it works
 * across bundles.
 */
export class StepTimeout extends Error {
  readonly timeout_ms: number;
  constructor(timeoutMs: number) {
    super(`the call ran past the step's timeout of ${timeoutMs} ms and was cancelled`);
    this.name = 'StepTimeout';
    this.timeout_ms = timeoutMs;
  }
}

/** True for a StepTimeout (by name). */
export function isStepTimeout(e: unknown): e is StepTimeout {
  return typeof e === 'object' && e !== null && (e as { name?: unknown }).name === 'StepTimeout';
}
