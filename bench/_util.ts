/** Shared helpers for benchmarks: load generation with autocannon, child servers. */
import autocannon from 'autocannon';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { request } from 'undici';
import type { CellProcess } from '../test/helpers/cell-process.ts';
import { bootstrapKeyOf, cellSignals } from '../test/helpers/cell-signals.ts';
import type { FakeOpenAI } from '../test/fixtures/openai-server.ts';
import { provider, team, type Api } from '../test/helpers/teams.ts';

export interface LoadResult {
  rps: number;
  /** Requests answered in all. */
  requests: number;
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
  return { rps: r.requests.average, requests: r.requests.total, p99: r.latency.p99, non2xx: r.non2xx, errors: r.errors };
}

/** A server's `listening <port>` line (also `listening on http://host:<port>`). */
const LISTENING = /listening (?:on )?(?:http:\/\/[^:]+:)?(\d+)/;

/**
 * The port of the first line of `proc`'s stdout that `match` finds, `listening <port>`; after it the output (a
 * cell's access log) is drained unread: kept, it would grow with every request. Rejects after `timeoutMs`.
 */
export function listeningPort(proc: ChildProcess, timeoutMs = 20_000, match = LISTENING): Promise<string> {
  let out = '';
  return new Promise<string>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('server did not start')), timeoutMs);
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = match.exec(out);
      if (m) {
        clearTimeout(t);
        proc.stdout!.off('data', onData);
        proc.stdout!.resume();
        resolve(m[1]!);
      }
    };
    proc.stdout!.on('data', onData);
  });
}

/** Spawns a node script that prints `listening <port>` and returns its URL. */
export async function spawnServer(
  args: string[],
  match = LISTENING,
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ url: string; proc: ChildProcess; stop(): Promise<void> }> {
  const proc = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'], env });
  const port = await listeningPort(proc, 20_000, match);
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
/** The `p`th percentile of `xs` (nearest rank; NaN for none). */
export const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN;
};

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

/**
 * CPU seconds of a PostgreSQL server whose data directory is `dataDir`: the
 * postmaster and its children (backends, WAL writer, checkpointer; children
 * that ended count in the postmaster's own figure).
 */
