/**
 * What the access log costs the gateway (issue 28, target <= 5 % of
 * throughput): two cells of the same build started together, one with the
 * default `--log-level info` (one JSON access-log line per request on
 * stdout), one with `--log-level warn` (none), both answering the
 * authenticated static GET `/admin/ai/tool-registry` to autocannon's 50
 * connections. stdout is a pipe this process drains (bench/_util.ts
 * startBenchCell), counting the lines, so the lines are really written and
 * read.
 *
 * Built for a shared, loaded machine, whose other work moves throughput by
 * tens of percent from one second to the next: the two cells take turns in
 * pairs of rounds (on then off, then off then on, ...), each pair gives one
 * ratio, and the figure is the **median of the pairs' ratios** (a burst of
 * other load spoils a pair, not the figure), with its quartiles and the
 * load average through the run. The same is given per CPU second of each
 * cell process (/proc): the work per request, which throughput alone does
 * not show when the other load decides how much CPU each cell gets. A fresh
 * pair of cells serves every BENCH_PAIRS_A_CELL pairs (default 2): two
 * processes of the same build, same flags, differ by up to ~10 % in CPU a
 * request (bench/RESULTS.md, issue 28, stop 25), which one pair of processes
 * for the whole run put into the figure. Which of the two starts first
 * alternates from pair to pair (the first-started one served measurably less).
 *
 * Where the info cell's stdout goes did not change its CPU a request beyond
 * that noise (this process draining the pipe, a separate `cat` draining a
 * FIFO, /dev/null: stop 25); the cost is the cell's. bench/access-log-cpu.ts
 * compares builds and outputs by CPU a request, and takes CPU profiles.
 *
 *   node --import tsx bench/run.ts access-log
 *
 * BENCH_ROUNDS pairs (default 10) of BENCH_SECONDS-second rounds (default
 * 5); BENCH_CELL names another build (e.g. main's, for a before/after);
 * BENCH_AA=1 starts both cells at warn (an A/A run: what the bench itself
 * puts between two equal cells).
 */
import { cpus, loadavg } from 'node:os';
import { BENCH_CELL, type BenchCell, cpuSeconds, fmt, load, startBenchCell } from './_util.ts';

const CONNECTIONS = 50;
const SECONDS = Number(process.env['BENCH_SECONDS'] ?? 5);
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 10);
/** Pairs of rounds a pair of cell processes serves before a fresh pair starts. */
const PAIRS_A_CELL = Number(process.env['BENCH_PAIRS_A_CELL'] ?? 2);

interface Side {
  cell: BenchCell;
  url: string;
  headers: Record<string, string>;
  requests: number;
  cpu: number;
  p99: number;
  non2xx: number;
}

/** One round of load on `s`: its throughput and requests per CPU second of the cell. */
async function round(s: Side): Promise<{ rps: number; perCpu: number }> {
  const c0 = cpuSeconds(s.cell.proc.pid!);
  const r = await load({ url: s.url, connections: CONNECTIONS, seconds: SECONDS, headers: s.headers });
  const cpu = cpuSeconds(s.cell.proc.pid!) - c0;
  s.cpu += cpu;
  s.requests += r.requests;
  s.p99 = Math.max(s.p99, r.p99);
  s.non2xx += r.non2xx;
  return { rps: r.requests / SECONDS, perCpu: r.requests / cpu };
}

/** The median and quartiles of `xs`. */
function quartiles(xs: number[]): [number, number, number] {
  const s = [...xs].sort((a, b) => a - b);
  const at = (q: number) => {
    const i = (s.length - 1) * q;
    const lo = Math.floor(i);
    return s[lo]! + (s[Math.ceil(i)]! - s[lo]!) * (i - lo);
  };
  return [at(0.25), at(0.5), at(0.75)];
}

const load1 = () => loadavg()[0] ?? 0;

/**
 * Waits (up to 3 s) until at least `n` lines were read from the cell's stdout and no more come: the
 * last ones reach the pipe just after the load stops, with those of the requests autocannon leaves in
 * flight when a round ends (answered, not counted by it).
 */
async function linesRead(s: Side, n: number): Promise<void> {
  let last = -1;
  for (let t = 0; t < 30 && (s.cell.lines() < n || s.cell.lines() !== last); t++) {
    last = s.cell.lines();
    await new Promise((r) => setTimeout(r, 100));
  }
}

