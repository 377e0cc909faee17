/**
 * The edge program's start as its end-to-end tests and air-gapped clients
 * wait for it: everything it prints is kept, and the URL of its first
 * `listening on <url>` line is the answer. It exiting first, or printing no
 * such line within `timeoutMs` (then it is killed), is an error that carries
 * what it printed. serveEdge starts `edge serve` so; stopEdge ends it.
 */
import { spawn, type ChildProcess } from 'node:child_process';

export async function edgeListening(proc: ChildProcess, timeoutMs: number): Promise<{ url: string; out: () => string }> {
  let text = '';
  proc.stderr!.on('data', (d: Buffer) => {
    text += d.toString();
  });
  const url = await new Promise<string>((res, rej) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      rej(new Error(`edge did not start: ${text}`));
    }, timeoutMs);
    proc.stdout!.on('data', (d: Buffer) => {
      text += d.toString();
      const m = /listening on (https?:\/\/[^\s"]+)/.exec(text);
      if (m) {
        clearTimeout(timer);
        res(m[1]!);
      }
    });
    proc.once('exit', (c) => {
      clearTimeout(timer);
      rej(new Error(`edge exited ${c}: ${text}`));
    });
  });
  return { url, out: () => text };
}

/** `edge serve --data … --bundle …` then `args`, once it listens (`env`: the process's, unless given). */
export async function serveEdge(
  cfg: { edge: string; data: string; keyBundle: string },
  args: string[],
  env?: NodeJS.ProcessEnv,
): Promise<{ url: string; proc: ChildProcess }> {
  const proc = spawn(cfg.edge, ['serve', '--data', cfg.data, '--bundle', cfg.keyBundle, ...args], {
    ...(env !== undefined ? { env } : {}),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const { url } = await edgeListening(proc, 30_000);
  return { url, proc };
}

/** Stops the edge with `signal` (SIGTERM) and waits for it to exit; one that has ended already is left. */
export async function stopEdge(p: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return;
  const done = new Promise((r) => p.once('exit', r));
  p.kill(signal);
  await done;
}
