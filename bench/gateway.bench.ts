/**
 * The gateway on both engines (issues 11 and 13), every figure a ratio
 * against a baseline measured in the same run, same load generator
 * (autocannon), same connections:
 *
 * - authenticated GET of a light answer (`GET /admin/whoami`: the caller) and
 *   of a static admin resource (the tool registry) vs a raw node:http server
 *   answering the same bytes and the same headers (target >= 0.8);
 * - authenticated GET of a stored record (`GET /admin/api-keys/{id}`) vs raw
 *   node:http answering the same bytes and headers (target >= 0.5);
 * - durable writes over HTTP (POST api-keys: mint + audit row, one
 *   transaction), 32 connections: embedded vs bare write+fsync calls on the
 *   same disk (target >= 4,000/s); PostgreSQL vs `pgbench -N` (simple-update)
 *   at 32 clients on the same server, run just before.
 *
 * The raw servers are given the cell's own answers (status, headers, body)
 * captured before the run, so both sides write the same bytes. The GET pairs
 * alternate in short rounds (see `pair`). Each GET ratio is also given per
 * CPU second of each server process (/proc): on a machine whose other load
 * decides how much CPU each side gets, requests per CPU second compares the
 * work per request, which throughput alone does not.
 *
 * PostgreSQL runs on a server this benchmark starts (fsync on) when the
 * binaries are there (test/helpers/postgres.ts), else it is skipped with the reason.
 */
import { closeSync, fsyncSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pgDatabase, pgUnavailable, startPgServer } from '../test/helpers/postgres.ts';
import { cpuSeconds, fmt, load, pgbenchTps, spawnServer, startBenchCell, type LoadResult } from './_util.ts';

const CONNECTIONS = 50;
const SECONDS = Number(process.env['BENCH_SECONDS'] ?? 2);
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 6);
const WRITERS = 32;

