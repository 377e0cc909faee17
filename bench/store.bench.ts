/**
 * Store benchmarks, both engines side by side, each against a baseline
 * measured in the same run:
 *  1. embedded: durable writes/s with 32 concurrent writers (group commit) vs
 *     bare `write+fsync` calls/s on the same disk; the same through HTTP
 *     (POSTs that commit, real cell, autocannon) when dist/cell.mjs runs;
 *  2. PostgreSQL (a server of this run, fsync on): durable writes/s with 32
 *     writers through the store (one INSERT, with NOTIFY in the transaction
 *     and after it; and pgbench's simple-update transaction), vs `pgbench -N`
 *     (simple-update) with 32 clients on the same server, and vs the same
 *     INSERT through the bare driver;
 *  3. point reads by primary key on both (sequential, and 32 concurrent);
 *  4. restart time with 100k rows on both: a fresh process opening the store
 *     (embedded: WebAssembly load, snapshot load, replay of a 50 MB log;
 *     PostgreSQL: connect, migrations check, LISTEN) and reading a row.
 * Child modes (`STORE_BENCH_CHILD=DIR`, `STORE_BENCH_PG_CHILD=URL`) time a
 * restart in a fresh process, so module loading is counted as on a real restart.
 */
import { spawn } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { encodeRecord } from '../cell/store/internal/log.ts';
import { LOG_FILE, openEmbeddedStore } from '../cell/store/embedded.ts';
import { openStore } from '../cell/store/open.ts';
import type { Migration, Store } from '../cell/store/types.ts';
import { pgDatabase, pgUnavailable, startPgServer } from '../test/helpers/postgres.ts';
import { fmt, pgbenchTps } from './_util.ts';

const MIGRATIONS: Migration[] = [
  { id: 'bench-001', sql: 'CREATE TABLE rows (id INTEGER PRIMARY KEY, owner TEXT NOT NULL, body TEXT NOT NULL)' },
  { id: 'bench-002', sql: 'CREATE TABLE events (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, body TEXT NOT NULL)' },
];
const WRITERS = 32;

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

/** Acknowledged transactions/s with `writers` concurrent loops for `seconds`. */
async function writeRate(writers: number, seconds: number, one: (id: number) => Promise<unknown>): Promise<number> {
  let acked = 0;
  let next = 0;
  const end = performance.now() + seconds * 1000;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: writers }, async () => {
      while (performance.now() < end) {
        await one(next++);
        acked++;
      }
    }),
  );
  return acked / ((performance.now() - t0) / 1000);
}

const insertRow = (s: Store) => (id: number) =>
  s.write((tx) => tx.run('INSERT INTO rows (id, owner, body) VALUES (?, ?, ?)', [id, 'owner', 'x'.repeat(200)]));

/** Point reads/s by primary key over ids 0..n-1: sequential, and with 32 concurrent readers. */
async function readRates(s: Store, n: number, seconds: number): Promise<{ seq: number; conc: number }> {
  const one = async (i: number) => {
    await s.get('SELECT id, owner, body FROM rows WHERE id = ?', [(i * 7919) % n]);
  };
  const seq = await writeRate(1, seconds, one);
  const conc = await writeRate(32, seconds, one);
  return { seq, conc };
}

