/**
 * Where the edge's CPU goes on a DPoP-bound GET against a bearer GET (issue
 * 40), not part of `make bench`: one edge process (`node dist/edge.mjs`, the
 * bundle the single executable carries) profiled by the inspector's CPU
 * profiler (a preload, started and stopped by SIGUSR2 around each load, so
 * start-up stays out), a bearer load of SECONDS, then one DPoP-bound request
 * per fresh proof (PROOFS of them). Writes bearer.cpuprofile and
 * dpop.cpuprofile to PROFILE_DIR (default /tmp/perf-edge) and prints, for
 * each, the edge's CPU µs a request and the functions with the most self
 * time, in µs a request (samples × interval ÷ requests).
 *
 *   node scripts/build.mjs && node --import tsx bench/profile-edge.ts   (PROFILE_DIR, SECONDS, PROOFS, TOP)
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { startTokenEdge } from './edge-tokens.ts';

const dir = process.env['PROFILE_DIR'] ?? '/tmp/perf-edge';
const SECONDS = Number(process.env['SECONDS'] ?? 4);
const PROOFS = Number(process.env['PROOFS'] ?? 12_000);
const TOP = Number(process.env['TOP'] ?? 25);
const INTERVAL_US = 100;
mkdirSync(dir, { recursive: true });
for (const f of ['bearer.cpuprofile', 'dpop.cpuprofile']) rmSync(join(dir, f), { force: true });
// SIGUSR2 starts the profiler, the next one stops it and writes the profile (bearer, then dpop); SIGUSR1 is the inspector's.
writeFileSync(
  join(dir, 'prof.mjs'),
  `import { Session } from 'node:inspector';
import { writeFileSync } from 'node:fs';
const s = new Session();
s.connect();
s.post('Profiler.enable');
s.post('Profiler.setSamplingInterval', { interval: ${INTERVAL_US} });
const names = ['bearer', 'dpop'];
let on = false;
process.on('SIGUSR2', () => {
  if (!on) { on = true; s.post('Profiler.start'); return; }
  on = false;
  const name = names.shift() ?? 'more';
  s.post('Profiler.stop', (err, r) => {
    if (!err) writeFileSync(${JSON.stringify(dir)} + '/' + name + '.cpuprofile', JSON.stringify(r.profile));
    process.stdout.write('profile written ' + name + '\\n');
  });
});
`,
);

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

/** Self time per function (µs a request), the largest first. */
function summarise(file: string, requests: number): string[] {
  const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  let total = 0;
  for (let i = 0; i < p.samples.length; i++) {
    const n = byId.get(p.samples[i]!)!;
    const dt = p.timeDeltas[i] ?? 0;
    const f = n.callFrame;
    const key = `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*\//, '')}:${f.lineNumber + 1}`;
    self.set(key, (self.get(key) ?? 0) + dt);
    if (f.functionName !== '(idle)') total += dt;
  }
  const rows = [...self].sort((a, b) => b[1] - a[1]).slice(0, TOP);
  return [
    `profiled (not idle) ${(total / requests).toFixed(1)} µs a request`,
    ...rows.map(([k, us]) => `${(us / requests).toFixed(1).padStart(7)} µs  ${k}`),
  ];
}

const mjs = resolve(import.meta.dirname, '../dist/edge.mjs');
if (!existsSync(mjs)) throw new Error(`${mjs} is missing: run node scripts/build.mjs`);
const edge = await startTokenEdge(process.execPath, [mjs], { env: { ...process.env, NODE_OPTIONS: `--import=${join(dir, 'prof.mjs')}` } });
const written = (name: string) =>
  new Promise<void>((res) => {
    let out = '';
    const on = (d: Buffer) => {
      out += d.toString();
      if (out.includes(`profile written ${name}`)) {
        edge.proc.stdout!.off('data', on);
        res();
      }
    };
    edge.proc.stdout!.on('data', on);
  });
try {
  console.log(`load average ${loadavg()[0]!.toFixed(1)}`);
  await edge.bearerLoad(1); // warm-up
  await edge.dpopLoad(await edge.proofs(2000));
  edge.proc.kill('SIGUSR2');
  const b = await edge.bearerLoad(SECONDS);
  let w = written('bearer');
  edge.proc.kill('SIGUSR2');
  await w;
  const proofs = await edge.proofs(PROOFS);
  edge.proc.kill('SIGUSR2');
  const d = await edge.dpopLoad(proofs);
  w = written('dpop');
  edge.proc.kill('SIGUSR2');
  await w;
  console.log(
    `\nbearer: ${b.requests} requests, ${b.rps.toFixed(0)} req/s, the edge's CPU ${b.cpuUs.toFixed(0)} µs a request (non-2xx ${b.non2xx})`,
  );
  for (const l of summarise(join(dir, 'bearer.cpuprofile'), b.requests)) console.log('  ' + l);
  console.log(
    `\nDPoP: ${d.requests} requests, ${d.rps.toFixed(0)} req/s, the edge's CPU ${d.cpuUs.toFixed(0)} µs a request (non-2xx ${d.non2xx})`,
  );
  for (const l of summarise(join(dir, 'dpop.cpuprofile'), d.requests)) console.log('  ' + l);
  console.log(`\nload average ${loadavg()[0]!.toFixed(1)}; profiles in ${dir}`);
} finally {
  await edge.stop();
}
