/**
 * Profiling harness for the run hot path (issue 21), not part of `make bench`:
 * one cell process (PostgreSQL, or embedded with --embedded) profiled during
 * the timed runs (the inspector's CPU profiler, loaded by a preload and
 * started by SIGUSR2 right before them), a 20-seat sequential
 * crew, N runs one after another (K at once), then a
 * clean stop so the profile is written to PROFILE_DIR (default /tmp/perf).
 * --warm N runs N rounds of K runs first, unmeasured (the hot path compiled).
 *
 *   node --import tsx bench/profile-run.ts [--embedded] [--runs N] [--concurrent K] [--no-prof] [--statements] [--statement-times] [--table-stats] [--cells C] [--launch-on K] [--pg-delay-ms N] [--warm N]
 *
 * Prints steps/s, write transactions per step (PostgreSQL) and the CPU time
 * a step costs the cell, the PostgreSQL server (all its processes) and this
 * process (the fake model server and the client): CPU time, unlike steps/s,
 * can be compared between runs on a loaded machine. With
 * --statements (PostgreSQL), the statements the cell sent per step, counted
 * from the server's log (log_statement = all during the timed runs); with
 * --statement-times (PostgreSQL), what each statement cost the server during
 * the timed runs (pg_stat_statements: calls a step, µs a call, execution time
 * a step, waits for locks included), the costliest first; with --table-stats
 * (PostgreSQL), each table's rows inserted, updated (HOT ones apart) and
 * deleted a step, its sequential and index scans a step, and its dead rows
 * at the end (pg_stat_user_tables). Read the
 * profile with Chrome's DevTools or any .cpuprofile viewer. --cells C
 * (PostgreSQL): a group of C cell processes on the one database, the
 * launches spread over them round-robin (each run awaited on the cell that
 * launched it; --launch-on K: over the first K only, the others idle
 * members); the CPU of each cell is printed apart, and the rollbacks
 * and commits (pg_stat_database: xact_rollback, xact_commit, reads included)
 * of the timed runs (the notifications sent: pg_notify in --statements).
 * PROFILE_CELL names another build to start (e.g. an older main's dist/cell.mjs); the
 * shipped build's function names are the source's (scripts/build.mjs), so profile that one.
 */
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer, connect, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { startOpenAIServer } from '../test/fixtures/openai-server.ts';
import { type CellProcess, startCellProcess } from '../test/helpers/cell-process.ts';
import { adminQuery, pgDatabase, startPgServer } from '../test/helpers/postgres.ts';
import { T } from '../test/helpers/teams.ts';
import { callCell, cpuSeconds, pgServerCpuSeconds, runEnded, sequentialCrew } from './_util.ts';

const arg = (n: string, d: string) => {
  const i = process.argv.indexOf(n);
  return i < 0 ? d : process.argv[i + 1]!;
};
const embedded = process.argv.includes('--embedded');
const runs = Number(arg('--runs', '10'));
const conc = Number(arg('--concurrent', '1'));
const dir = process.env['PROFILE_DIR'] ?? '/tmp/perf';
mkdirSync(dir, { recursive: true });
// --cpu-prof is not allowed in NODE_OPTIONS: a preload starts the inspector's profiler when told
// (SIGUSR2, sent right before the timed runs, so start-up and setup stay out of the profile), samples
// every PROFILE_INTERVAL_US µs (default 250), and writes the profile when the cell exits (SIGTERM: a clean stop).
writeFileSync(
  join(dir, 'prof.mjs'),
  `import { Session } from 'node:inspector';
import { writeFileSync } from 'node:fs';
const s = new Session();
s.connect();
s.post('Profiler.enable');
s.post('Profiler.setSamplingInterval', { interval: ${Number(process.env['PROFILE_INTERVAL_US'] ?? 250)} });
process.once('SIGUSR2', () => s.post('Profiler.start'));
process.on('exit', () => {
  s.post('Profiler.stop', (err, r) => {
    if (!err) writeFileSync(${JSON.stringify(dir)} + '/cell-' + process.pid + '.cpuprofile', JSON.stringify(r.profile));
  });
});
`,
);
const statementTimes = !embedded && process.argv.includes('--statement-times');
const tableStats = !embedded && process.argv.includes('--table-stats');
const server = embedded
  ? null
  : await startPgServer({
      durable: true,
      ...(statementTimes ? { settings: ['shared_preload_libraries=pg_stat_statements', 'pg_stat_statements.track=all'] } : {}),
    });
