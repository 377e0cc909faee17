/** An in-process cell for the benchmarks that drive one from inside (jobs, sse, teams). */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CellConfig } from '../cell/config.ts';
import { startCell, type RunningCell } from '../cell/server.ts';

export const quiet = { info() {}, warn() {}, error() {} };

/**
 * Starts the cell `cellId` on a fresh temp directory with `config` beside it, its log quiet and its
 * bootstrap owner key kept off stdout (a bench prints only its figures). `listen: false`: no socket.
 */
export async function bootInProcessCell(
  cellId: string,
  config: Partial<CellConfig>,
  opts: { listen?: boolean } = {},
): Promise<{ c: RunningCell; key: string; dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), `${cellId}-`));
  const origWrite = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: unknown, ...r: unknown[]) =>
    typeof chunk === 'string' && /bootstrap|svck_live_/.test(chunk)
      ? true
      : origWrite(chunk as string, ...(r as []))) as typeof process.stdout.write;
  try {
    const c = await startCell({ config: { dataDir: dir, cellId, ...config }, log: quiet, ...opts });
    if (!c.bootstrapSecret) throw new Error('the cell did not bootstrap an owner key');
    return { c, key: c.bootstrapSecret, dir };
  } finally {
    process.stdout.write = origWrite;
  }
}
