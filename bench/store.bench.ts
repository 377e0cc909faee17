/**
 * Store benchmarks, measured side by side in one run:
 *  1. durable writes/s with 32 concurrent writers (group commit) vs bare
 *     `write+fsync` calls/s on the same disk, and their ratio;
 *     and the same through HTTP (POSTs that commit, real cell, autocannon);
 *  2. restart time (fresh process: sql.js load, snapshot load, log replay) of a
 *     store holding 100k rows in its snapshot plus a 50 MB log.
 * The restart is timed inside a child process (`STORE_BENCH_CHILD=DIR`) so the
 * WebAssembly compile is counted, as it is on a real restart.
 */
import { spawn } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { encodeRecord } from '../cell/store/_log.ts';
import { LOG_FILE, openStore } from '../cell/store/store.ts';

const MIGRATIONS = [
  { id: 'bench-001', sql: 'CREATE TABLE rows (id INTEGER PRIMARY KEY, owner TEXT NOT NULL, body TEXT NOT NULL)' },
  { id: 'bench-002', sql: 'CREATE TABLE events (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, body TEXT NOT NULL)' },
];
const fmt = (n: number, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });

async function bareFsyncRate(dir: string, seconds: number): Promise<number> {
  const fh = await open(join(dir, 'fsync.bin'), 'a');
  const rec = Buffer.alloc(128, 1);
  let n = 0;
  const end = performance.now() + seconds * 1000;
  const t0 = performance.now();
  try {
    while (performance.now() < end) {
      await fh.write(rec);
      await fh.sync();
      n++;
    }
  } finally {
    await fh.close();
  }
  return n / ((performance.now() - t0) / 1000);
}

async function groupCommitRate(dir: string, writers: number, seconds: number): Promise<{ rate: number; perFsync: number }> {
  const store = await openStore({ dir, migrations: MIGRATIONS, log: () => undefined });
  const c0 = store.stats.commits;
  const f0 = store.stats.fsyncs;
  let acked = 0;
  const end = performance.now() + seconds * 1000;
  const t0 = performance.now();
  let next = 0;
  await Promise.all(Array.from({ length: writers }, async () => {
    while (performance.now() < end) {
      const id = next++;
      await store.write((tx) => tx.run('INSERT INTO rows (id, owner, body) VALUES (?, ?, ?)', [id, 'owner', 'x'.repeat(200)]));
      acked++;
    }
  }));
  const rate = acked / ((performance.now() - t0) / 1000);
  const perFsync = (store.stats.commits - c0) / Math.max(1, store.stats.fsyncs - f0);
  await store.close();
  return { rate, perFsync };
}

/** 100k rows in the snapshot, then `logBytes` of one-row transactions appended to the log. */
export async function buildRestartStore(dir: string, logBytes: number): Promise<{ records: number }> {
  const store = await openStore({ dir, migrations: MIGRATIONS, log: () => undefined });
  await store.write((tx) => {
    for (let i = 0; i < 100_000; i++) {
      tx.run('INSERT INTO rows (id, owner, body) VALUES (?, ?, ?)', [i, `principal-${i % 1000}`, `row ${i} ${'r'.repeat(60)}`]);
    }
  });
  await store.checkpoint();
  let lsn = store.stats.lsn;
  await store.close();
  // Realistic records: one INSERT of ~400 bytes each, written the way the store writes them.
  let written = 0;
  let records = 0;
  const chunk: Buffer[] = [];
  while (written < logBytes) {
    const rec = encodeRecord(++lsn, [['INSERT INTO events (id, kind, body) VALUES (?, ?, ?)', [records, 'run.step', `event ${records} ${'e'.repeat(380)}`]]]);
    chunk.push(rec);
    written += rec.length;
    records++;
    if (chunk.length === 10_000) appendFileSync(join(dir, LOG_FILE), Buffer.concat(chunk.splice(0)));
  }
  if (chunk.length) appendFileSync(join(dir, LOG_FILE), Buffer.concat(chunk));
  return { records };
}

/** Child mode: open the store, print the time it took and what it replayed, do not checkpoint. */
async function restartChild(dir: string): Promise<void> {
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  const store = await openStore({ dir, migrations: MIGRATIONS, log: () => undefined });
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(c0);
  const cpuMs = (cpu.user + cpu.system) / 1000;
  const rows = store.get<{ n: number }>('SELECT (SELECT COUNT(*) FROM rows) + (SELECT COUNT(*) FROM events) AS n')?.n;
  process.stdout.write(`${JSON.stringify({ ms, cpuMs, replayed: store.recovery.replayed, rows })}\n`);
  process.exit(0); // a crash-like exit: no close, so the next run replays the same log
}

