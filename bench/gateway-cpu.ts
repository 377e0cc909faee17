/**
 * CPU per request of the cell's gateway, for a machine shared with other
 * load (issue 28): throughput there swings with whatever else runs, the CPU a
 * process spends on one request much less. Starts one cell per build given
 * (default dist/cell.mjs; e.g. a copy of main's build beside this branch's),
 * each with its access log on (`--log-level info`, stdout a drained pipe), plus
 * raw node:http and bare Hono answering the cell's captured bytes, then
 * alternates rounds of the same autocannon load (50 connections, an
 * authenticated GET) over all of them, order flipped each round, and prints
 * each server's µs of CPU (user + system, /proc) per answered request. The
 * GETs (BENCH_PATHS, comma-separated; default `registry`): `registry` the
 * tool registry (static), `whoami` the caller (a light answer), `key` an API
 * key by id (a stored record).
 *
 *   node --import tsx bench/gateway-cpu.ts [cell.mjs …]   (BENCH_SECONDS, BENCH_ROUNDS, BENCH_PATHS)
 *
 * Not a `*.bench.ts`: a tool for comparing builds, not one of make bench's figures.
 * The cell listed first has read 3–15 % more CPU per request than the same
 * build listed second (bench/RESULTS.md, stop 24): compare builds in both orders.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { cpuSeconds, fmt, load, spawnServer, startBenchCell, type BenchCell } from './_util.ts';

const SECONDS = Number(process.env['BENCH_SECONDS'] ?? 3);
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 4);
const NAMES = (process.env['BENCH_PATHS'] ?? 'registry').split(',');
const ADMIN = '/api/public/v1/admin';

const RAW_SERVER = `
const http = require('node:http');
const answers = JSON.parse(process.env.ANSWERS);
http.createServer((req, res) => { const a = answers[req.url]; res.writeHead(a.status, a.headers); res.end(a.body); })
  .listen(0, '127.0.0.1', function () { console.log('listening ' + this.address().port); });
`;
const HONO_SERVER = `
import { Hono } from 'hono';
import { serve } from '@hono/node-server';
const answers = JSON.parse(process.env.ANSWERS);
const app = new Hono();
app.get('/:name', (c) => { const a = answers['/' + c.req.param('name')]; return c.body(a.body, a.status, a.headers); });
serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (i) => console.log('listening ' + i.port));
`;

interface Target {
  name: string;
  pid: number;
  url: string;
  headers: Record<string, string>;
  cpu: number;
  requests: number;
}

const builds = process.argv.slice(2).length > 0 ? process.argv.slice(2) : [resolve(import.meta.dirname, '../dist/cell.mjs')];
const root = mkdtempSync(join(tmpdir(), 'bench-gwcpu-'));
const cells: BenchCell[] = [];
const others: Awaited<ReturnType<typeof spawnServer>>[] = [];
try {
  console.log(
    `load average at start: ${loadavg()
      .map((l) => fmt(l, 2))
      .join(' ')}`,
  );
  const targets: Target[] = [];
  const answers: Record<string, { status: number; headers: Record<string, string>; body: string }> = {};
  for (const [i, build] of builds.entries()) {
    const cell = await startBenchCell({ cell: build, dataDir: join(root, `cell-${i}`), accessLog: true });
    cells.push(cell);
    const headers = { authorization: `Bearer ${cell.adminKey}` };
    const keys = (await (await fetch(`${cell.url}${ADMIN}/api-keys?limit=1`, { headers })).json()) as { keys: { key_id: string }[] };
    const paths: Record<string, string> = {
      registry: `${ADMIN}/ai/tool-registry`,
      whoami: `${ADMIN}/whoami`,
      key: `${ADMIN}/api-keys/${keys.keys[0]!.key_id}`,
    };
    for (const name of NAMES) {
      const path = paths[name];
      if (!path) throw new Error(`BENCH_PATHS: no GET named ${name} (registry, whoami, key)`);
      if (!answers[`/${name}`]) {
        const res = await fetch(cell.url + path, { headers });
        const out: Record<string, string> = {};
        res.headers.forEach((v, k) => {
          if (!['date', 'connection', 'keep-alive', 'transfer-encoding'].includes(k)) out[k] = v;
        });
        answers[`/${name}`] = { status: res.status, headers: out, body: await res.text() };
        if (res.status !== 200) throw new Error(`the cell answered ${res.status}: ${answers[`/${name}`]!.body}`);
      }
      targets.push({ name: `${name}: cell ${build}`, pid: cell.proc.pid!, url: cell.url + path, headers, cpu: 0, requests: 0 });
    }
  }
  const env = { ...process.env, ANSWERS: JSON.stringify(answers) };
  const raw = await spawnServer(['-e', RAW_SERVER], undefined, env);
  const hono = await spawnServer(['--input-type=module', '-e', HONO_SERVER], undefined, env);
  others.push(raw, hono);
  for (const name of NAMES) {
    targets.push({ name: `${name}: bare Hono`, pid: hono.proc.pid!, url: `${hono.url}/${name}`, headers: {}, cpu: 0, requests: 0 });
    targets.push({ name: `${name}: raw node:http`, pid: raw.proc.pid!, url: `${raw.url}/${name}`, headers: {}, cpu: 0, requests: 0 });
  }
  for (const t of targets) await load({ url: t.url, connections: 10, seconds: 1, headers: t.headers }); // warm-up
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? targets : [...targets].reverse();
    for (const t of order) {
      const c0 = cpuSeconds(t.pid);
      const res = await load({ url: t.url, connections: 50, seconds: SECONDS, headers: t.headers });
      t.cpu += cpuSeconds(t.pid) - c0;
      t.requests += res.requests;
      if (res.non2xx > 0) throw new Error(`${t.name}: ${res.non2xx} answers not 2xx`);
    }
    console.log(`round ${r + 1}/${ROUNDS} done, load average ${fmt(loadavg()[0] ?? 0, 2)}`);
  }
  for (const t of targets) {
    const raw = targets.find((x) => x.name === `${t.name.split(':')[0]}: raw node:http`)!;
    const rawUs = (raw.cpu * 1e6) / raw.requests;
    const us = (t.cpu * 1e6) / t.requests;
    console.log(
      `${t.name}: ${fmt(us, 1)} µs CPU/request (${t.requests} requests, ${fmt(t.cpu, 2)} CPU s) -> raw/this ${fmt(rawUs / us, 2)}`,
    );
  }
  console.log(
    `load average at end: ${loadavg()
      .map((l) => fmt(l, 2))
      .join(' ')}`,
  );
} finally {
  for (const c of cells) await c.stop();
  for (const o of others) await o.stop();
  rmSync(root, { recursive: true, force: true });
}
