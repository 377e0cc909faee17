// The real edge program (`node dist/edge.mjs serve`) over an edgeWorld's files, for the end-to-end tests that
// stop and start a device: its crew, signed tiny model and a key bundle, on a free port, with the test clock
// at `offsetMs`. Needs `node scripts/build.mjs` (dist/edge.mjs) and edge-runtime/.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { findRuntime } from '../../runtime/local-model.ts';
import type { edgeWorld } from './_edge-fixtures.ts';
import { edgeListening } from './_listening.ts';

export const EDGE = resolve(import.meta.dirname, '../../dist/edge.mjs');

/** Why the program cannot run here (the skip message), or false. */
export function edgeProgramMissing(): string | false {
  if (!existsSync(EDGE)) return 'dist/edge.mjs missing: run node scripts/build.mjs';
  try {
    findRuntime();
  } catch {
    return 'edge-runtime/ is not installed (npm install --prefix edge-runtime --omit=optional)';
  }
  return false;
}

/** Starts `edge serve` over the world (its key bundle unless `keysPath`), the clock `offsetMs` from now. */
export async function serveWorld(
  w: Awaited<ReturnType<typeof edgeWorld>>,
  o: { offsetMs: number; keysPath?: string; env?: Record<string, string> },
): Promise<{ url: string; proc: ChildProcess; out: () => string }> {
  const proc = spawn(
    process.execPath,
    [
      EDGE,
      'serve',
      '--data',
      w.dir,
      '--bundle',
      o.keysPath ?? w.keysPath,
      '--crew-bundle',
      w.crewPath,
      '--model',
      w.modelPath,
      '--model-manifest',
      w.manifestPath,
      '--port',
      '0',
      `--now-offset-ms=${o.offsetMs}`,
    ],
    { env: { ...process.env, AGENT_CELL_EDGE_TEST_CLOCK: '1', ...o.env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const { url, out } = await edgeListening(proc, 60_000);
  return { url, proc, out };
}

/** Stops the program with `signal` and waits for it to exit (at once when it already has). */
export async function stopEdge(p: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return;
  const done = new Promise((r) => p.once('exit', r));
  p.kill(signal);
  await done;
}

/** Reads a run (`read`) until `pred` holds, bounded generously (the machine may be busy); fails with the last read. */
export async function untilRun(read: () => Promise<any>, pred: (r: any) => boolean): Promise<any> {
  let last: any;
  for (let i = 0; i < 1500; i++) {
    last = await read();
    if (pred(last)) return last;
    await new Promise((r) => setTimeout(r, 40));
  }
  throw new Error(`the run never reached the expected state: ${JSON.stringify(last)}`);
}
