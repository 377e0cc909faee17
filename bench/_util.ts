/** Shared helpers for benchmarks: load generation with autocannon, child servers. */
import autocannon from 'autocannon';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';

export interface LoadResult {
  rps: number;
  p99: number;
  non2xx: number;
  errors: number;
}

export async function load(opts: {
  url: string;
  connections: number;
  seconds: number;
  method?: string;
  headers?: Record<string, string>;
  body?: string;
}): Promise<LoadResult> {
  const r = await autocannon({
    url: opts.url,
    connections: opts.connections,
    duration: opts.seconds,
    method: (opts.method ?? 'GET') as 'GET',
    headers: opts.headers ?? {},
    ...(opts.body !== undefined ? { body: opts.body } : {}),
  });
  return { rps: r.requests.average, p99: r.latency.p99, non2xx: r.non2xx, errors: r.errors };
}

/** Spawns a node script that prints `listening <port>` and returns its URL. */
export async function spawnServer(
  args: string[],
  match = /listening (?:on )?(?:http:\/\/[^:]+:)?(\d+)/,
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ url: string; proc: ChildProcess; stop(): Promise<void> }> {
  const proc = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'], env });
  let out = '';
  const port = await new Promise<string>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('server did not start')), 20_000);
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = match.exec(out);
      if (m) {
        clearTimeout(t);
        // From now on the output (a cell's access log) is drained unread: kept, it would grow with every request.
        proc.stdout!.off('data', onData);
        proc.stdout!.resume();
        resolve(m[1]!);
      }
    };
    proc.stdout!.on('data', onData);
  });
  return {
    url: `http://127.0.0.1:${port}`,
    proc,
    stop: () =>
      new Promise<void>((r) => {
        proc.once('exit', () => r());
        proc.kill('SIGTERM');
      }),
  };
}

export const fmt = (n: number, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });

/** pgbench's simple-update transaction (`-N`) rate on the database at `url`: the server's own baseline for durable writes. */
export async function pgbenchTps(url: string, clients: number, seconds: number): Promise<number> {
  const run = promisify(execFile);
  const u = new URL(url);
  const args = ['-h', u.hostname, '-p', u.port, '-U', decodeURIComponent(u.username), u.pathname.slice(1)];
  await run('pgbench', ['-i', '-s', '1', '-q', ...args]);
  const { stdout } = await run('pgbench', ['-N', '-n', '-c', String(clients), '-j', '2', '-T', String(seconds), ...args]);
  const m = /tps = ([\d.]+) \(without initial connection time\)/.exec(stdout);
  if (!m) throw new Error(`pgbench printed no tps: ${stdout}`);
  return Number(m[1]);
}

/** CPU seconds (user + system) a process has used so far, from /proc (Linux). */
export function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ = 100)
}
