/**
 * The edge program's start as its end-to-end tests and air-gapped clients
 * wait for it: everything it prints is kept, and the URL of its first
 * `listening on <url>` line is the answer. It exiting first, or printing no
 * such line within `timeoutMs` (then it is killed), is an error that carries
 * what it printed.
 */
import type { ChildProcess } from 'node:child_process';

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