/** 100k rows in the snapshot, then `logBytes` of one-row transactions appended to the log. */
export async function buildRestartStore(dir: string, logBytes: number): Promise<{ records: number }> {
  const store = await openEmbeddedStore({ dir, migrations: MIGRATIONS, log: () => undefined });
  await store.write(async (tx) => {
    for (let i = 0; i < 100_000; i++) {
      await tx.run('INSERT INTO rows (id, owner, body) VALUES (?, ?, ?)', [i, `principal-${i % 1000}`, `row ${i} ${'r'.repeat(60)}`]);
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
    const rec = encodeRecord(++lsn, [
      ['INSERT INTO events (id, kind, body) VALUES (?, ?, ?)', [records, 'run.step', `event ${records} ${'e'.repeat(380)}`]],
    ]);
    chunk.push(rec);
    written += rec.length;
    records++;
    if (chunk.length === 10_000) appendFileSync(join(dir, LOG_FILE), Buffer.concat(chunk.splice(0)));
  }
  if (chunk.length) appendFileSync(join(dir, LOG_FILE), Buffer.concat(chunk));
  return { records };
}

/** Child mode: open the store, read a row, print the time it took; exit without closing (a crash-like exit). */
async function restartChild(where: string, engine: 'embedded' | 'postgres'): Promise<void> {
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  const store =
    engine === 'embedded'
      ? await openEmbeddedStore({ dir: where, migrations: MIGRATIONS, log: () => undefined })
      : await openStore({ engine: 'postgres', url: where }, { migrations: MIGRATIONS, log: () => undefined });
  const row = await store.get('SELECT owner FROM rows WHERE id = ?', [99_999]);
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(c0);
  const rows = (await store.get('SELECT (SELECT COUNT(*) FROM rows) + (SELECT COUNT(*) FROM events) AS n'))?.['n'];
  const replayed = 'recovery' in store ? store.recovery.replayed : 0;
  process.stdout.write(`${JSON.stringify({ ms, cpuMs: (cpu.user + cpu.system) / 1000, replayed, rows, found: row !== undefined })}\n`);
  process.exit(0);
}

interface Restart {
  ms: number;
  cpuMs: number;
  replayed: number;
  rows: number;
  found: boolean;
  processMs: number;
}

async function timeRestart(env: Record<string, string>): Promise<Restart> {
  const self = fileURLToPath(import.meta.url);
  const t0 = performance.now();
  const child = spawn(process.execPath, ['--import', 'tsx', self], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  await new Promise((r) => child.once('exit', r));
  const processMs = performance.now() - t0;
  return { ...(JSON.parse(out) as Omit<Restart, 'processMs'>), processMs };
}

async function medianRestart(env: Record<string, string>): Promise<{ med: Restart; processMs: number }> {
  const runs: Restart[] = [];
  for (let i = 0; i < 3; i++) runs.push(await timeRestart(env));
  runs.sort((a, b) => a.ms - b.ms);
  return { med: runs[1]!, processMs: runs.map((r) => r.processMs).sort((a, b) => a - b)[1]! };
}

/** The same through HTTP: POSTs that commit (API-key mint + audit row), 32 connections, against the real cell. */
async function httpCommitRate(dataDir: string, seconds: number): Promise<{ rate: number; non2xx: number; p99: number } | string> {
  const bin = fileURLToPath(new URL('../dist/cell.mjs', import.meta.url));
  if (!existsSync(bin)) return 'dist/cell.mjs missing (make bench builds it)';
  const { spawnServer, load } = await import('./_util.ts');
  let srv: Awaited<ReturnType<typeof spawnServer>>;
  try {
    srv = await spawnServer([bin, 'serve', '--port', '0', '--data', dataDir, '--rate-capacity', '100000000', '--rate-refill', '100000000']);
  } catch (err) {
    return `the cell did not start (${(err as Error).message})`;
  }
  try {
    const key = readFileSync(join(dataDir, 'bootstrap-admin.key'), 'utf8').trim();
    const r = await load({
      url: `${srv.url}/api/public/v1/admin/api-keys`,
      method: 'POST',
      connections: 32,
      seconds,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'bench' }),
    });
    return { rate: r.rps, non2xx: r.non2xx, p99: r.p99 };
  } finally {
    await srv.stop();
  }
}

async function embedded(root: string): Promise<void> {
  console.log('  ### embedded engine');
  const fsyncs = await bareFsyncRate(root, 3);
  const store = await openEmbeddedStore({ dir: join(root, 'gc'), migrations: MIGRATIONS, log: () => undefined });
  const c0 = store.stats.commits;
  const f0 = store.stats.fsyncs;
  const rate = await writeRate(WRITERS, 3, insertRow(store));
  const perFsync = (store.stats.commits - c0) / Math.max(1, store.stats.fsyncs - f0);
  console.log(`  bare write+fsync calls/s (same disk):         ${fmt(fsyncs)}`);
  console.log(
    `  durable writes/s, ${WRITERS} writers, group commit:   ${fmt(rate)}  (ratio to bare fsyncs ${fmt(rate / fsyncs, 2)}x; ${fmt(perFsync, 1)} transactions per fsync)`,
  );
  const n = await store.get('SELECT COUNT(*) AS n FROM rows');
  const reads = await readRates(store, Number(n?.['n']), 2);
  console.log(`  point reads/s by primary key: ${fmt(reads.seq)} sequential, ${fmt(reads.conc)} with 32 concurrent readers`);
  await store.close();

  const http = await httpCommitRate(join(root, 'cell'), 5);
  if (typeof http === 'string') console.log(`  HTTP durable POSTs: skipped, ${http}`);
  else
    console.log(
      `  HTTP POSTs that commit (mint key), 32 connections: ${fmt(http.rate)}/s  (${fmt(http.rate / fsyncs, 2)}x bare fsyncs; p99 ${http.p99} ms; non-2xx ${http.non2xx})`,
    );

  const rdir = join(root, 'restart');
  const t0 = performance.now();
  const { records } = await buildRestartStore(rdir, 50 * 1024 * 1024);
  console.log(
    `  restart fixture: 100k rows in the snapshot + 50 MB log (${fmt(records)} records), built in ${fmt((performance.now() - t0) / 1000, 1)} s`,
  );
  const { med, processMs } = await medianRestart({ STORE_BENCH_CHILD: rdir });
  console.log(
    `  restart (open: wasm + snapshot + replay + first read), median of 3: ${fmt(med.ms)} ms  (target < 2,000 ms; replayed ${fmt(med.replayed)}, ${fmt(med.rows)} rows)`,
  );
  console.log(`  restart CPU time (user+sys) of that open: ${fmt(med.cpuMs)} ms; incl. node + tsx process start: ${fmt(processMs)} ms`);
}

async function postgres(): Promise<void> {
  console.log('  ### PostgreSQL engine (a server of this run, fsync on, synchronous_commit on)');
  const why = pgUnavailable();
  if (why) {
    console.log(`  skipped: ${why}`);
    return;
  }
  const server = await startPgServer({ durable: true });
  try {
    const benchDb = await pgDatabase(server.url);
    const pgbench = await pgbenchTps(benchDb.url, WRITERS, 5);
    console.log(`  pgbench -N (simple-update), ${WRITERS} clients, same server:   ${fmt(pgbench)} tps`);

    const db = await pgDatabase(server.url);
    const store = await openStore({ engine: 'postgres', url: db.url, poolSize: WRITERS }, { migrations: MIGRATIONS, log: () => undefined });
    const after = await openStore(
      { engine: 'postgres', url: db.url, poolSize: WRITERS, notify: 'after-commit' },
      { migrations: MIGRATIONS, log: () => undefined },
    );
    // Interleaved, best of two each: the machine is shared and noisy.
    let rate = 0;
    let afterRate = 0;
    let base = 0;
    for (let round = 0; round < 2; round++) {
      rate = Math.max(rate, await writeRate(WRITERS, 4, (id) => insertRow(store)(base + id)));
      base += 1e8;
      afterRate = Math.max(afterRate, await writeRate(WRITERS, 4, (id) => insertRow(after)(base + id)));
      base += 1e8;
    }
    await after.close();
    console.log(
      `  store durable writes/s, ${WRITERS} writers (one INSERT, SERIALIZABLE), pool ${WRITERS}, notify in-transaction (default): ${fmt(rate)}  (ratio to pgbench ${fmt(rate / pgbench, 2)})`,
    );
    console.log(
      `  the same with notify after-commit: ${fmt(afterRate)}  (ratio to pgbench ${fmt(afterRate / pgbench, 2)}; best of 2 each, interleaved)`,
    );
    const pool = new pg.Pool({ connectionString: db.url, max: WRITERS });
    const bare = (commit: string) => async (id: number) => {
      const c = await pool.connect();
      try {
        await c.query('BEGIN');
        await c.query('INSERT INTO rows (id, owner, body) VALUES ($1, $2, $3)', [base + id, 'owner', 'x'.repeat(200)]);
        await c.query(commit);
      } finally {
        c.release();
      }
    };
    const raw = await writeRate(WRITERS, 4, bare('COMMIT'));
    base += 1e8;
    const rawNotify = await writeRate(WRITERS, 4, bare("SELECT pg_notify('bench', 'x'); COMMIT"));
    base += 1e8;
    await pool.end();
    console.log(
      `  the same INSERT through the bare pg driver (READ COMMITTED, no NOTIFY): ${fmt(raw)}/s  (store / bare ${fmt(rate / raw, 2)})`,
    );
    console.log(
      `  the bare driver with a NOTIFY in each transaction: ${fmt(rawNotify)}/s  (${fmt(rawNotify / raw, 2)} of without: notifying commits are serialized)`,
    );

    const onPgbench = await openStore(
      { engine: 'postgres', url: benchDb.url, poolSize: WRITERS },
      { migrations: [], log: () => undefined },
    );
    const shaped = await writeRate(WRITERS, 5, (i) =>
      onPgbench.write(async (tx) => {
        const aid = 1 + ((i * 7919) % 100_000);
        const delta = (i % 10_000) - 5000;
        await tx.run('UPDATE pgbench_accounts SET abalance = abalance + ? WHERE aid = ?', [delta, aid]);
        await tx.get('SELECT abalance FROM pgbench_accounts WHERE aid = ?', [aid]);
        await tx.run('INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (?, ?, ?, ?, ?)', [
          1 + (i % 10),
          1,
          aid,
          delta,
          new Date().toISOString(),
        ]);
      }),
    );
    const s = 'stats' in onPgbench ? onPgbench.stats : undefined;
    console.log(
      `  pgbench's simple-update transaction through the store: ${fmt(shaped)}/s  (ratio to pgbench ${fmt(shaped / pgbench, 2)}; serialization retries ${fmt(s && 'retries' in s ? s.retries : 0)})`,
    );
    await onPgbench.close();

    await store.write(async (tx) => {
      await tx.run('DELETE FROM rows');
      for (let i = 0; i < 100_000; i += 1000) {
        const ids = Array.from({ length: 1000 }, (_, k) => i + k);
        await tx.run(
          `INSERT INTO rows (id, owner, body) VALUES ${ids.map(() => '(?, ?, ?)').join(', ')}`,
          ids.flatMap((id) => [id, `principal-${id % 1000}`, `row ${id} ${'r'.repeat(60)}`]),
        );
      }
    });
    const reads = await readRates(store, 100_000, 2);
    console.log(
      `  point reads/s by primary key: ${fmt(reads.seq)} sequential, ${fmt(reads.conc)} with 32 concurrent readers (pool ${WRITERS})`,
    );
    await store.close();
    const { med, processMs } = await medianRestart({ STORE_BENCH_PG_CHILD: db.url });
    console.log(
      `  restart with 100k rows (open: connect, migrations check, LISTEN + first read), median of 3: ${fmt(med.ms)} ms; CPU ${fmt(med.cpuMs)} ms; incl. process start ${fmt(processMs)} ms`,
    );
    await db.drop();
    await benchDb.drop();
  } finally {
    await server.stop();
  }
}

export default async function main(): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), 'store-bench-'));
  try {
    console.log(`  (load average at start: ${fmt(loadavg()[0] ?? 0, 1)} on ${cpus().length} cores)`);
    await embedded(root);
    await postgres();
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

if (process.env['STORE_BENCH_CHILD']) await restartChild(process.env['STORE_BENCH_CHILD'], 'embedded');
if (process.env['STORE_BENCH_PG_CHILD']) await restartChild(process.env['STORE_BENCH_PG_CHILD'], 'postgres');
