/**
 * Shared by the in-process group tests: two cells (cell-a, cell-b) on one
 * PostgreSQL store with one manual clock and short heartbeats, and a poll
 * helper. Cell A owns the test database: close B first (`close` does).
 */
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';

export const GROUP = { posture: 'multi-cell' as const, heartbeatMs: 100, leaseMs: 1000 };

/** Polls `fn` until it returns something truthy; fails after `ms`. */
export async function until<T>(what: string, fn: () => Promise<T | undefined | null | false> | T, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Cells A and B of one group; `close` stops B, then A (which drops the database). */
export async function twoCells(): Promise<{ a: InProcess; b: InProcess; close(): Promise<void> }> {
  const a = await inProcessCell({ config: { cellId: 'cell-a', ...GROUP } });
  try {
    const b = await inProcessCell({
      clock: a.clock,
      config: { cellId: 'cell-b', storeUrl: a.core.config.storeUrl!, dataDir: a.dir, ...GROUP },
    });
    return {
      a,
      b,
      async close() {
        await b.close();
        await a.close();
      },
    };
  } catch (e) {
    await a.close();
    throw e;
  }
}
