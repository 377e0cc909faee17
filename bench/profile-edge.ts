/**
 * Where the edge's CPU goes on a DPoP-bound GET against a bearer GET (issue
 * 40), not part of `make bench`: one edge process (`node dist/edge.mjs`, the
 * bundle the single executable carries) profiled by the inspector's CPU
 * profiler (bench/_profile.ts: started and stopped around each load, so
 * start-up stays out), a bearer load of SECONDS, then one DPoP-bound request
 * per fresh proof (PROOFS of them). Writes 1.cpuprofile (bearer) and
 * 2.cpuprofile (DPoP) to PROFILE_DIR (default /tmp/perf-edge) and prints, for
 * each, the edge's CPU µs a request and the functions with the most self
 * time, in µs a request.
 *
 *   node scripts/build.mjs && node --import tsx bench/profile-edge.ts   (PROFILE_DIR, SECONDS, PROOFS, TOP)
 */
import { existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { profilerPreload, profiling, summarise } from './_profile.ts';
import { startTokenEdge } from './edge-tokens.ts';

const dir = process.env['PROFILE_DIR'] ?? '/tmp/perf-edge';
const SECONDS = Number(process.env['SECONDS'] ?? 4);
const PROOFS = Number(process.env['PROOFS'] ?? 12_000);
const TOP = Number(process.env['TOP'] ?? 25);

const mjs = resolve(import.meta.dirname, '../dist/edge.mjs');
if (!existsSync(mjs)) throw new Error(`${mjs} is missing: run node scripts/build.mjs`);
const edge = await startTokenEdge(process.execPath, [mjs], { env: { ...process.env, NODE_OPTIONS: profilerPreload(dir) } });
try {
  console.log(`load average ${loadavg()[0]!.toFixed(1)}`);
  await edge.bearerLoad(1); // warm-up
  await edge.dpopLoad(await edge.proofs(2000));
  const pid = edge.proc.pid!;
  const b = await profiling(pid, dir, 1, () => edge.bearerLoad(SECONDS));
  const proofs = await edge.proofs(PROOFS);
  const d = await profiling(pid, dir, 2, () => edge.dpopLoad(proofs));
  console.log(
    `\nbearer: ${b.requests} requests, ${b.rps.toFixed(0)} req/s, the edge's CPU ${b.cpuUs.toFixed(0)} µs a request (non-2xx ${b.non2xx})`,
  );
  for (const l of summarise(join(dir, '1.cpuprofile'), b.requests, TOP)) console.log('  ' + l);
  console.log(
    `\nDPoP: ${d.requests} requests, ${d.rps.toFixed(0)} req/s, the edge's CPU ${d.cpuUs.toFixed(0)} µs a request (non-2xx ${d.non2xx})`,
  );
  for (const l of summarise(join(dir, '2.cpuprofile'), d.requests, TOP)) console.log('  ' + l);
  console.log(`\nload average ${loadavg()[0]!.toFixed(1)}; profiles in ${dir}`);
} finally {
  await edge.stop();
}
