/**
 * The cell beside the systems a user would pick instead (issue 21), on one
 * machine, one PostgreSQL server (scripts/pg-test-server.sh, fsync on) and
 * one fake OpenAI-compatible model server that answers at once, in
 * alternating rounds (the first system of a round alternates too):
 *
 * | row | cell | peer |
 * |---|---|---|
 * | 20-step durable workflow on PostgreSQL, 1 run and 16 at once | crew of 20 sequential seats, one cell on PostgreSQL | DBOS Transact workflow of 20 steps |
 * | 20-node sequential agent graph, 1 run | the same crew, embedded store | LangGraph + PostgresSaver |
 * | the same, 16 runs at once | the same crew, embedded store | LangGraph + MemorySaver |
 * | 3 cells vs 1 cell on PostgreSQL, 16 runs at once | runs spread over 3 cells | all on 1 cell |
 *
 * A step is a model call (one seat, one workflow step, one graph node), the
 * same request from each side (the seats' tools and max_tokens: the peers ask
 * what the cell's first request asked). Every system is warmed up alike
 * before the rows (`warm`). Each
 * system runs in a process of its own (the cell: dist/cell.mjs; the peers:
 * bench/peers/peer.mjs, installed by `npm ci --prefix bench/peers`, which
 * `make bench` and `make bench-peers` run). The PostgreSQL rows also give the
 * server's write transactions per step (txid_current), heartbeats included.
 *
 *   node --import tsx bench/peers.bench.ts [--short] [--only dbos|langgraph|group]     (or: make bench-peers)
 *
 * `--short`: 2 rounds a row instead of 5; `--only`: the rows of one peer.
 *
 * On a 2-core machine shared with the server, the model server and the bench,
 * these are ratios of one run, not capacities.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { startOpenAIServer, type FakeOpenAI } from '../test/fixtures/openai-server.ts';
import type { CellProcess } from '../test/helpers/cell-process.ts';
import { adminQuery, pgDatabase, pgUnavailable, startPgServer } from '../test/helpers/postgres.ts';
import { provider, team, T, type Api } from '../test/helpers/teams.ts';
import { cpuSeconds, fmt, pgServerCpuSeconds, runEnded, startBenchCell } from './_util.ts';

const PEERS_DIR = join(import.meta.dirname, 'peers');
const STEPS = 20;
const MANY = 16;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function call(base: string, token: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const r = await request(base + path, {
    method: method as 'GET',
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await r.body.text();
  return { status: r.statusCode, body: text ? JSON.parse(text) : undefined };
}

const httpApi = (base: string, token: string): Api => ({
  token,
  request: async (method, path, opts = {}) => {
    const r = await call(base, opts.token ?? token, method, path, opts.body);
    return { ...r, text: JSON.stringify(r.body ?? null) };
  },
});

/** A peer process (peer.mjs): `run(n)` starts n runs at once and resolves with the wall time, ms. */
class Peer {
  readonly #proc: ChildProcess;
  readonly #lines: AsyncIterator<string>;
  private constructor(proc: ChildProcess) {
    this.#proc = proc;
    this.#lines = createInterface({ input: proc.stdout! })[Symbol.asyncIterator]();
  }
  /** The peer's process id (its CPU time is read around each measurement). */
  get pid(): number {
    return this.#proc.pid!;
  }
  static async start(args: string[]): Promise<Peer> {
    const p = new Peer(spawn(process.execPath, [join(PEERS_DIR, 'peer.mjs'), ...args], { stdio: ['pipe', 'pipe', 'inherit'] }));
    const first = await p.#line();
    if (first !== 'ready') throw new Error(`peer ${args[0]} did not start: ${first}`);
    return p;
  }
  async #line(): Promise<string> {
    const r = await this.#lines.next();
    if (r.done) throw new Error('peer process ended');
    return r.value;
  }
  async run(n: number, saver = 'postgres'): Promise<number> {
    this.#proc.stdin!.write(`run ${n} ${saver}\n`);
    const line = await this.#line();
    const m = /^done ([\d.]+)$/.exec(line);
    if (!m) throw new Error(`peer: ${line}`);
    return Number(m[1]);
  }
  async stop(): Promise<void> {
    if (this.#proc.exitCode !== null) return;
    const exited = new Promise<void>((r) => this.#proc.once('exit', () => r()));
    this.#proc.stdin!.write('quit\n');
    await Promise.race([exited, sleep(5000).then(() => this.#proc.kill('SIGKILL'))]);
  }
}

interface CellSide {
  cells: CellProcess[];
  token: string;
  crew: string;
}

/** Launches answered 503 retryable and sent again (printed at the end). */
let launchRetries = 0;
/** Crew runs that ended other than completed, by state and reason (printed at the end). */
const failedRuns = new Map<string, number>();

/** `n` crew runs at once spread over `side`'s cells; the wall time until every one completed, ms. */
async function cellRuns(side: CellSide, n: number): Promise<number> {
  const t0 = performance.now();
  const runs = await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const cell = side.cells[i % side.cells.length]!;
      let r = await call(cell.url, side.token, 'POST', `${T}/crews/${side.crew}/runs`, { input: 'go' });
      // A 503 that says it is retryable (a write that kept conflicting) is retried, as a client would; counted.
      for (let tries = 0; r.status === 503 && r.body?.retryable === true && tries < 20; tries++) {
        launchRetries++;
        await sleep(50 + Math.random() * 100);
        r = await call(cell.url, side.token, 'POST', `${T}/crews/${side.crew}/runs`, { input: 'go' });
      }
      if (r.status !== 201) throw new Error(`launch: ${r.status} ${JSON.stringify(r.body)}`);
      return { id: r.body.run_id as string, cell };
    }),
  );
  // Each run awaited on its event stream, as a client of the cell would (the peers await in process).
  let failed = 0;
  await Promise.all(
    runs.map(async (r) => {
      const end = await runEnded(r.cell.url, side.token, r.id);
      if (end.outcome === 'completed') return;
      // Reported, not fatal: a failed run is a finding of the row (its steps are not counted).
      const why = `${end.outcome} ${end.reason ?? ''}`.trim();
      failedRuns.set(why, (failedRuns.get(why) ?? 0) + 1);
      failed++;
    }),
  );
  const ms = performance.now() - t0;
  // Steps/s of the runs that completed: the wall time stretched to what all of them would have taken.
  return failed === n ? Infinity : (ms * n) / (n - failed);
}

async function crewOn(cell: CellProcess, ai: FakeOpenAI): Promise<CellSide> {
  const api = httpApi(cell.url, cell.adminKey);
  await provider(api, ai);
  const tm = await team(
    api,
    'sequential',
    Array.from({ length: STEPS }, (_, i) => ({ role: `s${i}` })),
  );
  return { cells: [cell], token: cell.adminKey, crew: tm.crew };
}

/** The server's transaction id counter: it moves only for transactions that write. */
async function txid(url: string): Promise<number> {
  return Number((await adminQuery(url, 'SELECT txid_current() AS x')).rows[0].x);
}

interface Row {
  name: string;
  peer: string;
  runs: number;
  cell: () => Promise<number>;
  other: () => Promise<number>;
  /** A database URL whose server's txid counter is read around each measurement (write transactions per step). */
  txUrl?: string;
  /** The processes each side runs in, whose CPU time is read around each measurement. */
  cellPids: number[];
  otherPids: number[];
}

/** The PostgreSQL server's data directory, for its CPU time (set once it is started). */
let pgDataDir: string | null = null;

/** CPU seconds so far: of `pids`, of the PostgreSQL server, of this process (the fake model server and the clients). */
function cpuNow(pids: number[]): { proc: number; pg: number; bench: number } {
  const u = process.cpuUsage();
  return {
    proc: pids.reduce((a, pid) => a + cpuSeconds(pid), 0),
    pg: pgDataDir ? pgServerCpuSeconds(pgDataDir) : 0,
    bench: (u.user + u.system) / 1e6,
  };
}

/** Whether `--only` (absent: every row) asks for the rows of `group`. */
function wanted(group: 'dbos' | 'langgraph' | 'group'): boolean {
  const only = process.argv.indexOf('--only');
  return only < 0 || process.argv[only + 1] === group;
}

/**
 * Before the rows, each system runs WARM rounds of MANY runs at once and one run: a process's hot path is
 * compiled by then. Measured cold, after two runs, a cell spent ~1.6× its warm CPU a step at 1 run (its
 * steps' code still interpreted or being compiled, on V8's helper threads too: bench/RESULTS.md stop 30),
 * which the peers' smaller processes pay less of.
 */
const WARM = 3;
async function warm(one: () => Promise<unknown>, many: () => Promise<unknown>): Promise<void> {
  for (let i = 0; i < WARM; i++) {
    await many();
    await one();
  }
}

/**
 * The 1-run rows run ONE_BY_ONE runs a round, one after another (each alone): 200 steps a round rather
 * than 20, so that a round's CPU time (read in 10 ms ticks) and throughput are more than a few ticks' worth.
 */
const ONE_BY_ONE = 10;
/** The wall time of `n` runs one after another, ms (each `one` resolving with its own). */
async function oneByOne(one: () => Promise<number>, n = ONE_BY_ONE): Promise<number> {
  let ms = 0;
  for (let i = 0; i < n; i++) ms += await one();
  return ms;
}

/** A busy machine starts a cell slowly. */
const START_MS = 120_000;

async function measure(row: Row, rounds: number): Promise<void> {
  const group = row.peer === '1 cell' ? 'group' : row.peer.startsWith('DBOS') ? 'dbos' : 'langgraph';
  if (!wanted(group)) return;
  const cell: number[] = [];
  const other: number[] = [];
  const cellTx: number[] = [];
  const otherTx: number[] = [];
  // CPU time a step costs, summed over the rounds: the side's processes, PostgreSQL, this process.
  const cellCpu = { proc: 0, pg: 0, bench: 0 };
  const otherCpu = { proc: 0, pg: 0, bench: 0 };
  const one = async (fn: () => Promise<number>, out: number[], tx: number[], pids: number[], cpu: typeof cellCpu) => {
    const x0 = row.txUrl ? await txid(row.txUrl) : 0;
    const c0 = cpuNow(pids);
    const ms = await fn();
    const c1 = cpuNow(pids);
    for (const k of ['proc', 'pg', 'bench'] as const) cpu[k] += c1[k] - c0[k];
    if (row.txUrl) tx.push(((await txid(row.txUrl)) - x0 - 1) / (row.runs * STEPS));
    out.push((row.runs * STEPS) / (ms / 1000));
  };
  const cellOne = () => one(row.cell, cell, cellTx, row.cellPids, cellCpu);
  const otherOne = () => one(row.other, other, otherTx, row.otherPids, otherCpu);
  for (let r = 0; r < rounds; r++) {
    if (r % 2 === 0) {
      await cellOne();
      await otherOne();
    } else {
      await otherOne();
      await cellOne();
    }
  }
  const perStep = (x: typeof cellCpu) => {
    const us = (sec: number) => fmt((sec * 1e6) / (rounds * row.runs * STEPS));
    return `${us(x.proc)}${pgDataDir ? ` + PostgreSQL ${us(x.pg)}` : ''} + model server and client ${us(x.bench)}`;
  };
  const c = median(cell);
  const o = median(other);
  const tx = row.txUrl ? `  (write transactions per step: cell ${fmt(median(cellTx), 1)}, ${row.peer} ${fmt(median(otherTx), 1)})` : '';
  console.log(
    `  | ${row.name} | ${row.peer} ${fmt(o)} steps/s | cell ${fmt(c)} steps/s | **${fmt(c / o, 2)}** |${tx}  [rounds: cell ${cell.map((x) => fmt(x)).join('/')}, ${row.peer} ${other.map((x) => fmt(x)).join('/')}]`,
  );
  console.log(`      CPU a step, µs: cell ${perStep(cellCpu)}; ${row.peer} ${perStep(otherCpu)}`);
}

export default async function main(): Promise<void> {
  const short = process.argv.includes('--short') || process.env['BENCH_SHORT'] === '1';
  const why = pgUnavailable();
  if (why) {
    console.log(`  skipped: ${why}`);
    return;
  }
  if (
    !existsSync(join(PEERS_DIR, 'node_modules', '@dbos-inc', 'dbos-sdk')) ||
    !existsSync(join(PEERS_DIR, 'node_modules', '@langchain', 'langgraph'))
  ) {
    console.log('  skipped: the peers are not installed (npm ci --prefix bench/peers; make bench does it)');
    return;
  }
  const rounds = short ? 2 : 5;
  console.log(
    `  ${short ? 'short mode, ' : ''}${rounds} alternating rounds a row; load average before: ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}`,
  );
  const keyDir = mkdtempSync(join(tmpdir(), 'bench-peers-'));
  const keyFile = join(keyDir, 'secrets.key');
  writeFileSync(keyFile, randomBytes(32), { mode: 0o600 });
  const server = await startPgServer({ durable: true });
  pgDataDir = join(server.dir, 'data');
  // What a seat asks besides its messages (its tools, max_tokens), kept from the cell's first request: the
  // peers ask the same (peer.mjs), so the model server parses the same request from each side.
  let cellAsk: Record<string, unknown> | null = null;
  const ai = await startOpenAIServer({
    apiKey: 'sk-fake',
    // No request kept: the server would hold every body, and collect more garbage the longer the bench ran.
    record: false,
    respond: (req) => {
      if (cellAsk === null && /^ROLE:s\d+$/.test(req.messages[0]?.content ?? '')) {
        const { model: _m, messages: _ms, ...rest } = req;
        cellAsk = rest;
      }
      return { content: 'ok', usage: { prompt_tokens: 3, completion_tokens: 2 } };
    },
  });
  const dbCell = await pgDatabase(server.url);
  const dbDbos = await pgDatabase(server.url);
  const dbGraph = await pgDatabase(server.url);
  const cells: CellProcess[] = [];
  const peers: Peer[] = [];
  const pgCell = async (id: string) => {
    const c = await startBenchCell({ timeoutMs: START_MS, group: { store: dbCell.url, cellId: id, secretsKeyFile: keyFile } });
    cells.push(c);
    return c;
  };
  try {
    const a = await pgCell('cell-a');
    const onPg = await crewOn(a, ai);
    const embedded = wanted('langgraph') ? await startBenchCell({ timeoutMs: START_MS }) : null;
    if (embedded) cells.push(embedded);
    const onEmbedded = embedded ? await crewOn(embedded, ai) : onPg;
    // Warm-up: every system the same, before the rows (the cells first: their first request says what the peers ask).
    await warm(
      () => cellRuns(onPg, 1),
      () => cellRuns(onPg, MANY),
    );
    if (embedded)
      await warm(
        () => cellRuns(onEmbedded, 1),
        () => cellRuns(onEmbedded, MANY),
      );
    if (cellAsk === null) throw new Error('the cell asked the model server nothing');
    const askFile = join(keyDir, 'ask.json');
    writeFileSync(askFile, JSON.stringify(cellAsk));
    const dbos = wanted('dbos') ? await Peer.start(['dbos', ai.url, String(STEPS), dbDbos.url, askFile]) : null;
    if (dbos) peers.push(dbos);
    const graph = wanted('langgraph') ? await Peer.start(['langgraph', ai.url, String(STEPS), dbGraph.url, askFile]) : null;
    if (graph) peers.push(graph);
    if (dbos)
      await warm(
        () => dbos.run(1),
        () => dbos.run(MANY),
      );
    if (graph) {
      await warm(
        () => graph.run(1, 'postgres'),
        () => graph.run(MANY, 'postgres'),
      );
      await warm(
        () => graph.run(1, 'memory'),
        () => graph.run(MANY, 'memory'),
      );
    }

    console.log('  | workload | peer | cell | cell / peer |');
    console.log('  |---|---|---|---|');
    await measure(
      {
        name: `${STEPS}-step durable workflow on PostgreSQL, 1 run (${ONE_BY_ONE} one after another a round)`,
        peer: 'DBOS',
        runs: ONE_BY_ONE,
        cell: () => oneByOne(() => cellRuns(onPg, 1)),
        other: () => oneByOne(() => dbos!.run(1)),
        txUrl: dbCell.url,
        cellPids: [a.proc.pid!],
        otherPids: dbos ? [dbos.pid] : [],
      },
      rounds,
    );
    await measure(
      {
        name: `the same, ${MANY} runs at once`,
        peer: 'DBOS',
        runs: MANY,
        cell: () => cellRuns(onPg, MANY),
        other: () => dbos!.run(MANY),
        txUrl: dbCell.url,
        cellPids: [a.proc.pid!],
        otherPids: dbos ? [dbos.pid] : [],
      },
      rounds,
    );
    await measure(
      {
        name: `${STEPS}-node sequential agent graph, 1 run (${ONE_BY_ONE} one after another a round), embedded store`,
        peer: 'LangGraph+PostgresSaver',
        runs: ONE_BY_ONE,
        cell: () => oneByOne(() => cellRuns(onEmbedded, 1)),
        other: () => oneByOne(() => graph!.run(1, 'postgres')),
        cellPids: embedded ? [embedded.proc.pid!] : [],
        otherPids: graph ? [graph.pid] : [],
      },
      rounds,
    );
    await measure(
      {
        name: `the same, ${MANY} runs at once`,
        peer: 'LangGraph+MemorySaver',
        runs: MANY,
        cell: () => cellRuns(onEmbedded, MANY),
        other: () => graph!.run(MANY, 'memory'),
        cellPids: embedded ? [embedded.proc.pid!] : [],
        otherPids: graph ? [graph.pid] : [],
      },
      rounds,
    );
    // The group: two more cells on the same database, the same crew.
    if (wanted('group')) {
      const b = await pgCell('cell-b');
      const c = await pgCell('cell-c');
      const group: CellSide = { ...onPg, cells: [a, b, c] };
      await warm(
        () => cellRuns(group, 3),
        () => cellRuns(group, MANY),
      );
      await measure(
        {
          name: `${MANY} crew runs at once on PostgreSQL, 3 cells vs 1`,
          peer: '1 cell',
          runs: MANY,
          cell: () => cellRuns(group, MANY),
          other: () => cellRuns(onPg, MANY),
          txUrl: dbCell.url,
          cellPids: [a, b, c].map((x) => x.proc.pid!),
          otherPids: [a.proc.pid!],
        },
        rounds,
      );
    }
    console.log(`  launches answered 503 (retryable) and sent again: ${launchRetries}`);
    console.log(`  cell runs that did not complete: ${failedRuns.size ? JSON.stringify(Object.fromEntries(failedRuns)) : 'none'}`);
    console.log(
      `  load average after: ${loadavg()
        .map((x) => x.toFixed(2))
        .join(' ')}`,
    );
  } finally {
    for (const p of peers) await p.stop().catch(() => undefined);
    for (const c of cells) {
      await c.kill('SIGKILL').catch(() => undefined);
      c.cleanup();
    }
    await ai.close();
    for (const d of [dbCell, dbDbos, dbGraph]) await d.drop().catch(() => undefined);
    await server.stop();
    rmSync(keyDir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
