/**
 * What the access log costs the gateway (issue 28), both sides measured in
 * one process: two processes of one build differ by up to ~10 % in CPU a
 * request on this kind of machine, and its throughput swings by ~10 % from
 * one second to the next, so bench/access-log.bench.ts (two processes, 5 s
 * rounds) needs dozens of fresh pairs to resolve a few percent.
 *
 * The cell is the bench build (`node scripts/build.mjs --bench-log-toggle`,
 * made here when missing), in which SIGUSR2 switches info lines (the access
 * log) off and on. Under one steady load (autocannon, 50 connections, the
 * authenticated GET of the tool registry), the log is switched every
 * BENCH_PHASE_MS (default 100); each phase's throughput, counted from
 * autocannon's responses after BENCH_GUARD_MS of settling (default 10), and
 * its requests per CPU second of the cell (/proc), are set against the mean of
 * the two phases around it (which takes out a drift slower than a phase).
 * The figure is the mean of those ratios for the phases with the log on, with
 * its standard error, over BENCH_PROCESSES fresh processes (default 4) of
 * BENCH_SECONDS each (default 40), and the mean of the processes' figures
 * with its standard error: processes of one build still differ by ~1 point,
 * more than the phases' error says, so that second error is the one to quote.
 *
 *   node --import tsx bench/access-log-toggle.ts
 *   BENCH_AA=1 …           no switching: both sides at info (what the method itself puts in)
 *   BENCH_BUILDS=a.mjs,b.mjs …   processes of the given builds (each a bench build), taking turns
 *
 * Not a `*.bench.ts`: a tool, beside bench/access-log-cpu.ts.
 */
import autocannon from 'autocannon';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { cpuSeconds, fmt, load, startBenchCell } from './_util.ts';

const PROCESSES = Number(process.env['BENCH_PROCESSES'] ?? 4);
const SECONDS = Number(process.env['BENCH_SECONDS'] ?? 40);
const PHASE_MS = Number(process.env['BENCH_PHASE_MS'] ?? 100);
const GUARD_MS = Number(process.env['BENCH_GUARD_MS'] ?? 10);
const AA = process.env['BENCH_AA'] !== undefined;
const TOGGLE_BUILD = join(import.meta.dirname, '../dist/bench/cell-log-toggle.mjs');
const builds = process.env['BENCH_BUILDS']?.split(',') ?? [TOGGLE_BUILD];

const mean = (xs: number[]) => xs.reduce((s, v) => s + v, 0) / xs.length;
const stderr = (xs: number[]) => {
  const m = mean(xs);
  return Math.sqrt(xs.reduce((s, v) => s + (v - m) ** 2, 0) / (xs.length - 1) / xs.length);
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const cost = (xs: number[]) => `${fmt((1 - mean(xs)) * 100, 2)} % ± ${fmt(stderr(xs) * 100, 2)}`;

interface Phase {
  on: boolean;
  /** Requests a second. */
  rate: number;
  /** Requests a CPU second of the cell (NaN when it used none in the phase). */
  perCpu: number;
}

/** One process of `build` under load for SECONDS, its log switched every phase: the on-phases' ratios to their neighbours. */
async function oneCell(build: string): Promise<{ rates: number[]; perCpu: number[] }> {
  const cell = await startBenchCell({ accessLog: true, cell: build });
  try {
    const url = `${cell.url}/api/public/v1/admin/ai/tool-registry`;
    const headers = { authorization: `Bearer ${cell.adminKey}` };
    const pid = cell.proc.pid!;
    const toggle = () => {
      if (!AA) cell.proc.kill('SIGUSR2');
    };
    // Warm-up, both ways (an even number of switches: the log is on again).
    for (let i = 0; i < 4; i++) {
      await load({ url, connections: 50, seconds: 1, headers });
      toggle();
    }
    let answered = 0;
    // autocannon's promise is also an emitter of each response (its types name only the promise).
    const run = autocannon({ url, connections: 50, duration: SECONDS, headers }) as unknown as Promise<unknown> & {
      on(event: 'response', f: () => void): void;
    };
    run.on('response', () => answered++);
    await sleep(2000);
    const phases: Phase[] = [];
    let on = true;
    const end = performance.now() + (SECONDS - 3) * 1000;
    while (performance.now() < end) {
      toggle();
      on = !on;
      await sleep(GUARD_MS);
      const n0 = answered;
      const t0 = performance.now();
      const k0 = cpuSeconds(pid);
      await sleep(PHASE_MS - GUARD_MS);
      const n = answered - n0;
      const k = cpuSeconds(pid) - k0;
      phases.push({ on, rate: (n / (performance.now() - t0)) * 1000, perCpu: k > 0 ? n / k : Number.NaN });
    }
    await run;
    const rates: number[] = [];
    const perCpu: number[] = [];
    for (let i = 1; i + 1 < phases.length; i++) {
      const [before, p, after] = [phases[i - 1]!, phases[i]!, phases[i + 1]!];
      if (!p.on) continue;
      rates.push(p.rate / ((before.rate + after.rate) / 2));
      const t = p.perCpu / ((before.perCpu + after.perCpu) / 2);
      if (Number.isFinite(t)) perCpu.push(t);
    }
    return { rates, perCpu };
  } finally {
    await cell.stop();
    cell.cleanup();
  }
}

export default async function main(): Promise<void> {
  if (builds.includes(TOGGLE_BUILD) && !existsSync(TOGGLE_BUILD))
    execFileSync(process.execPath, [join(import.meta.dirname, '../scripts/build.mjs'), '--bench-log-toggle'], { stdio: 'inherit' });
  console.log(
    `  ${AA ? 'A/A (no switching)' : 'A/B'}: ${PROCESSES} processes of ${SECONDS} s, phases of ${PHASE_MS} ms; load average ${loadavg()
      .map((x) => fmt(x, 1))
      .join(' ')}`,
  );
  const by = new Map<string, { rates: number[]; perCpu: number[]; processes: number[] }>();
  for (let k = 0; k < PROCESSES; k++) {
    const build = builds[k % builds.length]!;
    const r = await oneCell(build);
    const all = by.get(build) ?? { rates: [], perCpu: [], processes: [] };
    all.rates.push(...r.rates);
    all.perCpu.push(...r.perCpu);
    all.processes.push(mean(r.rates));
    by.set(build, all);
    console.log(
      `  process ${k + 1} (${build}): throughput cost ${cost(r.rates)} (${r.rates.length} phases on); per CPU second ${cost(r.perCpu)}; load ${fmt(loadavg()[0]!, 1)}`,
    );
  }
  // Two processes of one build differ by more than a process's phases do: the error of the processes' mean is the one to quote.
  for (const [build, r] of by)
    console.log(
      `  ${build}: the access log's cost: throughput **${cost(r.rates)}** (${r.rates.length} phases on; ` +
        `the processes' mean ${r.processes.length > 1 ? cost(r.processes) : '-'}), requests a CPU second ${cost(r.perCpu)}`,
    );
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
