/**
 * The host side of the sandbox: a small pool of worker threads (worker.ts)
 * that run compute and SQL tasks, with the time cap and cancel enforced from
 * here.
 *
 * - compute: the QuickJS interrupt handler stops the code at its deadline or
 *   when the cancel flag (a SharedArrayBuffer the host sets) is raised; if the
 *   worker still does not answer within a grace period, it is terminated.
 * - sql: sql.js has no progress handler, so the worker is terminated at the
 *   deadline or on cancel. The workspace database file is only ever replaced
 *   atomically after a commit, so a terminated task leaves it as it was.
 *
 * At most MAX_WORKERS tasks run at once (others wait for a slot; a cancel
 * while waiting returns at once). A worker that crashed or was terminated is
 * discarded; at most MAX_IDLE warm workers are kept. Under tsx the worker runs worker.ts; in the esbuild
 * bundle it runs dist/cell.mjs (which ignores `help` output) with the sandbox
 * role in workerData.
 */
import { Worker } from 'node:worker_threads';
import type { ComputeOutcome, ComputeTask } from './compute.ts';
import type { SqlOutcome, SqlTask } from './sql.ts';
import { SANDBOX_ROLE, type SandboxReply } from './worker.ts';

const MAX_IDLE = 2;
/** Sandboxed tasks running at once; more wait for a slot (the time cap starts when a task starts). */
const MAX_WORKERS = 4;
/** Extra time a compute task gets to stop on its own (interrupt handler) before its worker is terminated, ms. */
const COMPUTE_GRACE_MS = 1_500;

type Failure = { ok: false; reason: 'time_limit' | 'cancelled' | 'sandbox_crashed'; message: string; logs: string[]; duration_ms: number };

const DEV = import.meta.url.endsWith('.ts');

/**
 * What the worker runs: in the bundle, the bundle itself; under tsx (tests,
 * development), a bootstrap that registers tsx in the worker thread and then
 * imports worker.ts.
 */
function workerSource(): { src: URL | string; eval: boolean } {
  if (!DEV) return { src: new URL(import.meta.url), eval: false };
  const entry = new URL('./worker.ts', import.meta.url).href;
  return { src: `import('tsx/esm/api').then((m) => { m.register(); return import(${JSON.stringify(entry)}); })`, eval: true };
}

export class SandboxPool {
  readonly #idle: Worker[] = [];
  readonly #busy = new Set<Worker>();
  readonly #waiters: (() => void)[] = [];
  #slots = 0;
  #nextId = 1;
  #closed = false;

