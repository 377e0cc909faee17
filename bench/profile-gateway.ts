/**
 * Where the cell's CPU goes on an authenticated GET (issue 40), not part of
 * `make bench`: one cell (dist/cell.mjs, embedded store, the access log on as
 * in bench/gateway.bench.ts) profiled by the inspector's CPU profiler
 * (bench/_profile.ts) during an autocannon load of SECONDS (50 connections,
 * the bootstrap admin key) of each GET in BENCH_PATHS (`whoami`, `key`: an
 * API key by id, `registry`: the tool registry), one profile a GET, written
 * to PROFILE_DIR (default /tmp/perf-gateway) as 1.cpuprofile, 2.cpuprofile, …
 * in that order. Prints the cell's CPU µs a request and the functions with
 * the most self time, in µs a request. PROFILE_CELL names another build
 * (e.g. an older main's dist/cell.mjs). Profile the shipped build: its names
 * are the source's, and a cost of its build alone (esbuild's keepNames, stop
 * 43) never showed in profiles of the unminified fault build.
 *
 *   node scripts/build.mjs && node --import tsx bench/profile-gateway.ts   (PROFILE_DIR, PROFILE_CELL, SECONDS, BENCH_PATHS, TOP)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { profilerPreload, profiling, summarise } from './_profile.ts';
import { cpuSeconds, load, startBenchCell } from './_util.ts';

const dir = process.env['PROFILE_DIR'] ?? '/tmp/perf-gateway';
const SECONDS = Number(process.env['SECONDS'] ?? 4);
const TOP = Number(process.env['TOP'] ?? 30);
const NAMES = (process.env['BENCH_PATHS'] ?? 'whoami,key').split(',');
const ADMIN = '/api/public/v1/admin';

const nodeOptions = profilerPreload(dir);
const before = process.env['NODE_OPTIONS'];
process.env['NODE_OPTIONS'] = nodeOptions; // the cell's (startBenchCell passes this process's environment)
const dataDir = mkdtempSync(join(tmpdir(), 'bench-prof-gw-'));
const cell = await startBenchCell({
  dataDir,
  accessLog: true,
  ...(process.env['PROFILE_CELL'] ? { cell: process.env['PROFILE_CELL'] } : {}),
});
if (before === undefined) delete process.env['NODE_OPTIONS'];
else process.env['NODE_OPTIONS'] = before;
try {
  const headers = { authorization: `Bearer ${cell.adminKey}` };
  const keys = (await (await fetch(`${cell.url}${ADMIN}/api-keys?limit=1`, { headers })).json()) as { keys: { key_id: string }[] };
  const paths: Record<string, string> = {
    registry: `${ADMIN}/ai/tool-registry`,
    whoami: `${ADMIN}/whoami`,
    key: `${ADMIN}/api-keys/${keys.keys[0]!.key_id}`,
  };
  console.log(`load average ${loadavg()[0]!.toFixed(1)}`);
  for (const [i, name] of NAMES.entries()) {
    const url = cell.url + paths[name]!;
    await load({ url, connections: 10, seconds: 1, headers }); // warm-up
    const pid = cell.proc.pid!;
    const c0 = cpuSeconds(pid);
    const r = await profiling(pid, dir, i + 1, () => load({ url, connections: 50, seconds: SECONDS, headers }));
    const us = ((cpuSeconds(pid) - c0) * 1e6) / r.requests;
    console.log(
      `\n${name}: ${r.requests} requests, ${r.rps.toFixed(0)} req/s, the cell's CPU ${us.toFixed(0)} µs a request (non-2xx ${r.non2xx})`,
    );
    for (const l of summarise(join(dir, `${i + 1}.cpuprofile`), r.requests, TOP)) console.log('  ' + l);
  }
  console.log(`\nload average ${loadavg()[0]!.toFixed(1)}; profiles in ${dir}`);
} finally {
  await cell.stop();
  rmSync(dataDir, { recursive: true, force: true });
}
