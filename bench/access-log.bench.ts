/**
 * What the access log costs the gateway (issue 28, target <= 5 % of
 * throughput): two cells of the same build, one with the default
 * `--log-level info` (one JSON access-log line per request on stdout), one
 * with `--log-level warn` (none), both answering the authenticated static GET
 * `/admin/ai/tool-registry` to autocannon's 50 connections, in alternating
 * rounds (the order flips each round: the machine's other load moves by the
 * second). stdout is a pipe this process drains, counting the lines, so the
 * lines are really written and read.
 *
 * Each figure is also given per CPU second of each cell process (/proc): on a
 * busy machine that compares the work per request, which throughput alone
 * does not. `BENCH_CELL` names another build (e.g. main's, for a before/after).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { cpuSeconds, fmt, load, spawnServer } from './_util.ts';

const CELL = process.env['BENCH_CELL'] ?? resolve(import.meta.dirname, '../dist/cell.mjs');
const CONNECTIONS = 50;
const SECONDS = Number(process.env['BENCH_SECONDS'] ?? 3);
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 6);

interface Side {
  name: string;
  url: string;
  pid: number;
  headers: Record<string, string>;
  requests: number;
  cpu: number;
  p99: number;
  non2xx: number;
  lines: () => number;
}

async function startCell(root: string, name: string, args: string[]) {
  const dataDir = join(root, name);
  const cell = await spawnServer([
    CELL,
    'serve',
    '--port',
    '0',
    '--data',
    dataDir,
    '--rate-capacity',
    '100000000',
    '--rate-refill',
    '100000000',
    ...args,
  ]);
  let lines = 0;
  // The drain spawnServer set up, now counting: every access-log line is a newline on this pipe.
  cell.proc.stdout!.on('data', (d: Buffer) => {
    for (let i = d.indexOf(10); i >= 0; i = d.indexOf(10, i + 1)) lines++;
  });
  const key = readFileSync(join(dataDir, 'bootstrap-admin.key'), 'utf8').trim();
  const side: Side = {
    name,
    url: `${cell.url}/api/public/v1/admin/ai/tool-registry`,
    pid: cell.proc.pid!,
    headers: { authorization: `Bearer ${key}` },
    requests: 0,
    cpu: 0,
    p99: 0,
    non2xx: 0,
    lines: () => lines,
  };
  return { cell, side };
}

async function round(s: Side): Promise<number> {
  const c0 = cpuSeconds(s.pid);
  const r = await load({ url: s.url, connections: CONNECTIONS, seconds: SECONDS, headers: s.headers });
  s.cpu += cpuSeconds(s.pid) - c0;
  s.requests += r.rps * SECONDS;
  s.p99 = Math.max(s.p99, r.p99);
  s.non2xx += r.non2xx;
  return r.rps;
}

export default async function main(): Promise<void> {
  console.log(`  (${CELL}; load average at start: ${fmt(loadavg()[0] ?? 0, 1)} on ${cpus().length} cores)`);
  const root = mkdtempSync(join(tmpdir(), 'bench-access-log-'));
  const on = await startCell(root, 'info', []);
  const off = await startCell(root, 'warn', ['--log-level', 'warn']);
  try {
    for (const s of [on.side, off.side]) await load({ url: s.url, connections: 10, seconds: 1, headers: s.headers }); // warm-up
    const linesBefore = on.side.lines();
    const ratios: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const order = i % 2 === 0 ? [on.side, off.side] : [off.side, on.side];
      const rps: Record<string, number> = {};
      for (const s of order) rps[s.name] = await round(s);
      ratios.push(rps['info']! / rps['warn']!);
    }
    // The last lines reach the pipe after the load stops.
    await new Promise((r) => setTimeout(r, 500));
    const written = on.side.lines() - linesBefore;
    const secs = ROUNDS * SECONDS;
    const perCpu = (s: Side) => s.requests / s.cpu;
    const ratio = on.side.requests / off.side.requests;
    const cpuRatio = perCpu(on.side) / perCpu(off.side);
    const sorted = [...ratios].sort((a, b) => a - b);
    console.log(
      `  GET tool registry, ${CONNECTIONS} connections, ${ROUNDS} alternating rounds of ${SECONDS} s: ` +
        `access log on (info) ${fmt(on.side.requests / secs)} req/s (worst p99 ${on.side.p99} ms, non-2xx ${on.side.non2xx}) vs off (warn) ${fmt(off.side.requests / secs)} req/s ` +
        `-> ratio ${fmt(ratio, 3)}, cost ${fmt((1 - ratio) * 100, 1)} % (per round ${sorted.map((r) => fmt(r, 2)).join(', ')}); ` +
        `per CPU second: ${fmt(perCpu(on.side))} vs ${fmt(perCpu(off.side))} requests -> ratio ${fmt(cpuRatio, 3)}, cost ${fmt((1 - cpuRatio) * 100, 1)} % ` +
        '(target <= 5 %)',
    );
    console.log(
      `  access-log lines read from the info cell's stdout during the rounds: ${fmt(written)} (requests answered: ${fmt(on.side.requests)}); load average at end ${fmt(loadavg()[0] ?? 0, 1)}`,
    );
  } finally {
    await on.cell.stop();
    await off.cell.stop();
    rmSync(root, { recursive: true, force: true });
  }
}