interface Captured {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** A raw node:http server answering `GET /<name>` with the captured answer, byte for byte. */
const RAW_SERVER = `
const http = require('node:http');
const answers = JSON.parse(process.env.ANSWERS);
http.createServer((req, res) => {
  const a = answers[req.url] ?? answers['/'];
  res.writeHead(a.status, a.headers);
  res.end(a.body);
}).listen(0, '127.0.0.1', function () { console.log('listening ' + this.address().port); });
`;

/** The same answers from a bare Hono app on @hono/node-server: the framework's own ceiling. */
const HONO_SERVER = `
import { Hono } from 'hono';
import { serve } from '@hono/node-server';
const answers = JSON.parse(process.env.ANSWERS);
const app = new Hono();
app.get('/:name', (c) => { const a = answers['/' + c.req.param('name')]; return c.body(a.body, a.status, a.headers); });
serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (i) => console.log('listening ' + i.port));
`;

/** What the cell answered, minus what node:http adds itself (Date, Connection, Keep-Alive). */
async function capture(url: string, headers: Record<string, string>): Promise<Captured> {
  const res = await fetch(url, { headers });
  const body = await res.text();
  const out: Record<string, string> = {};
  res.headers.forEach((v, k) => {
    if (!['date', 'connection', 'keep-alive', 'transfer-encoding'].includes(k)) out[k] = v;
  });
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}: ${body}`);
  return { status: res.status, headers: out, body };
}

function bareFsyncRate(dir: string, seconds: number): number {
  const fd = openSync(join(dir, 'fsync.bin'), 'w');
  const buf = Buffer.alloc(200, 7);
  let n = 0;
  const end = performance.now() + seconds * 1000;
  while (performance.now() < end) {
    writeSync(fd, buf);
    fsyncSync(fd);
    n++;
  }
  closeSync(fd);
  return n / seconds;
}

interface Pair {
  cell: number;
  raw: number;
  ratios: number[];
  p99: number;
  non2xx: number;
  /** Requests answered per CPU second of each server process (user + system). */
  cellPerCpu: number;
  rawPerCpu: number;
}

/** Runs a load and counts the server's CPU seconds while it ran. */
async function measured(pid: number, o: Parameters<typeof load>[0]): Promise<LoadResult & { cpu: number }> {
  const c0 = cpuSeconds(pid);
  const r = await load(o);
  return { ...r, cpu: cpuSeconds(pid) - c0 };
}

/**
 * The cell and the raw server in alternation, ROUNDS short rounds each: the
 * machine's other load moves by the second, so each round's ratio compares
 * two measures seconds apart; the figure is the ratio of the totals.
 */
async function pair(cellPid: number, cellUrl: string, headers: Record<string, string>, rawPid: number, rawUrl: string): Promise<Pair> {
  const out: Pair = { cell: 0, raw: 0, ratios: [], p99: 0, non2xx: 0, cellPerCpu: 0, rawPerCpu: 0 };
  let cellCpu = 0;
  let rawCpu = 0;
  for (let i = 0; i < ROUNDS; i++) {
    const c = await measured(cellPid, { url: cellUrl, connections: CONNECTIONS, seconds: SECONDS, headers });
    const r = await measured(rawPid, { url: rawUrl, connections: CONNECTIONS, seconds: SECONDS });
    out.cell += c.rps / ROUNDS;
    out.raw += r.rps / ROUNDS;
    cellCpu += c.cpu;
    rawCpu += r.cpu;
    out.ratios.push(c.rps / r.rps);
    out.p99 = Math.max(out.p99, c.p99);
    out.non2xx += c.non2xx;
  }
  out.cellPerCpu = (out.cell * ROUNDS * SECONDS) / cellCpu;
  out.rawPerCpu = (out.raw * ROUNDS * SECONDS) / rawCpu;
  return out;
}

const describe = (what: string, p: Pair) => {
  const sorted = [...p.ratios].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)]!;
  return (
    `${what}: cell ${fmt(p.cell)} req/s (worst p99 ${p.p99} ms, non-2xx ${p.non2xx}) vs raw ${fmt(p.raw)} req/s -> ratio ${fmt(p.cell / p.raw, 2)} ` +
    `(${ROUNDS} alternating rounds of ${SECONDS} s; per round median ${fmt(median, 2)}, ${fmt(sorted[0]!, 2)}-${fmt(sorted.at(-1)!, 2)}); ` +
    `per CPU second of the server: cell ${fmt(p.cellPerCpu)} vs raw ${fmt(p.rawPerCpu)} requests -> CPU-normalised ratio ${fmt(p.cellPerCpu / p.rawPerCpu, 2)}`
  );
};

async function engine(name: string, dataDir: string, extraArgs: string[], writeBaseline: { what: string; rate: number }): Promise<void> {
  console.log(`  ### ${name} (load average ${fmt(loadavg()[0] ?? 0, 1)})`);
  // The access log on, as an operator runs the cell (its cost: bench/access-log.bench.ts).
  const cell = await startBenchCell({ dataDir, accessLog: true, args: extraArgs });
  let raw: Awaited<ReturnType<typeof spawnServer>> | undefined;
  let hono: Awaited<ReturnType<typeof spawnServer>> | undefined;
  try {
    const auth = { authorization: `Bearer ${cell.adminKey}` };
    const list = (await (await fetch(`${cell.url}/api/public/v1/admin/api-keys?limit=1`, { headers: auth })).json()) as {
      keys: { key_id: string }[];
    };
    const keyUrl = `${cell.url}/api/public/v1/admin/api-keys/${list.keys[0]!.key_id}`;
    const registryUrl = `${cell.url}/api/public/v1/admin/ai/tool-registry`;
    const whoamiUrl = `${cell.url}/api/public/v1/admin/whoami`;
    const answers = {
      '/key': await capture(keyUrl, auth),
      '/registry': await capture(registryUrl, auth),
      '/whoami': await capture(whoamiUrl, auth),
    };
    const env = { ...process.env, ANSWERS: JSON.stringify(answers) };
    raw = await spawnServer(['-e', RAW_SERVER], undefined, env);
    if (name === 'embedded') hono = await spawnServer(['--input-type=module', '-e', HONO_SERVER], undefined, env);
    console.log(
      `  answers: whoami ${answers['/whoami'].body.length} bytes, registry ${answers['/registry'].body.length} bytes, key ${answers['/key'].body.length} bytes, ${Object.keys(answers['/key'].headers).length} headers each (the raw servers send the same)`,
    );

    for (const u of [keyUrl, registryUrl, whoamiUrl]) await load({ url: u, connections: 10, seconds: 1, headers: auth }); // warm-up
    await load({ url: `${raw.url}/key`, connections: 10, seconds: 1 });
    const cellPid = cell.proc.pid!;
    const rawPid = raw.proc.pid!;
    const whoami = await pair(cellPid, whoamiUrl, auth, rawPid, `${raw.url}/whoami`);
    console.log(`  ${describe('GET whoami (light answer)', whoami)} (target >= 0.8)`);
    const registry = await pair(cellPid, registryUrl, auth, rawPid, `${raw.url}/registry`);
    console.log(`  ${describe('GET tool registry (static)', registry)} (target >= 0.8)`);
    const stored = await pair(cellPid, keyUrl, auth, rawPid, `${raw.url}/key`);
    console.log(`  ${describe('GET api-keys/{id} (stored record)', stored)} (target >= 0.5)`);
    if (hono) {
      const h = await pair(hono.proc.pid!, `${hono.url}/registry`, {}, rawPid, `${raw.url}/registry`);
      console.log(
        `  for scale: ${describe("bare Hono (@hono/node-server) answering the registry's bytes and headers", h).replace('cell ', '')}`,
      );
    }

    const m = await load({
      url: `${cell.url}/api/public/v1/admin/api-keys`,
      connections: WRITERS,
      seconds: 5,
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'bench', scopes: ['audit.read'] }),
    });
    console.log(
      `  durable writes over HTTP (POST api-keys: mint + audit, ${WRITERS} connections): ${fmt(m.rps)} acknowledged/s (p99 ${m.p99} ms, non-2xx ${m.non2xx}) vs ${writeBaseline.what} ${fmt(writeBaseline.rate)}/s -> ratio ${fmt(m.rps / writeBaseline.rate, 2)}`,
    );
    // Requests autocannon left in flight finish before the cell stops (else they log "store closed").
    await new Promise((r) => setTimeout(r, 1000));
  } finally {
    await cell.stop();
    await raw?.stop();
    await hono?.stop();
  }
}

export default async function main(): Promise<void> {
  console.log(`  (load average at start: ${fmt(loadavg()[0] ?? 0, 1)} on ${cpus().length} cores)`);
  const root = mkdtempSync(join(tmpdir(), 'bench-gw-'));
  try {
    const fsyncs = bareFsyncRate(root, 2);
    await engine('embedded', join(root, 'embedded'), [], { what: 'bare write+fsync calls (same disk)', rate: fsyncs });
    const why = pgUnavailable();
    if (why) {
      console.log(`  ### PostgreSQL: skipped (${why})`);
      return;
    }
    const server = await startPgServer({ durable: true });
    try {
      const benchDb = await pgDatabase(server.url);
      const tps = await pgbenchTps(benchDb.url, WRITERS, 5);
      await benchDb.drop();
      const db = await pgDatabase(server.url);
      await engine('PostgreSQL (fsync on, pool 32)', join(root, 'pg'), ['--store', db.url, '--store-pool', String(WRITERS)], {
        what: `pgbench -N (simple-update), ${WRITERS} clients, same server`,
        rate: tps,
      });
      await db.drop();
    } finally {
      await server.stop();
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
