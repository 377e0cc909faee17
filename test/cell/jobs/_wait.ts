/** Waits (bounded) until a run's journal holds its run_finished record, using the cell's event bus. */
import type { Cell } from '../../../cell/context.ts';
import { subscribe } from '../../../cell/runs/events.ts';

export function waitFinished(cell: Cell, runId: string, timeoutMs = 30_000): Promise<void> {
  return new Promise((resolve, reject) => {
    let unsub: () => void = () => {};
    const timer = setTimeout(() => { unsub(); reject(new Error(`run ${runId} did not finish in ${timeoutMs} ms`)); }, timeoutMs);
    let done = false;
    unsub = subscribe(cell, runId, 0, (r) => {
      if (r.kind === 'run_finished' && !done) { done = true; clearTimeout(timer); queueMicrotask(() => unsub()); resolve(); }
    });
    if (done) unsub();
  });
}
