/**
 * The sandbox worker thread: runs compute (QuickJS) and SQL (sql.js) tasks
 * off the main thread so that a runaway task never blocks the cell, and so the
 * host can stop it: a cancel flag the QuickJS interrupt handler reads, and as a
 * last resort `worker.terminate()` (SQL has no progress handler).
 *
 * This file does something only in a worker started by pool.ts (workerData
 * `{ role: 'cell-jobs-sandbox' }`). In the esbuild bundle the worker runs
 * dist/cell.mjs itself; importing this module from the main thread is inert.
 */
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import type { ComputeTask } from './compute.ts';
import type { SqlTask } from './sql.ts';

export const SANDBOX_ROLE = 'cell-jobs-sandbox';

export type SandboxRequest =
  | { id: number; kind: 'compute'; task: ComputeTask; cancel: SharedArrayBuffer }
  | { id: number; kind: 'sql'; task: SqlTask };

export interface SandboxReply {
  id: number;
  result: unknown;
  recycle: boolean;
}

if (!isMainThread && (workerData as { role?: string } | null)?.role === SANDBOX_ROLE && parentPort) {
  const port = parentPort;
  port.on('message', (msg: SandboxRequest) => {
    void (async () => {
      try {
        if (msg.kind === 'compute') {
          const { runCompute } = await import('./compute.ts');
          const r = await runCompute(msg.task, new Int32Array(msg.cancel));
          port.postMessage({ id: msg.id, result: r, recycle: !r.ok && r.crashed === true } satisfies SandboxReply);
        } else {
          const { runSql } = await import('./sql.ts');
          port.postMessage({ id: msg.id, result: await runSql(msg.task), recycle: false } satisfies SandboxReply);
        }
      } catch (err) {
        port.postMessage({
          id: msg.id,
          result: {
            ok: false,
            reason: 'sandbox_crashed',
            message: err instanceof Error ? err.message.slice(0, 500) : 'sandbox failure',
            logs: [],
            duration_ms: 0,
          },
          recycle: true,
        } satisfies SandboxReply);
      }
    })();
  });
  // Load both WebAssembly modules before taking work, so time caps measure the task only.
  void Promise.all([import('./compute.ts').then((m) => m.loadQuickJs()), import('../../store/sqljs.ts').then((m) => m.loadSqlJs())]).then(
    () => port.postMessage({ ready: true }),
    () => port.postMessage({ ready: true }),
  );
}