async function timeRestart(dir: string): Promise<{ ms: number; cpuMs: number; replayed: number; rows: number; processMs: number }> {
  const self = fileURLToPath(import.meta.url);
  const t0 = performance.now();
  const child = spawn(process.execPath, ['--import', 'tsx', self], { env: { ...process.env, STORE_BENCH_CHILD: dir }, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  await new Promise((r) => child.once('exit', r));
  const processMs = performance.now() - t0;
  return { ...(JSON.parse(out) as { ms: number; cpuMs: number; replayed: number; rows: number }), processMs };
}

/** The same through HTTP: POSTs that commit (API-key mint + audit row), 32 connections, against the real cell. */
async function httpCommitRate(dataDir: string, seconds: number): Promise<{ rate: number; non2xx: number; p99: number } | string> {
  const bin = fileURLToPath(new URL('../dist/cell.mjs', import.meta.url));
  if (!existsSync(bin)) return 'dist/cell.mjs missing (make bench builds it)';
  const { spawnServer, load } = await import('./_util.ts');
  const srv = await spawnServer([bin, 'serve', '--port', '0', '--data', dataDir, '--rate-capacity', '100000000', '--rate-refill', '100000000']);
  try {
    const key = readFileSync(join(dataDir, 'bootstrap-admin.key'), 'utf8').trim();
    const r = await load({
      url: `${srv.url}/api/public/v1/admin/api-keys`, method: 'POST', connections: 32, seconds,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'bench' }),
    });
    return { rate: r.rps, non2xx: r.non2xx, p99: r.p99 };
  } finally {
    await srv.stop();
  }
}

export default async function run(): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), 'store-bench-'));
  try {
    console.log(`  (load average at start: ${fmt(loadavg()[0] ?? 0, 1)} on ${cpus().length} cores)`);
    const fsyncs = await bareFsyncRate(root, 3);
    const gc = await groupCommitRate(join(root, 'gc'), 32, 3);
    console.log(`  bare write+fsync calls/s (same disk):         ${fmt(fsyncs)}`);
    console.log(`  durable writes/s, 32 writers, group commit:   ${fmt(gc.rate)}  (target >= 1,000)`);
    console.log(`  ratio durable writes / bare fsyncs:           ${fmt(gc.rate / fsyncs, 2)}x  (${fmt(gc.perFsync, 1)} transactions per fsync)`);

    const http = await httpCommitRate(join(root, 'cell'), 5);
    if (typeof http === 'string') console.log(`  HTTP durable POSTs: skipped, ${http}`);
    else {
      console.log(`  HTTP POSTs that commit (mint key), 32 connections: ${fmt(http.rate)}/s  (${fmt(http.rate / fsyncs, 2)}x bare fsyncs; p99 ${http.p99} ms; non-2xx ${http.non2xx})`);
    }

    const rdir = join(root, 'restart');
    const t0 = performance.now();
    const { records } = await buildRestartStore(rdir, 50 * 1024 * 1024);
    console.log(`  restart fixture: 100k rows in the snapshot + 50 MB log (${fmt(records)} records), built in ${fmt((performance.now() - t0) / 1000, 1)} s`);
    const runs = [];
    for (let i = 0; i < 3; i++) runs.push(await timeRestart(rdir));
    runs.sort((a, b) => a.ms - b.ms);
    const med = runs[1]!;
    console.log(`  restart (open: wasm + snapshot + replay), median of 3: ${fmt(med.ms)} ms  (target < 2,000 ms; replayed ${fmt(med.replayed)}, ${fmt(med.rows)} rows)`);
    console.log(`  restart CPU time (user+sys, all threads) of that open: ${fmt(med.cpuMs)} ms  (load-independent; wall time above depends on what else runs)`);
    console.log(`  restart incl. node + tsx process start, median:        ${fmt(runs.map((r) => r.processMs).sort((a, b) => a - b)[1]!)} ms`);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

if (process.env.STORE_BENCH_CHILD) await restartChild(process.env.STORE_BENCH_CHILD);
