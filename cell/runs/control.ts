/**
 * Run control: which runs this process is driving right now, and the
 * idempotent cancel shared by crew and job runs.
 *
 * A driver (driveRun, or a job runner) registers the run it drives and gets an
 * AbortSignal; executors and sandboxes watch it (QuickJS interrupt, SQL worker
 * termination). `requestCancel` records `cancel_requested` in the journal,
 * aborts the driver, waits (bounded) for it to stop, and makes sure the run
 * ends `cancelled` with a `run_finished` record. Cancelling a finished or
 * already-cancelled run changes nothing and answers the same.
 */
import type { Driving, RunsContext } from './context.ts';
import { RunClosedError, appendJournal, finishRun } from './journal.ts';
import { closedOrCancelled } from './repository.ts';
import { getRun, isTerminal, type Run } from './runs.ts';

/** How long a cancel waits for the driver to stop before finishing the run itself, ms. */
export const CANCEL_WAIT_MS = 10_000;

export interface DriverHandle {
  signal: AbortSignal;
  /** Principal that asked to cancel, once asked. */
  cancelledBy(): string | null;
  /** Call when the driver stops (always; in a finally). True when a wake was asked for meanwhile (requestWake). */
  release(): boolean;
}

/** Registers this process as the driver of `runId`. */
export function registerDriver(ctx: RunsContext, runId: string): DriverHandle {
  const m = ctx.drivers;
  if (m.has(runId)) throw new TypeError(`run ${runId} is already driven by this process`);
  let resolve!: () => void;
  const done = new Promise<void>((r) => {
    resolve = r;
  });
  const d: Driving = { controller: new AbortController(), done, resolve, cancelledBy: null, wake: false };
  m.set(runId, d);
  return {
    signal: d.controller.signal,
    cancelledBy: () => d.cancelledBy,
    release: () => {
      if (m.get(runId) === d) m.delete(runId);
      // A drive that stopped mid-call (a lost lease, a store outage) leaves no answer in flight here.
      ctx.live.delete(runId);
      d.resolve();
      return d.wake;
    },
  };
}

/** The abort signal of the driver of `runId` in this process (sandboxes watch it), if any. */
export function driverSignal(ctx: RunsContext, runId: string): AbortSignal | undefined {
  return ctx.drivers.get(runId)?.controller.signal;
}

/**
 * Asks this process's drive of `runId`, if there is one now, to look again
 * before it leaves the run waiting (it may have read the run's decisions before
 * a new one was recorded). True when there was one.
 */
export function requestWake(ctx: RunsContext, runId: string): boolean {
  const d = ctx.drivers.get(runId);
  if (!d) return false;
  d.wake = true;
  return true;
}

/** True when this process drives `runId` now. */
export function isDriven(ctx: RunsContext, runId: string): boolean {
  return ctx.drivers.has(runId);
}

/** Aborts every run this process drives (shutdown); the runs stay non-terminal for recovery. */
export async function abortAllDrivers(ctx: RunsContext): Promise<void> {
  const waits: Promise<void>[] = [];
  for (const d of ctx.drivers.values()) {
    d.controller.abort(new Error('cell stopping'));
    waits.push(d.done);
  }
  await Promise.all(waits);
}

/**
 * Another cell of the group recorded a cancel of a run this process drives (or
 * ended it): the drive is aborted now, with the in-flight model call or
 * sandbox, rather than at its next write (which the lease check would refuse
 * anyway). Called when another cell's journal appends are heard.
 */
export async function abortCancelledElsewhere(ctx: RunsContext): Promise<void> {
  const driven = [...ctx.drivers.keys()];
  for (const r of await closedOrCancelled(ctx.core.store, driven)) {
    const d = ctx.drivers.get(r.run_id);
    if (!d || d.controller.signal.aborted) continue;
    if (r.by === null) {
      // Finished by another cell (a driver that took it over): not a cancel; the drive's next write finds the journal closed.
      ctx.core.log.info('run ended on another cell; this cell stops driving it', { run_id: r.run_id });
      d.controller.abort(new Error('ended elsewhere'));
      continue;
    }
    d.cancelledBy ??= r.by;
    ctx.core.log.info('run cancelled on another cell; this cell stops driving it', { run_id: r.run_id, by: d.cancelledBy });
    d.controller.abort(new Error('cancelled'));
  }
}

/**
 * Cancels a run, idempotently. Returns the run after the cancel (or undefined
 * when this cell does not know it). A terminal run is returned unchanged.
 */
export async function requestCancel(ctx: RunsContext, runId: string, actor: string): Promise<Run | undefined> {
  const run = await getRun(ctx, runId);
  if (!run) return undefined;
  if (isTerminal(run.state)) return run;
  const d = ctx.drivers.get(runId);
  const first = d ? d.cancelledBy === null : true;
  if (first) {
    try {
      await appendJournal(ctx, runId, { step_id: 'run', kind: 'cancel_requested', data: { by: actor } });
    } catch (err) {
      if (!(err instanceof RunClosedError)) throw err;
      return getRun(ctx, runId);
    }
  }
  if (d) {
    d.cancelledBy ??= actor;
    d.controller.abort(new Error('cancelled'));
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      d.done,
      new Promise<void>((r) => {
        timer = setTimeout(r, CANCEL_WAIT_MS);
      }),
    ]);
    if (timer) clearTimeout(timer);
  }
  await finishRun(ctx, runId, 'cancelled', {
    error: { code: 'cancelled', message: 'the run was cancelled', reason: 'cancelled' },
    data: { by: actor },
  });
  return getRun(ctx, runId);
}
