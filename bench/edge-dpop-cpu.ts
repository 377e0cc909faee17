/**
 * CPU per request of the edge on a DPoP-bound GET and on a bearer GET (issue
 * 40), for comparing builds on a machine shared with other load: one edge
 * process per build given (default dist/edge.mjs; e.g. a copy of main's build
 * beside this branch's), then ROUNDS rounds, each a bearer load of SECONDS
 * and a DPoP load of PROOFS fresh proofs on every edge, the order of the
 * edges flipped each round. Prints, per edge, its µs of CPU (user + system,
 * /proc) a request of each kind and the ratio bearer ÷ DPoP (the CPU a
 * DPoP-bound request costs against a bearer one), the medians of the rounds.
 *
 *   node --import tsx bench/edge-dpop-cpu.ts [edge.mjs …]   (BENCH_SECONDS, BENCH_ROUNDS, BENCH_PROOFS)
 *
 * Not a `*.bench.ts`: a tool for comparing builds, not one of make bench's figures.
 */
import { loadavg } from 'node:os';
import { resolve } from 'node:path';
import { startTokenEdge, type TokenEdge } from './edge-tokens.ts';

const SECONDS = Number(process.env['BENCH_SECONDS'] ?? 2);
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 5);
const PROOFS = Number(process.env['BENCH_PROOFS'] ?? 6000);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const builds = process.argv.slice(2).length > 0 ? process.argv.slice(2) : [resolve(import.meta.dirname, '../dist/edge.mjs')];
const edges: { build: string; edge: TokenEdge; bearer: number[]; dpop: number[]; bearerRps: number[]; dpopRps: number[] }[] = [];
try {
  console.log(`load average ${loadavg()[0]!.toFixed(1)}; ${ROUNDS} rounds of ${SECONDS} s bearer + ${PROOFS} DPoP requests per edge`);
  for (const build of builds)
    edges.push({ build, edge: await startTokenEdge(process.execPath, [build]), bearer: [], dpop: [], bearerRps: [], dpopRps: [] });
  for (const e of edges) {
    await e.edge.bearerLoad(1); // warm-up
    await e.edge.dpopLoad(await e.edge.proofs(1000));
  }
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? edges : [...edges].reverse();
    for (const e of order) {
      const b = await e.edge.bearerLoad(SECONDS);
      const d = await e.edge.dpopLoad(await e.edge.proofs(PROOFS));
      if (b.non2xx || d.non2xx) throw new Error(`${e.build}: non-2xx answers (bearer ${b.non2xx}, DPoP ${d.non2xx})`);
      e.bearer.push(b.cpuUs);
      e.dpop.push(d.cpuUs);
      e.bearerRps.push(b.rps);
      e.dpopRps.push(d.rps);
    }
    console.log(
      `round ${r + 1} (load ${loadavg()[0]!.toFixed(1)}): ` +
        edges.map((e) => `${e.build}: bearer ${e.bearer.at(-1)!.toFixed(0)} µs, DPoP ${e.dpop.at(-1)!.toFixed(0)} µs`).join('; '),
    );
  }
  for (const e of edges) {
    const b = median(e.bearer);
    const d = median(e.dpop);
    console.log(
      `${e.build}: CPU a request, medians of ${ROUNDS} rounds: bearer ${b.toFixed(0)} µs, DPoP ${d.toFixed(0)} µs -> bearer ÷ DPoP ${(b / d).toFixed(2)}; ` +
        `throughput ${median(e.bearerRps).toFixed(0)} vs ${median(e.dpopRps).toFixed(0)} req/s -> ${(median(e.dpopRps) / median(e.bearerRps)).toFixed(2)}`,
    );
  }
} finally {
  for (const e of edges) await e.edge.stop();
}