export function pgServerCpuSeconds(dataDir: string): number {
  const master = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const withChildren = (pid: number): number => {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / 100; // + cutime, cstime
  };
  let sum = withChildren(master);
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (Number(readFileSync(`/proc/${d}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]) === master) sum += withChildren(Number(d));
    } catch {
      // ended meanwhile
    }
  }
  return sum;
}

/** The cell the benchmarks run: dist/cell.mjs, or $BENCH_CELL (another build, e.g. main's, for a before/after in one session). */
export const BENCH_CELL = process.env['BENCH_CELL'] ?? resolve(import.meta.dirname, '../dist/cell.mjs');

/** A cell process started by startBenchCell: a test helper's CellProcess, with its stdout drained. */
export interface BenchCell extends CellProcess {
  /** Lines (access-log lines, with `accessLog`) read from its stdout since it listened. */
  lines(): number;
}

/**
 * Starts the cell every benchmark measures: `BENCH_CELL serve --port 0`, its
 * gateway's rate limit out of the way (a benchmark measures the work of a
 * request, not its refusal), `--log-level warn` unless `accessLog` (then
 * the default `info`: one access-log line per request); in a group (`group`:
 * a PostgreSQL store shared with other cells) with the flags a member needs.
 * stdout is a pipe read and thrown away as fast as it comes (counted: lines()),
 * as a log shipper would. `output()` is what it printed on stdout until it
 * listened and everything on stderr (warnings and errors: few).
 */
export async function startBenchCell(
  opts: {
    dataDir?: string;
    accessLog?: boolean;
    group?: { store: string; cellId: string; secretsKeyFile: string };
    /** More flags (e.g. `--store URL` for a cell of its own on PostgreSQL). */
    args?: string[];
    /** The build to start (default BENCH_CELL). */
    cell?: string;
    timeoutMs?: number;
  } = {},
): Promise<BenchCell> {
  const cell = opts.cell ?? BENCH_CELL;
  if (!existsSync(cell)) throw new Error(`${cell} is missing: run 'node scripts/build.mjs' (make bench does)`);
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'bench-cell-'));
  const g = opts.group;
  const args = [
    cell,
    'serve',
    '--port',
    '0',
    '--data',
    dataDir,
    '--rate-capacity',
    '100000000',
    '--rate-refill',
    '100000000',
    ...(opts.accessLog ? [] : ['--log-level', 'warn']),
    ...(g ? ['--store', g.store, '--cell-id', g.cellId, '--posture', 'multi-cell', '--secrets-key-file', g.secretsKeyFile] : []),
    ...(opts.args ?? []),
  ];
  const proc = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const signals = cellSignals(proc);
  let out = '';
  // stdout alone, until the cell listens (then dropped, as the rest is).
  let stdout = '';
  let lines = 0;
  proc.stderr!.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const url = await new Promise<string>((resolveUrl, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`cell did not start in time:\n${out}`));
    }, opts.timeoutMs ?? 30_000);
    const onExit = (code: number | null) => {
      clearTimeout(timer);
      reject(new Error(`cell exited with ${code} before listening:\n${out}`));
    };
    proc.once('exit', onExit);
    const starting = (d: Buffer) => {
      out += d.toString();
      stdout += d.toString();
      const m = /listening on (https?:\/\/[^\s"]+)/.exec(out);
      if (!m) return;
      clearTimeout(timer);
      proc.off('exit', onExit);
      proc.stdout!.off('data', starting);
      // From now on the output is counted and dropped: kept, it would grow with every request.
      proc.stdout!.on('data', (b: Buffer) => {
        for (let i = b.indexOf(10); i >= 0; i = b.indexOf(10, i + 1)) lines++;
      });
      resolveUrl(m[1]!);
    };
    proc.stdout!.on('data', starting);
  });
  return {
    url,
    adminKey: bootstrapKeyOf(dataDir),
    dataDir,
    proc,
    output: () => out,
    stdout: () => stdout,
    lines: () => lines,
    ...signals,
    cleanup: () => rmSync(dataDir, { recursive: true, force: true }),
  };
}

/**
 * Waits for a run to end the way a client of the cell would: on the run's
 * event stream (`GET /admin/jobs/runs/{id}/events/sse`, which the server
 * closes after `run_finished`), not by polling its state. Resolves with the
 * run's outcome (`completed`, `failed`, `refused`, `cancelled`) and, when it
 * did not complete, its error's reason.
 */
export async function runEnded(base: string, token: string, runId: string): Promise<{ outcome: string; reason: string | null }> {
  for (;;) {
    const r = await request(`${base}/api/public/v1/admin/jobs/runs/${runId}/events/sse`, {
      headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' },
    });
    if (r.statusCode === 204) {
      await r.body.dump();
      break; // finished before the stream opened: its state says how
    }
    if (r.statusCode !== 200) throw new Error(`events of ${runId}: ${r.statusCode} ${await r.body.text()}`);
    let buf = '';
    for await (const chunk of r.body) {
      buf += chunk.toString('utf8');
      const at = buf.indexOf('event: run_finished\n');
      if (at < 0) continue;
      const end = buf.indexOf('\n\n', at);
      if (end < 0) continue;
      const data = /\ndata: (.*)/.exec(buf.slice(at, end))?.[1];
      r.body.destroy();
      const rec = data ? (JSON.parse(data) as { data?: { outcome?: string; error?: { reason?: string } } }) : {};
      return { outcome: rec.data?.outcome ?? 'unknown', reason: rec.data?.error?.reason ?? null };
    }
    // The stream closed without run_finished (a cell stopping): open it again.
  }
  const s = await request(`${base}/api/public/v1/admin/jobs/runs/${runId}`, { headers: { authorization: `Bearer ${token}` } });
  const run = (await s.body.json()) as { state: string; error?: { reason?: string } | null };
  return { outcome: run.state, reason: run.error?.reason ?? null };
}

/** A JSON answer of the cell: its status, its body parsed, and its text. */
export interface CellAnswer {
  status: number;
  body: any;
  text: string;
}

/** A call of the cell's HTTP API with `token` (a JSON body when given), answered parsed. */
export async function callCell(base: string, token: string, method: string, path: string, body?: unknown): Promise<CellAnswer> {
  const r = await request(base + path, {
    method: method as 'GET',
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await r.body.text();
  return { status: r.statusCode, body: text ? JSON.parse(text) : undefined, text };
}

/**
 * The run benches' crew (profile-run, run-phases): the fake model server registered as the provider, and a
 * formation of `seats` sequential seats, one agent each, instantiated; `call` talks to the cell with `token`.
 */
export async function sequentialCrew(
  ai: FakeOpenAI,
  token: string,
  call: (method: string, path: string, body?: unknown) => Promise<CellAnswer>,
  seats = 20,
): Promise<string> {
  const api: Api = { token, request: (m, p, o = {}) => call(m, p, o.body) };
  await provider(api, ai);
  const tm = await team(
    api,
    'sequential',
    Array.from({ length: seats }, (_, i) => ({ role: `s${i}` })),
  );
  return tm.crew;
}
