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
import type { Cell } from '../context.ts';
import { RunClosedError, appendJournal, finishRun } from './journal.ts';
import { getRun, isTerminal, type Run } from './runs.ts';

interface Driving { controller: AbortController; done: Promise<void>; resolve: () => void; cancelledBy: string | null }

const driving = new WeakMap<Cell, Map<string, Driving>>();
function mapOf(cell: Cell): Map<string, Driving> {
  let m = driving.get(cell);
  if (!m) { m = new Map(); driving.set(cell, m); }
  return m;
}

/** How long a cancel waits for the driver to stop before finishing the run itself, ms. */
export const CANCEL_WAIT_MS = 10_000;

export interface DriverHandle {
  signal: AbortSignal;
  /** Principal that asked to cancel, once asked. */
  cancelledBy(): string | null;
  /** Call when the driver stops (always; in a finally). */
  release(): void;
}

/** Registers this process as the driver of `runId`. */
export function registerDriver(cell: Cell, runId: string): DriverHandle {
  const m = mapOf(cell);
  const existing = m.get(runId);
  if (existing) throw new TypeError(`run ${runId} is already driven by this process`);
  let resolve!: () => void;
  const done = new Promise<void>((r) => { resolve = r; });
  const d: Driving = { controller: new AbortController(), done, resolve, cancelledBy: null };
  m.set(runId, d);
  return {
    signal: d.controller.signal,
    cancelledBy: () => d.cancelledBy,
    release: () => { if (m.get(runId) === d) m.delete(runId); d.resolve(); },
  };
}

/** The abort signal of the driver of `runId` in this process (sandboxes watch it), if any. */
export function driverSignal(cell: Cell, runId: string): AbortSignal | undefined {
  return mapOf(cell).get(runId)?.controller.signal;
}

/** True when this process drives `runId` now. */
export function isDriven(cell: Cell, runId: string): boolean {
  return mapOf(cell).has(runId);
}

/** Aborts every run this process drives (shutdown); the runs stay non-terminal for recovery. */
export function abortAllDrivers(cell: Cell): Promise<void[]> {
  const m = mapOf(cell);
  const waits: Promise<void>[] = [];
  for (const d of m.values()) { d.controller.abort(new Error('cell stopping')); waits.push(d.done); }
  return Promise.all(waits);
}

/**
 * Cancels a run, idempotently. Returns the run after the cancel (or undefined
 * when this cell does not know it). A terminal run is returned unchanged.
 */
export async function requestCancel(cell: Cell, runId: string, actor: string): Promise<Run | undefined> {
  const run = getRun(cell, runId);
  if (!run) return undefined;
  if (isTerminal(run.state)) return run;
  const d = mapOf(cell).get(runId);
  const first = d ? d.cancelledBy === null : true;
  if (first) {
    try {
      await appendJournal(cell, runId, { step_id: 'run', kind: 'cancel_requested', data: { by: actor } });
    } catch (err) {
      if (!(err instanceof RunClosedError)) throw err;
      return getRun(cell, runId);
    }
  }
  if (d) {
    d.cancelledBy ??= actor;
    d.controller.abort(new Error('cancelled'));
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([d.done, new Promise<void>((r) => { timer = setTimeout(r, CANCEL_WAIT_MS); })]);
    if (timer) clearTimeout(timer);
  }
  await finishRun(cell, runId, 'cancelled', {
    error: { code: 'cancelled', message: 'the run was cancelled', reason: 'cancelled' },
    data: { by: actor },
  });
  return getRun(cell, runId);
}