export default async function main(): Promise<void> {
  console.log(
    `  (${BENCH_CELL}; ${cpus().length} cores; load average at start ${loadavg()
      .map((x) => fmt(x, 1))
      .join(' ')})`,
  );
  const side = async (accessLog: boolean): Promise<Side> => {
    const cell = await startBenchCell({ accessLog: accessLog && process.env['BENCH_AA'] === undefined });
    return {
      cell,
      url: `${cell.url}/api/public/v1/admin/ai/tool-registry`,
      headers: { authorization: `Bearer ${cell.adminKey}` },
      requests: 0,
      cpu: 0,
      p99: 0,
      non2xx: 0,
    };
  };
  const totals = { on: { requests: 0, cpu: 0, p99: 0, non2xx: 0 }, off: { requests: 0, cpu: 0, p99: 0, non2xx: 0 } };
  let expected = 0;
  let written = 0;
  let cells: { on: Side; off: Side; linesBefore: number } | undefined;
  /** Stops the pair of cells: their figures into the totals, the lines the info cell wrote counted. */
  const retire = async () => {
    if (!cells) return;
    const { on, off, linesBefore } = cells;
    cells = undefined;
    await linesRead(on, linesBefore + on.requests);
    expected += on.requests;
    written += on.cell.lines() - linesBefore;
    for (const [s, t] of [
      [on, totals.on],
      [off, totals.off],
    ] as const) {
      t.requests += s.requests;
      t.cpu += s.cpu;
      t.p99 = Math.max(t.p99, s.p99);
      t.non2xx += s.non2xx;
      await s.cell.stop();
      s.cell.cleanup();
    }
  };
  try {
    const ratios: number[] = [];
    const cpuRatios: number[] = [];
    const loads: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      if (i % PAIRS_A_CELL === 0) {
        // A fresh pair of processes: two starts of the same build differ by up to ~10 % in CPU a request.
        await retire();
        // Which cell starts first alternates from pair to pair: an A/A run (both at warn) put 4.5 % between
        // the first-started and the second (stop 25), a bias that a fixed order gave to the access log.
        const firstOn = (i / PAIRS_A_CELL) % 2 === 0;
        let on: Side;
        let off: Side;
        if (firstOn) {
          on = await side(true);
          off = await side(false);
        } else {
          off = await side(false);
          on = await side(true);
        }
        let warm = 0;
        for (const s of [on, off, on, off]) {
          const r = await load({ url: s.url, connections: CONNECTIONS, seconds: 2, headers: s.headers });
          if (s === on) warm += r.requests;
        }
        await linesRead(on, warm);
        cells = { on, off, linesBefore: on.cell.lines() };
      }
      const { on, off } = cells!;
      loads.push(load1());
      const a = i % 2 === 0 ? await round(on) : undefined;
      const b = await round(off);
      const c = a ?? (await round(on));
      ratios.push(c.rps / b.rps);
      cpuRatios.push(c.perCpu / b.perCpu);
    }
    loads.push(load1());
    await retire();
    const [q1, median, q3] = quartiles(ratios);
    const [c1, cpuMedian, c3] = quartiles(cpuRatios);
    const secs = ROUNDS * SECONDS;
    const pct = (r: number) => `${fmt((1 - r) * 100, 1)} %`;
    const { on, off } = totals;
    console.log(
      `  GET tool registry, ${CONNECTIONS} connections, ${ROUNDS} pairs of ${SECONDS} s rounds (on/off, off/on, ...; a fresh pair of cells every ${PAIRS_A_CELL} pairs): ` +
        `access log on (info) ${fmt(on.requests / secs)} req/s (worst p99 ${on.p99} ms, non-2xx ${on.non2xx}) vs off (warn) ${fmt(off.requests / secs)} req/s (worst p99 ${off.p99} ms, non-2xx ${off.non2xx})`,
    );
    console.log(
      `  throughput on/off, median of the pairs: ${fmt(median, 3)} -> **cost ${pct(median)}** (target <= 5 %); ` +
        `quartiles ${fmt(q1, 3)}-${fmt(q3, 3)}; pairs ${ratios.map((r) => fmt(r, 2)).join(' ')}`,
    );
    console.log(
      `  requests per CPU second of the cell, on/off, median of the pairs: ${fmt(cpuMedian, 3)} -> cost ${pct(cpuMedian)}; ` +
        `quartiles ${fmt(c1, 3)}-${fmt(c3, 3)}; pairs ${cpuRatios.map((r) => fmt(r, 2)).join(' ')}; in all ${fmt(on.requests / on.cpu)} vs ${fmt(off.requests / off.cpu)} requests per CPU second`,
    );
    console.log(
      `  access-log lines read from the info cells' stdout: ${fmt(written)} for ${fmt(expected)} requests answered ` +
        `(and up to ${CONNECTIONS} a round left in flight by autocannon); ` +
        `load average (1 min) through the pairs ${fmt(Math.min(...loads), 1)}-${fmt(Math.max(...loads), 1)}, at end ${loadavg()
          .map((x) => fmt(x, 1))
          .join(' ')}`,
    );
  } finally {
    await retire();
  }
}