if (statementTimes) await adminQuery(server!.url, 'CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
const db = server ? await pgDatabase(server.url) : null;
// --pg-delay-ms N: the cells reach PostgreSQL through a proxy in this process that holds each chunk
// the server sends for N ms, as a database on another host would (a round trip N ms longer).
const pgDelay = Number(arg('--pg-delay-ms', '0'));
const cellDbUrl = db && pgDelay > 0 ? await delayingProxy(db.url, pgDelay) : db?.url;

async function delayingProxy(url: string, ms: number): Promise<string> {
  const target = new URL(url);
  const proxy = createServer((c) => {
    const s = connect(Number(target.port), target.hostname);
    c.setNoDelay(true);
    s.setNoDelay(true);
    c.pipe(s);
    s.on('data', (chunk: Buffer) => setTimeout(() => c.write(chunk), ms));
    s.on('close', () => setTimeout(() => c.destroy(), ms));
    c.on('close', () => s.destroy());
    s.on('error', () => c.destroy());
    c.on('error', () => s.destroy());
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  proxy.unref();
  const u = new URL(url);
  u.port = String((proxy.address() as AddressInfo).port);
  return u.toString();
}
const ai = await startOpenAIServer({
  apiKey: 'sk-fake',
  record: false,
  respond: () => ({ content: 'ok', usage: { prompt_tokens: 3, completion_tokens: 2 } }),
});
const nCells = embedded ? 1 : Number(arg('--cells', '1'));
const nodeOptions = [process.argv.includes('--no-prof') ? '' : `--import=${dir}/prof.mjs`, process.env['CELL_NODE_OPTIONS'] ?? '']
  .join(' ')
  .trim();
const cells: CellProcess[] = [];
for (let i = 0; i < nCells; i++)
  cells.push(
    await startCellProcess({
      timeoutMs: 120_000,
      args: [
        ...(cellDbUrl ? ['--store', cellDbUrl, '--posture', 'multi-cell'] : []),
        ...(nCells > 1 ? ['--cell-id', `cell-${i}`] : []),
        '--log-level',
        'warn',
        // As the peers bench's cells (bench/_util.ts startBenchCell): the gateway's per-client budget
        // would answer 429 to 16 event streams and launches a second, and end the measurement.
        '--rate-capacity',
        '100000000',
        '--rate-refill',
        '100000000',
      ],
      // CELL_NODE_OPTIONS: more options for the cells' node (e.g. --perf-basic-prof, for `perf record` of a cell).
      env: nodeOptions ? { NODE_OPTIONS: nodeOptions } : {},
      ...(process.env['PROFILE_CELL'] ? { bin: process.env['PROFILE_CELL'] } : {}),
    }),
  );
const cell = cells[0]!;
const call = (method: string, path: string, body?: unknown, on = cell) => callCell(on.url, cell.adminKey, method, path, body);
const crew = await sequentialCrew(ai, cell.adminKey, call);
let launched = 0;
/** --launch-on K: the launches go to the first K cells only (the others are idle members of the group). */
const spread = Math.min(cells.length, Number(arg('--launch-on', String(cells.length))));
const one = async () => {
  const on = cells[launched++ % spread]!;
  const r = await call('POST', `${T}/crews/${crew}/runs`, { input: 'go' }, on);
  if (r.status !== 201 && r.status !== 202) throw new Error(`launch ${r.status} ${r.text}`);
  // Awaited on the run's event stream, as a client would (no polling in the profile).
  const end = await runEnded(on.url, cell.adminKey, r.body.run_id);
  if (end.outcome !== 'completed') throw new Error(`${end.outcome} ${end.reason ?? ''}`);
};
// --warm N: N runs (K at once) before anything is measured, so that the cell's hot path is compiled.
for (let i = 0; i < Number(arg('--warm', '0')); i++) await Promise.all(Array.from({ length: conc }, one));
const statements = server !== null && process.argv.includes('--statements');
const setLog = async (v: string) => {
  await adminQuery(server!.url, `ALTER SYSTEM SET log_statement = '${v}'`);
  await adminQuery(server!.url, 'SELECT pg_reload_conf()');
};
const logFrom = statements ? statSync(join(server!.dir, 'server.log')).size : 0;
if (statements) await setLog('all');
/** CPU seconds (user + system) of a process, from /proc (clock ticks of 10 ms). */
const cpuOf = (pid: number): number => {
  try {
    return cpuSeconds(pid);
  } catch {
    return 0;
  }
};
/** CPU seconds of the PostgreSQL server: the postmaster and its children. */
const pgCpu = (): number => (server ? pgServerCpuSeconds(join(server.dir, 'data')) : 0);
const cellPid = cell.proc.pid!;
const pids = cells.map((c) => c.proc.pid!);
const cellsCpu = (): number[] => pids.map(cpuOf);
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
/** Rollbacks and commits of the cells' database so far. */
const dbStat = async (): Promise<{ rollback: number; commit: number }> => {
  if (!db) return { rollback: 0, commit: 0 };
  const r = await adminQuery(
    server!.url,
    `SELECT xact_rollback AS r, xact_commit AS c FROM pg_stat_database WHERE datname = '${new URL(db.url).pathname.slice(1)}'`,
  );
  return { rollback: Number(r.rows[0].r), commit: Number(r.rows[0].c) };
};
/** Each table's inserted, updated (HOT apart), deleted and dead rows so far (--table-stats). */
async function tableCounts(): Promise<
  Map<string, { ins: number; upd: number; hot: number; del: number; dead: number; seq: number; idx: number }>
> {
  const r = await adminQuery(
    db!.url,
    'SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del, n_dead_tup, seq_scan, COALESCE(idx_scan, 0) AS idx_scan FROM pg_stat_user_tables ORDER BY relname',
  );
  return new Map(
    (r.rows as Record<string, string>[]).map((x) => [
      x['relname']!,
      {
        ins: Number(x['n_tup_ins']),
        upd: Number(x['n_tup_upd']),
        hot: Number(x['n_tup_hot_upd']),
        del: Number(x['n_tup_del']),
        dead: Number(x['n_dead_tup']),
        seq: Number(x['seq_scan']),
        idx: Number(x['idx_scan']),
      },
    ]),
  );
}
/** User and system CPU seconds of a process apart. */
const userSys = (pid: number): [number, number] => {
  const st = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
  return [Number(f[11]) / 100, Number(f[12]) / 100];
};
const us0 = userSys(cellPid);
/** CPU seconds of each thread of a process, by thread name. */
const threads = (pid: number): Map<string, number> => {
  const out = new Map<string, number>();
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    try {
      const st = readFileSync(`/proc/${pid}/task/${t}/stat`, 'utf8');
      const name = st.slice(st.indexOf('(') + 1, st.lastIndexOf(')'));
      const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
      out.set(`${name}#${t}`, (Number(f[11]) + Number(f[12])) / 100);
    } catch {
      // ended meanwhile
    }
  }
  return out;
};
const th0 = threads(cellPid);
// The cell's background work (heartbeats, sweeps, folds) over 5 idle seconds, to tell it from the steps' own.
const i0 = { cell: sum(cellsCpu()), pg: pgCpu() };
await new Promise((r) => setTimeout(r, 5000));
const idle = { cell: (sum(cellsCpu()) - i0.cell) / 5, pg: (pgCpu() - i0.pg) / 5 };
const each0 = cellsCpu();
const st0 = await dbStat();
const c0 = { cell: sum(each0), pg: pgCpu(), bench: process.cpuUsage() };
const x0 = db ? Number((await adminQuery(db.url, 'SELECT txid_current() AS x')).rows[0].x) : 0;
if (statementTimes) await adminQuery(server!.url, 'SELECT pg_stat_statements_reset()');
const tables0 = tableStats ? await tableCounts() : null;
if (!process.argv.includes('--no-prof')) for (const pid of pids) process.kill(pid, 'SIGUSR2');
const t0 = performance.now();
for (let i = 0; i < runs; i++) await Promise.all(Array.from({ length: conc }, one));
const ms = performance.now() - t0;
const benchCpu = process.cpuUsage(c0.bench);
const us1 = userSys(cellPid);
const th1 = threads(cellPid);
const each1 = cellsCpu();
const cpu = { cell: sum(each1) - c0.cell, pg: pgCpu() - c0.pg, bench: (benchCpu.user + benchCpu.system) / 1e6 };
const st1 = await dbStat();
const x1 = db ? Number((await adminQuery(db.url, 'SELECT txid_current() AS x')).rows[0].x) : 0;
if (tables0) {
  // A backend reports its counts at most once a second: wait that out before reading them.
  await new Promise((r) => setTimeout(r, 1500));
  const tables1 = await tableCounts();
  const steps = runs * conc * 20;
  console.log(
    'table writes (pg_stat_user_tables): a step inserted, updated (of which HOT), deleted, scans sequential and by index; dead rows at the end',
  );
  for (const [name, t] of tables1) {
    const b = tables0.get(name) ?? { ins: 0, upd: 0, hot: 0, del: 0, dead: 0, seq: 0, idx: 0 };
    const d = { ins: t.ins - b.ins, upd: t.upd - b.upd, hot: t.hot - b.hot, del: t.del - b.del, seq: t.seq - b.seq, idx: t.idx - b.idx };
    if (d.ins + d.upd + d.del === 0) continue;
    const f = (n: number) => (n / steps).toFixed(2).padStart(6);
    console.log(
      `  ${name.padEnd(28)} ins ${f(d.ins)}  upd ${f(d.upd)} (HOT ${f(d.hot)})  del ${f(d.del)}  scans: seq ${f(d.seq)} index ${f(d.idx)}  dead ${t.dead}`,
    );
  }
}
if (statements) {
  await setLog('none');
  // Statements of the cell's connections only (the bench's own go through adminQuery to database postgres).
  const log = readFileSync(join(server!.dir, 'server.log'), 'utf8').slice(logFrom);
  const counts = new Map<string, number>();
  for (const m of log.matchAll(/LOG: {2}(?:statement|execute [^:]*): ([^\n]*)/g)) {
    const k = m[1]!.replace(/\s+/g, ' ').slice(0, Number(process.env.STMT_WIDTH ?? 120));
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  const steps = runs * conc * 20;
  let total = 0;
  for (const [, n] of counts) total += n;
  console.log(`statements per step: ${(total / steps).toFixed(2)}`);
  for (const [k, n] of [...counts].sort((a, b) => b[1] - a[1]).slice(0, Number(process.env.STMT_TOP ?? 40)))
    console.log(`  ${(n / steps).toFixed(2)}  ${k}`);
}
if (statementTimes) {
  // The cells' statements only (the bench's own go to database postgres).
  const r = await adminQuery(
    server!.url,
    `SELECT s.calls AS calls, s.total_exec_time AS ms, s.query AS q FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
     WHERE d.datname = '${new URL(db!.url).pathname.slice(1)}' ORDER BY s.total_exec_time DESC LIMIT ${Number(process.env.STMT_TOP ?? 15)}`,
  );
  const steps = runs * conc * 20;
  console.log('statement times (pg_stat_statements): calls a step, µs a call, µs a step');
  for (const x of r.rows as { calls: string; ms: number; q: string }[]) {
    const calls = Number(x.calls);
    const q = x.q.replace(/\s+/g, ' ').slice(0, Number(process.env.STMT_WIDTH ?? 100));
    console.log(
      `  ${(calls / steps).toFixed(2)}  ${((x.ms * 1000) / calls).toFixed(1).padStart(7)}  ${((x.ms * 1000) / steps).toFixed(1).padStart(6)}  ${q}`,
    );
  }
}
console.log(
  `${runs * conc * 20} steps in ${ms.toFixed(0)} ms: ${((runs * conc * 20) / (ms / 1000)).toFixed(1)} steps/s; tx/step ${((x1 - x0 - 1) / (runs * conc * 20)).toFixed(2)}`,
);
const perStep = (sec: number) => `${((sec * 1e6) / (runs * conc * 20)).toFixed(0)} µs`;
if (db)
  console.log(
    `rollbacks a step ${((st1.rollback - st0.rollback) / (runs * conc * 20)).toFixed(3)} (${st1.rollback - st0.rollback}); commits a step ${((st1.commit - st0.commit) / (runs * conc * 20)).toFixed(2)}`,
  );
if (cells.length > 1) console.log(`CPU a step by cell: ${each1.map((v, i) => perStep(v - each0[i]!)).join(', ')}`);
console.log(
  `CPU a step: cell${cells.length > 1 ? 's' : ''} ${perStep(cpu.cell)}, PostgreSQL ${perStep(cpu.pg)}, model server + client ${perStep(cpu.bench)}`,
);
if (process.env['THREADS'])
  for (const [k, v] of th1) if (v - (th0.get(k) ?? 0) > 0) console.log(`  thread ${k}: ${perStep(v - (th0.get(k) ?? 0))}`);
console.log(`cell: user ${perStep(us1[0] - us0[0])}, system ${perStep(us1[1] - us0[1])} a step (idle included)`);
console.log(
  `idle CPU a second: cell ${(idle.cell * 1e3).toFixed(0)} ms, PostgreSQL ${(idle.pg * 1e3).toFixed(0)} ms; a step without it: cell ${perStep(cpu.cell - (idle.cell * ms) / 1000)}, PostgreSQL ${perStep(cpu.pg - (idle.pg * ms) / 1000)}`,
);
for (const c of cells) {
  await c.kill('SIGTERM');
  c.cleanup();
}
await ai.close();
await db?.drop();
await server?.stop();