  #spawn(): Promise<Worker> {
    return new Promise((resolve, reject) => {
      const { src, eval: isEval } = workerSource();
      const w = new Worker(src, {
        eval: isEval,
        workerData: { role: SANDBOX_ROLE },
        argv: ['help'],
        execArgv: [],
        stdout: true,
        resourceLimits: { maxOldGenerationSizeMb: 512, stackSizeMb: 8 },
      });
      w.stdout.resume();
      const onMsg = (m: { ready?: boolean }) => {
        if (m?.ready) {
          cleanup();
          resolve(w);
        }
      };
      const onErr = (e: Error) => {
        cleanup();
        reject(e);
      };
      const onExit = (code: number) => {
        cleanup();
        reject(new Error(`sandbox worker exited (${code}) before it was ready`));
      };
      const cleanup = () => {
        w.off('message', onMsg);
        w.off('error', onErr);
        w.off('exit', onExit);
      };
      w.on('message', onMsg);
      w.on('error', onErr);
      w.on('exit', onExit);
    });
  }

  /** A slot among MAX_WORKERS, then a warm or new worker; null when `signal` aborts while waiting. */
  async #take(signal?: AbortSignal): Promise<Worker | null> {
    if (this.#slots >= MAX_WORKERS) {
      const got = await new Promise<boolean>((resolve) => {
        const waiter = () => {
          signal?.removeEventListener('abort', onAbort);
          resolve(true);
        };
        const onAbort = () => {
          const i = this.#waiters.indexOf(waiter);
          if (i >= 0) this.#waiters.splice(i, 1);
          resolve(false);
        };
        this.#waiters.push(waiter);
        signal?.addEventListener('abort', onAbort, { once: true });
      });
      if (!got) return null;
    } else {
      this.#slots++;
    }
    if (this.#closed) {
      this.#release();
      return null;
    }
    try {
      const w = this.#idle.pop() ?? (await this.#spawn());
      w.ref();
      this.#busy.add(w);
      return w;
    } catch (err) {
      this.#release();
      throw err;
    }
  }

  /** Frees a slot: hands it to the next waiter, if any. */
  #release(): void {
    const next = this.#waiters.shift();
    if (next) next();
    else this.#slots--;
  }

  #give(w: Worker, recycle: boolean): void {
    this.#busy.delete(w);
    if (recycle || this.#closed || this.#idle.length >= MAX_IDLE) void w.terminate();
    else {
      w.unref();
      this.#idle.push(w);
    }
    this.#release();
  }

  #kill(w: Worker): void {
    this.#busy.delete(w);
    void w.terminate();
    this.#release();
  }

  /** Runs JavaScript in QuickJS with its caps; `signal` cancels it. */
  async compute(task: ComputeTask, signal?: AbortSignal): Promise<ComputeOutcome | Failure> {
    const cancel = new SharedArrayBuffer(4);
    const flag = new Int32Array(cancel);
    return this.#run(
      { kind: 'compute', task, cancel },
      task.timeLimitMs + COMPUTE_GRACE_MS,
      signal,
      () => Atomics.store(flag, 0, 1),
      COMPUTE_GRACE_MS,
    ) as Promise<ComputeOutcome | Failure>;
  }

  /** Runs SQL statements as one transaction; the worker is terminated at `timeLimitMs` or on cancel. */
  async sql(task: SqlTask, timeLimitMs: number, signal?: AbortSignal): Promise<SqlOutcome | Failure> {
    return this.#run({ kind: 'sql', task }, timeLimitMs, signal, null, 0) as Promise<SqlOutcome | Failure>;
  }

  async #run(
    req: { kind: 'compute'; task: ComputeTask; cancel: SharedArrayBuffer } | { kind: 'sql'; task: SqlTask },
    hardMs: number,
    signal: AbortSignal | undefined,
    softCancel: (() => void) | null,
    cancelGraceMs: number,
  ): Promise<unknown> {
    if (this.#closed)
      return { ok: false, reason: 'sandbox_crashed', message: 'the cell is stopping', logs: [], duration_ms: 0 } satisfies Failure;
    if (signal?.aborted)
      return { ok: false, reason: 'cancelled', message: 'the run was cancelled', logs: [], duration_ms: 0 } satisfies Failure;
    const w = await this.#take(signal);
    if (w === null) return { ok: false, reason: 'cancelled', message: 'the run was cancelled', logs: [], duration_ms: 0 } satisfies Failure;
    if (signal?.aborted) {
      // Cancelled while a worker was being started.
      this.#give(w, false);
      return { ok: false, reason: 'cancelled', message: 'the run was cancelled', logs: [], duration_ms: 0 } satisfies Failure;
    }
    const id = this.#nextId++;
    const started = Date.now();
    return new Promise((resolve) => {
      let settled = false;
      const timers: ReturnType<typeof setTimeout>[] = [];
      const finish = (v: unknown, after: 'give' | 'recycle' | 'kill') => {
        if (settled) return;
        settled = true;
        for (const t of timers) clearTimeout(t);
        w.off('message', onMsg);
        w.off('error', onErr);
        w.off('exit', onExit);
        signal?.removeEventListener('abort', onAbort);
        if (after === 'kill') this.#kill(w);
        else this.#give(w, after === 'recycle');
        resolve(v);
      };
      const fail = (reason: Failure['reason'], message: string): Failure => ({
        ok: false,
        reason,
        message,
        logs: [],
        duration_ms: Date.now() - started,
      });
      const onMsg = (m: SandboxReply) => {
        if (m?.id === id) finish(m.result, m.recycle ? 'recycle' : 'give');
      };
      const onErr = () => finish(fail('sandbox_crashed', 'the sandbox failed while running the task'), 'kill');
      const onExit = () => finish(fail('sandbox_crashed', 'the sandbox stopped while running the task'), 'kill');
      const onAbort = () => {
        if (softCancel) {
          softCancel();
          timers.push(setTimeout(() => finish(fail('cancelled', 'the run was cancelled while the task ran'), 'kill'), cancelGraceMs));
        } else {
          finish(fail('cancelled', 'the run was cancelled while the task ran'), 'kill');
        }
      };
      w.on('message', onMsg);
      w.on('error', onErr);
      w.on('exit', onExit);
      signal?.addEventListener('abort', onAbort, { once: true });
      timers.push(
        setTimeout(
          () =>
            finish(
              fail(
                'time_limit',
                `the task ran longer than its time cap of ${req.kind === 'sql' ? hardMs : hardMs - COMPUTE_GRACE_MS} ms and was stopped`,
              ),
              'kill',
            ),
          hardMs,
        ),
      );
      w.postMessage({ id, ...req });
    });
  }

  /** Terminates every worker. */
  async close(): Promise<void> {
    this.#closed = true;
    const all = [...this.#idle, ...this.#busy];
    this.#idle.length = 0;
    this.#busy.clear();
    await Promise.all(all.map((w) => w.terminate()));
  }
}
