/**
 * What a started cell process offers whoever started it (test/helpers/cell-process.ts, bench/_util.ts):
 * its stop and kill, and the bootstrap admin key it wrote. No import of the cell: a bench's parent process
 * stays light.
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * A started cell process's stop (SIGTERM) and kill (a signal, SIGKILL by default), each resolving once it
 * has exited. Call it right after the spawn, so that an exit that comes first is seen.
 */
export function cellSignals(proc: ChildProcess): { stop(): Promise<void>; kill(signal?: NodeJS.Signals): Promise<void> } {
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const signal = async (s: NodeJS.Signals) => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill(s);
    await exited;
  };
  return { stop: () => signal('SIGTERM'), kill: (s = 'SIGKILL') => signal(s) };
}

/** The bootstrap admin key the cell wrote in `dataDir` when this start created the owner; '' otherwise. */
export function bootstrapKeyOf(dataDir: string): string {
  const keyFile = join(dataDir, 'bootstrap-admin.key');
  return existsSync(keyFile) ? readFileSync(keyFile, 'utf8').trim() : '';
}
