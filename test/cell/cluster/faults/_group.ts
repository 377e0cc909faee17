/**
 * The fault suite's group, workload and checker (docs/multi-cell.md, "Under
 * faults"). Each scenario file starts three real cell processes on a database
 * of its own: on a PostgreSQL server of its own when the scenario crashes it
 * (`ownServer`), else on the run's server (CELL_TEST_PG_URL, which `make test`
 * starts once; a server of the file's own when unset), a fake model server
 * counting calls, and a bounded workload: 2–3 clients sending compute, SQL and
 * 3-step crew jobs to random cells, and a definition firing every second.
 * The scenario injects its fault; `check` then waits for every acknowledged
 * id and asserts what the group promises:
 * - 0 lost: every acknowledged run completes;
 * - every journal verifies against the group's published keys, seqs contiguous;
 * - model calls: 3 per crew run, plus at most one flagged re-issue per run,
 *   and none unless the scenario lost a driver;
 * - SQL effects exactly once: each SQL run executed its statement in one step record;
 * - each cron second fired exactly once (no gap, no duplicate), on time
 *   outside the fault and within the bound after recovery;
 * - every refusal a 503 envelope (`service_unavailable`), never a 500 or a 4xx;
 * - every cell alive (and ready) at the end.
 * `faultScenario` is the preamble the workload scenarios share (start, warm-up
 * on conditions, fault, check, report with each phase's time, stop).
 *
 * Needs `node scripts/build.mjs` and PostgreSQL 15 (test/helpers/postgres.ts);
 * `faketime` for the clock scenario (`make faketime-deps`).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { verifyJournal } from '../../../../core/journal/verify.ts';
import type { JournalRecord } from '../../../../core/journal/record.ts';
import { startOpenAIServer, type FakeOpenAI } from '../../../fixtures/openai-server.ts';
import { startCellProcess, type CellProcess } from '../../../helpers/cell-process.ts';
import { call } from '../../../helpers/group.ts';
import {
  adminQuery,
  pgDatabase,
  pgServerUrl,
  pgUnavailable,
  startPgServer,
  type PgDatabase,
  type PgServer,
  workspaceDb,
} from '../../../helpers/postgres.ts';
import { provider, team, T, type Api } from '../../../helpers/teams.ts';

export const SKIP = pgUnavailable() ?? false;
export const FAKETIME_LIB = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';
const DEFS = '/api/public/v1/admin/jobs/definitions';
const JOB_RUNS = '/api/public/v1/admin/jobs/runs';
const CELL_IDS = ['cell-a', 'cell-b', 'cell-c'];
const TERMINAL = ['completed', 'failed', 'refused', 'cancelled'];
/** Seconds the definition fires at least before it is judged. */
const MIN_FIRES = 5;

export interface GroupOptions {
  /** Default 500 ms and 2 s, the product's: shorter leases make a busy CI machine lose leases with no fault. */
  heartbeatMs?: number;
  leaseMs?: number;
  /** Extra environment of cell i (libfaketime). */
  env?: (i: number) => Record<string, string>;
  /** Extra flags of cell i. */
  args?: (i: number) => string[];
  /** False: no definition firing every second (the focused tests). */
  cron?: boolean;
  /** True: a PostgreSQL server of the scenario's own (it stops or crashes it); else the run's, a database each. */
  ownServer?: boolean;
}

export interface FaultGroup {
  /** How long the server (if its own), the database, the three cells and the fixtures took to start, ms. */
  startMs: number;
  /** The scenario's own server (`ownServer`), to crash; undefined on the run's shared one. */
  server: PgServer | undefined;
  db: PgDatabase;
  ai: FakeOpenAI;
  cells: CellProcess[];
  token: string;
  crew: string;
  scheduleId: string;
  heartbeatMs: number;
  leaseMs: number;
  /** The group's secrets key file, which every member is given. */
  secretsKeyFile: string;
  /** Starts cell i again on its data directory (after a kill). */
  restart(i: number): Promise<CellProcess>;
  /** A cell that answers (not the ones the scenario took down), for reads. */
  reader(): CellProcess;
  /** Cells the scenario left down on purpose (not expected alive at the end). */
  down: Set<number>;
  stop(): Promise<void>;
}

function apiOf(base: string, token: string): Api {
  return { token, request: (method, path, opts = {}) => call(base, method, path, { token: opts.token ?? token, body: opts.body }) };
}

export async function until<T>(what: string, fn: () => Promise<T | undefined | null | false>, ms: number): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export async function startFaultGroup(opts: GroupOptions = {}): Promise<FaultGroup> {
  const heartbeatMs = opts.heartbeatMs ?? 500;
  const leaseMs = opts.leaseMs ?? 2000;
  const t0 = Date.now();
  const server = opts.ownServer ? await startPgServer() : undefined;
  const db = await pgDatabase(server?.url ?? (await pgServerUrl()));
  // Each answer takes a moment, so runs are in flight when the fault lands.
  const ai = await startOpenAIServer({
    apiKey: 'sk-fake',
    respond: () => ({ content: 'ok', delayMs: 100, usage: { prompt_tokens: 3, completion_tokens: 2 } }),
  });
  const keyDir = mkdtempSync(join(tmpdir(), 'fault-key-'));
  writeFileSync(join(keyDir, 'secrets.key'), randomBytes(32), { mode: 0o600 });
  const argsOf = (i: number) => [
    '--store',
    db.url,
    '--cell-id',
    CELL_IDS[i]!,
    '--posture',
    'multi-cell',
    '--secrets-key-file',
    join(keyDir, 'secrets.key'),
    '--heartbeat-ms',
    String(heartbeatMs),
    '--lease-ms',
    String(leaseMs),
    '--schedule-min-interval',
    '1',
    '--rate-capacity',
    '100000',
    '--rate-refill',
    '10000',
    ...(opts.args?.(i) ?? []),
  ];
  const cells: CellProcess[] = [];
  const stopAll = async () => {
    // CELL_FAULTS_LOGS=<dir>: each cell's whole log is kept there (the failure message shows only its warnings).
    const keep = process.env['CELL_FAULTS_LOGS'];
    if (keep) for (const [i, c] of cells.entries()) writeFileSync(join(keep, `${CELL_IDS[i]}.log`), c.output());
    for (const c of cells) {
      try {
        if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill('SIGCONT');
      } catch {
        // already gone
      }
      await c.kill('SIGKILL');
      c.cleanup();
    }
    await ai.close();
    await db.drop().catch(() => undefined);
    await server?.stop();
    rmSync(keyDir, { recursive: true, force: true });
  };
  try {
    // Generous start-up waits: on a loaded machine a cell's start (migrations on a new database) took over 20 s.
    cells.push(await startCellProcess({ args: argsOf(0), env: opts.env?.(0) ?? {}, timeoutMs: 60_000 }));
    cells.push(
      ...(await Promise.all([1, 2].map((i) => startCellProcess({ args: argsOf(i), env: opts.env?.(i) ?? {}, timeoutMs: 60_000 })))),
    );
    const token = cells[0]!.adminKey;
    const api = apiOf(cells[0]!.url, token);
    await provider(api, ai);
    const tm = await team(api, 'sequential', [{ role: 's1' }, { role: 's2' }, { role: 's3' }]);
    const def =
      opts.cron === false
        ? { status: 201, text: '', body: { schedule_id: '' } }
        : await call(cells[0]!.url, 'POST', DEFS, {
            token,
            body: { name: 'every-second', job_type: 'compute', workspace_id: 'cron', spec: { code: 'return 1' }, cron: '* * * * * *' },
          });
    assert.equal(def.status, 201, def.text);
    const down = new Set<number>();
    const g: FaultGroup = {
      startMs: Date.now() - t0,
      server,
      db,
      ai,
      cells,
      token,
      crew: tm.crew,
      scheduleId: def.body.schedule_id,
      heartbeatMs,
      leaseMs,
      secretsKeyFile: join(keyDir, 'secrets.key'),
      down,
      async restart(i) {
        const c = await startCellProcess({ dataDir: cells[i]!.dataDir, args: argsOf(i), env: opts.env?.(i) ?? {}, timeoutMs: 60_000 });
        cells[i] = c;
        down.delete(i);
        return c;
      },
      reader() {
        const i = cells.findIndex((_, k) => !down.has(k));
        return cells[i]!;
      },
      stop: stopAll,
    };
    return g;
  } catch (e) {
    await stopAll();
    throw e;
  }
}

export interface Acked {
  id: string;
  kind: 'compute' | 'sql' | 'crew';
  cell: string;
  at: number;
  /** The SQL run's row (its id in its workspace's `effects` table) and workspace. */
  marker: string;
  workspace: string;
}

export interface Answer {
  at: number;
  cell: string;
  status: number;
  error?: string;
  /** `details.reason` of a refusal (`commit_unknown`: the write may have been kept). */
  reason?: string;
  /** The request's marker (a crew run's input). */
  marker?: string;
  text: string;
}

export interface Workload {
  acked: Acked[];
  /** Every answer that was not an acknowledgement (non-2xx, or no answer at all: status 0). */
  refusals: Answer[];
  stop(): Promise<void>;
}

/**
 * How long a client waits for an answer before it counts the request as unanswered, ms. A write whose
 * connection was cut during its COMMIT asks the server whether it committed for up to 15 s before it
 * answers (503 `commit_unknown`, docs/storage.md); the rest is room for a loaded machine.
 */
const ANSWER_MS = 25_000;

/** `clients` clients, each sending one job at a time to a random cell, until stopped. */
export function startWorkload(g: FaultGroup, clients = 2): Workload {
  const acked: Acked[] = [];
  const refusals: Answer[] = [];
  let stop = false;
  let n = 0;
  const one = async (client: number) => {
    const k = Math.floor(Math.random() * g.cells.length);
    const cell = g.cells[k]!;
    const kind = (['compute', 'sql', 'crew'] as const)[n++ % 3]!;
    const marker = `m${client}x${n}`;
    const [path, body] =
      kind === 'crew'
        ? [`${T}/crews/${g.crew}/runs`, { input: marker }]
        : kind === 'sql'
          ? [
              JOB_RUNS,
              {
                job_type: 'sql',
                workspace_id: `ws${client}`,
                spec: {
                  statements: [
                    { sql: 'CREATE TABLE IF NOT EXISTS effects (id TEXT PRIMARY KEY)' },
                    { sql: `INSERT INTO effects (id) VALUES ('${marker}')` },
                  ],
                  time_limit_ms: 10_000,
                },
              },
            ]
          : // A generous time cap: a loaded machine must not fail the trivial code the faults are about.
            [JOB_RUNS, { job_type: 'compute', workspace_id: `ws${client}`, spec: { code: `return ${n}`, time_limit_ms: 10_000 } }];
    const at = Date.now();
    try {
      const r = await Promise.race([call(cell.url, 'POST', path, { token: g.token, body }), sleep(ANSWER_MS).then(() => null)]);
      if (r === null) refusals.push({ at, cell: CELL_IDS[k]!, status: 0, marker, text: `no answer in ${ANSWER_MS} ms` });
      else if (r.status >= 200 && r.status < 300)
        acked.push({ id: String(r.body.run_id), kind, cell: CELL_IDS[k]!, at, marker, workspace: `ws${client}` });
      else
        refusals.push({
          at,
          cell: CELL_IDS[k]!,
          status: r.status,
          error: r.body?.error,
          reason: r.body?.details?.reason,
          marker,
          text: r.text.slice(0, 300),
        });
    } catch (e) {
      refusals.push({ at, cell: CELL_IDS[k]!, status: 0, marker, text: String(e).slice(0, 200) });
    }
  };
  const done = Promise.all(
    Array.from({ length: clients }, async (_, client) => {
      while (!stop) {
        await one(client);
        await sleep(400 + Math.random() * 400);
      }
    }),
  );
  return {
    acked,
    refusals,
    stop: async () => {
      stop = true;
      await done;
    },
  };
}

/** The cell holding the most running leases now. */
export async function busiestDriver(g: FaultGroup): Promise<number> {
  const r = await adminQuery(
    g.db.url,
    "SELECT lease_owner, count(*) AS n FROM runs WHERE state = 'running' AND lease_owner IS NOT NULL GROUP BY lease_owner ORDER BY n DESC",
  );
  const owner = (r.rows[0] as { lease_owner: string } | undefined)?.lease_owner ?? 'cell-a';
  return Math.max(0, CELL_IDS.indexOf(owner));
}

export interface CheckOptions {
  /** The window of the fault (ms since the epoch): fires and refusals in it are judged by the fault's rules. */
  fault: { from: number; to: number };
  /** True when the scenario lost a driver (a kill or a pause past the lease): flagged re-issues are allowed. */
  driverLost: boolean;
  /** Cells from which "no answer" is expected during the fault (killed or paused). */
  silent?: string[];
  /**
   * Each second fires within this long of its time outside the fault, and of the fault's end within it, ms.
   * The scenarios give 15 s: on the shared 2-core machine at a load of 20–25 a fire is a transaction of
   * 0.3–1 s, so a second that fell behind catches up slowly; seconds fell up to ~10 s behind with no
   * fault, and ~9 s after a driver's loss while the survivors took its runs over (docs/multi-cell.md
   * "Under faults"). Exactly once, in order and never early hold whatever the load.
   */
  recoveryBoundMs: number;
  /** Cells that must report not-ready at the end, with this readiness check failing (the clock scenario). */
  notReady?: Record<string, string>;
  /** How long to wait for every run, ms. */
  drainMs?: number;
}

export interface Figures {
  acked: number;
  refusals: number;
  crewRuns: number;
  reissued: number;
  modelCalls: number;
  fires: number;
  maxLateMs: number;
  /** How long after the fault's end the last acknowledged run finished. */
  drainedMs: number;
  /** How long the check waited for a second after the fault to fire, ms. */
  fireWaitMs: number;
  /** How long the whole check took (the fire wait, the drain, journals, effects, fires, readiness), ms. */
  checkMs: number;
}

/** Waits for every acknowledged id and asserts the group's promises; returns the figures for the report. */
export async function check(g: FaultGroup, w: Workload, o: CheckOptions): Promise<Figures> {
  const reader = () => g.reader();
  const runs = new Map<string, any>();
  const checkStart = Date.now();
  if (g.scheduleId) {
    // The definition fires until a second after the fault has fired (the recovery is judged), then is
    // disabled: the seconds judged are the ones it was enabled for, and its runs (one a second) stop
    // adding load while the acknowledged ones drain.
    // And at least MIN_FIRES seconds in all, however short the scenario (the check below wants them).
    await until(
      'a second after the fault to fire',
      async () => {
        const r = await adminQuery(
          g.db.url,
          `SELECT count(*)::int AS n, max(fire_at) AS last FROM job_fires WHERE schedule_id = '${g.scheduleId}'`,
        );
        const row = r.rows[0] as { n: number; last: string | null };
        return Number(row.n) >= MIN_FIRES && Number(row.last ?? 0) >= o.fault.to + 1000;
      },
      o.recoveryBoundMs + 20_000,
    );
    const d = await call(reader().url, 'POST', `${DEFS}/${g.scheduleId}/disable`, { token: g.token });
    assert.equal(d.status, 200, d.text);
  }
  const drainStart = Date.now();
  const fireWaitMs = drainStart - checkStart;
  try {
    await until(
      'every acknowledged run to finish',
      async () => {
        for (const a of w.acked) {
          if (runs.has(a.id)) continue;
          const r = await call(reader().url, 'GET', `${JOB_RUNS}/${a.id}`, { token: g.token });
          if (r.status === 200 && TERMINAL.includes(r.body.state)) runs.set(a.id, r.body);
        }
        return runs.size === w.acked.length;
      },
      o.drainMs ?? 90_000,
    );
  } catch (e) {
    const open: string[] = [];
    for (const a of w.acked.filter((x) => !runs.has(x.id)).slice(0, 8)) {
      const r = await call(reader().url, 'GET', `${JOB_RUNS}/${a.id}`, { token: g.token }).catch(() => null);
      open.push(`${a.kind} ${a.id} on ${a.cell}: ${r?.body?.state} lease=${r?.body?.lease_owner ?? r?.body?.coordinator}`);
    }
    const ids = w.acked.filter((x) => !runs.has(x.id)).map((x) => x.id);
    const about = g.cells
      .map(
        (c, i) =>
          `--- ${CELL_IDS[i]}\n${c
            .output()
            .split('\n')
            .filter((l) => ids.some((id) => l.includes(id)))
            .slice(-8)
            .join('\n')}`,
      )
      .join('\n');
    const backends = await adminQuery(
      g.db.url,
      "SELECT application_name, state, wait_event_type, wait_event, now() - xact_start AS xact_age, left(query, 120) AS query FROM pg_stat_activity WHERE datname = current_database() AND state <> 'idle'",
    ).catch((err: unknown) => ({ rows: [{ error: String(err) }] }));
    const about2 = `${about}\n--- busy backends\n${backends.rows.map((r) => JSON.stringify(r)).join('\n')}`;
    throw new Error(`${(e as Error).message} (${ids.length} of ${w.acked.length} open)\n${open.join('\n')}\n${about2}\n${logs(g)}`);
  }
  const drainedMs = Date.now() - Math.max(drainStart, o.fault.to);
  const slow = w.acked
    .map((a) => ({ a, ms: Date.parse(runs.get(a.id).finished_at) - Date.parse(runs.get(a.id).created_at) }))
    .sort((x, y) => y.ms - x.ms)
    .slice(0, 3);
  console.log(`# slowest runs: ${slow.map((x) => `${x.a.kind} ${x.a.id} on ${x.a.cell} ${x.ms} ms`).join('; ')}`);

  // 0 lost: every acknowledged run completed.
  for (const a of w.acked) {
    const r = runs.get(a.id);
    assert.equal(r.state, 'completed', `${a.kind} ${a.id}: ${JSON.stringify({ state: r.state, error: r.error, flags: r.flags })}`);
  }

  // Every journal verifies (contiguous seqs, signatures against every member's keys); SQL applied in one step.
  const doc = (await (await fetch(`${reader().url}/.well-known/cell-keys.json`)).json()) as { keys: { kid: string; jwk: JsonWebKey }[] };
  const keys = new Map(doc.keys.map((k) => [k.kid, k.jwk]));
  let reissued = 0;
  for (const a of w.acked) {
    const j = await call(reader().url, 'GET', `${JOB_RUNS}/${a.id}/journal`, { token: g.token });
    assert.equal(j.status, 200, j.text);
    const records = j.body.records as JournalRecord[];
    assert.deepEqual(
      records.map((r) => r.seq),
      records.map((_, i) => i + 1),
      `${a.id}: journal seqs contiguous`,
    );
    assert.deepEqual(await verifyJournal(records, (kid) => keys.get(kid)), { ok: true }, `${a.id}: journal verifies`);
    const completed = records.filter((r) => r.kind === 'step');
    const stepIds = completed.map((r) => r.step_id);
    assert.equal(new Set(stepIds).size, stepIds.length, `${a.id}: no step completed twice (${stepIds.join(',')})`);
    if (a.kind === 'crew') {
      const n = records.filter((r) => (r.data as { reissued?: unknown } | null)?.reissued === true).length;
      assert.ok(n <= 1, `${a.id}: a model call re-issued at most once (${n})`);
      reissued += n;
    }
  }
  // SQL effects exactly once, read from each workspace's database on PostgreSQL: one row per acknowledged SQL run
  // (a second execution would have failed on the primary key, or committed a row twice without it).
  for (const a of w.acked.filter((x) => x.kind === 'sql')) {
    const ws = workspaceDb(g.db.url, a.workspace);
    const r = await adminQuery(ws.url, `SELECT count(*)::int AS n FROM "${ws.schema}".effects WHERE id = '${a.marker}'`);
    assert.equal(Number(r.rows[0]!.n), 1, `${a.id}: its SQL effect committed exactly once in ${ws.url}`);
  }
  // Crew runs recorded for a request whose answer the client never had (the cell died, or the COMMIT's
  // outcome was unknown) run like the others: they must finish too, and their calls count. A run behind
  // any other refusal is a partial write.
  const acked = new Set(w.acked.map((a) => a.id));
  const unacked = (await adminQuery(g.db.url, "SELECT run_id, spec FROM runs WHERE kind = 'crew'")).rows
    .map((r) => ({ id: String(r.run_id), spec: typeof r.spec === 'string' ? r.spec : JSON.stringify(r.spec) }))
    .filter((r) => !acked.has(r.id));
  for (const r of unacked) {
    const by = w.refusals.find((x) => x.marker !== undefined && new RegExp(`"${x.marker}"`).test(r.spec));
    assert.ok(
      by !== undefined && (by.status === 0 || by.reason === 'commit_unknown'),
      `crew run ${r.id} was recorded for a request refused with ${by ? `${by.status} ${by.text}` : 'no request of the workload'}`,
    );
    const done = await until(
      `crew run ${r.id} (answer lost) to finish`,
      async () => {
        const x = await call(reader().url, 'GET', `${JOB_RUNS}/${r.id}`, { token: g.token });
        return x.status === 200 && TERMINAL.includes(x.body.state) ? x.body : null;
      },
      o.drainMs ?? 90_000,
    );
    assert.equal(done.state, 'completed', `crew run ${r.id} (answer lost): ${JSON.stringify(done.error)}`);
    const j = await call(reader().url, 'GET', `${JOB_RUNS}/${r.id}/journal`, { token: g.token });
    reissued += (j.body.records as JournalRecord[]).filter((x) => (x.data as { reissued?: unknown } | null)?.reissued === true).length;
  }
  const crewRuns = w.acked.filter((a) => a.kind === 'crew').length + unacked.length;
  const modelCalls = g.ai.requests.length;
  if (!o.driverLost) assert.equal(reissued, 0, 'no model call re-issued without a driver lost');
  assert.ok(
    modelCalls >= 3 * crewRuns && modelCalls <= 3 * crewRuns + reissued,
    `model calls ${modelCalls}: 3 per crew run (${crewRuns}, ${unacked.length} of them with their answer lost) plus the ${reissued} flagged re-issues`,
  );

  // Each cron second fired exactly once: no gap between the first and the last fire, on time outside the fault.
  const fires = (
    await adminQuery(
      g.db.url,
      `SELECT fire_at, created_at, cell_id, state FROM job_fires WHERE schedule_id = '${g.scheduleId}' ORDER BY fire_at`,
    )
  ).rows.map((r) => ({ fire_at: Number(r.fire_at), created_at: Number(r.created_at), cell_id: String(r.cell_id), state: String(r.state) }));
  assert.ok(fires.length >= MIN_FIRES, `the definition fired (${fires.length})`);
  for (let i = 1; i < fires.length; i++)
    assert.equal(
      fires[i]!.fire_at - fires[i - 1]!.fire_at,
      1000,
      `second ${new Date(fires[i]!.fire_at).toISOString()} follows its predecessor once`,
    );
  let maxLateMs = 0;
  for (const f of fires) {
    const late = f.created_at - f.fire_at;
    assert.ok(late >= -50, `fired ${-late} ms early at ${new Date(f.fire_at).toISOString()} by ${f.cell_id}`);
    const inFault = f.fire_at >= o.fault.from - 1000 && f.fire_at <= o.fault.to;
    const bound = inFault ? o.fault.to - f.fire_at + o.recoveryBoundMs : o.recoveryBoundMs;
    assert.ok(late <= bound, `second ${new Date(f.fire_at).toISOString()} fired ${late} ms late by ${f.cell_id} (bound ${bound} ms)`);
    maxLateMs = Math.max(maxLateMs, inFault ? late - (o.fault.to - f.fire_at) : late);
  }

  // Every refusal a 503 envelope; "no answer" only from the cells the fault silenced, only during it.
  for (const r of w.refusals) {
    if (r.status === 0) {
      // A request is answered within ANSWER_MS or counted as unanswered: one sent that long before the fault was
      // still in flight when the cell went down, and its connection dies with it.
      const allowed = (o.silent ?? []).includes(r.cell) && r.at >= o.fault.from - ANSWER_MS && r.at <= o.fault.to + ANSWER_MS;
      if (!allowed) {
        // Whether the cell is still there, and what it said last: a refused connection may be a cell that died.
        const c = g.cells[CELL_IDS.indexOf(r.cell)];
        const state = c ? `exit ${c.proc.exitCode ?? '-'} signal ${c.proc.signalCode ?? '-'}\n${c.output().slice(-3000)}` : 'unknown cell';
        assert.fail(`no answer from ${r.cell} at ${r.at - o.fault.from} ms into the fault: ${r.text}\n${r.cell}: ${state}`);
      }
    } else {
      assert.equal(r.status, 503, `a refusal is a 503 envelope: ${r.status} ${r.text}`);
      assert.equal(r.error, 'service_unavailable', r.text);
    }
  }

  // Every cell alive at the end (and ready, unless the scenario says why not).
  for (const [i, c] of g.cells.entries()) {
    if (g.down.has(i)) continue;
    assert.ok(c.proc.exitCode === null && c.proc.signalCode === null, `${CELL_IDS[i]} is alive:\n${c.output().slice(-2000)}`);
    const want = o.notReady?.[CELL_IDS[i]!];
    const ready = await until(
      `${CELL_IDS[i]} to answer /readyz as expected`,
      async () => {
        const r = await call(c.url, 'GET', '/readyz');
        if (want === undefined) return r.status === 200 ? r : null;
        return r.status === 503 && r.body?.details?.checks?.member === want ? r : null;
      },
      10_000,
    );
    assert.ok(ready);
  }
  return {
    acked: w.acked.length,
    refusals: w.refusals.length,
    crewRuns,
    reissued,
    modelCalls,
    fires: fires.length,
    maxLateMs,
    drainedMs,
    fireWaitMs,
    checkMs: Date.now() - checkStart,
  };
}

/** How many acknowledged runs a scenario waits for before its fault, and after it (the group accepts work again). */
const WARM_ACKS = 3;
const AFTER_ACKS = 2;

/** Waits until `n` more runs than now are acknowledged (a condition, not a fixed sleep). */
export async function moreAcked(w: Workload, n: number, ms = 60_000): Promise<void> {
  const want = w.acked.length + n;
  await until(`${n} more runs acknowledged`, async () => w.acked.length >= want, ms);
}

/** What a scenario's fault returns: the check's options (the recovery bound defaults to 15 s), figures to report. */
export interface Injected extends Omit<CheckOptions, 'recoveryBoundMs'> {
  recoveryBoundMs?: number;
  extra?: Record<string, number>;
}

/**
 * One fault scenario, the preamble every scenario file shares: the group starts, the workload runs until
 * WARM_ACKS runs are acknowledged and one is being driven, `inject` puts the fault in (and waits for what
 * it needs), the workload stops, the checker runs, the figures are reported (with each phase's time), and
 * the group stops whatever happened. Returns the figures for the scenario's own assertions.
 */
export async function faultScenario(
  name: string,
  opts: GroupOptions,
  inject: (g: FaultGroup, w: Workload) => Promise<Injected>,
): Promise<Figures> {
  const t0 = Date.now();
  const g = await startFaultGroup(opts);
  try {
    const w = startWorkload(g);
    const warm = Date.now();
    await moreAcked(w, WARM_ACKS);
    await until(
      'a run driven',
      async () => (await adminQuery(g.db.url, "SELECT 1 FROM runs WHERE state = 'running' LIMIT 1")).rows.length > 0,
      30_000,
    );
    const faultAt = Date.now();
    const { extra, ...o } = await inject(g, w);
    await w.stop();
    const checkAt = Date.now();
    const f = await check(g, w, { recoveryBoundMs: 15_000, ...o });
    report(name, f, {
      ...extra,
      start_ms: g.startMs,
      warm_ms: faultAt - warm,
      fault_ms: checkAt - faultAt,
      total_ms: Date.now() - t0,
    });
    return f;
  } finally {
    await g.stop();
  }
}

/** After a fault: waits until the group acknowledges work again (AFTER_ACKS more runs). */
export function recovered(w: Workload): Promise<void> {
  return moreAcked(w, AFTER_ACKS);
}

/** The cells' warnings and errors, for a failure message. */
export function logs(g: FaultGroup): string {
  return g.cells
    .map(
      (c, i) =>
        `--- ${CELL_IDS[i]}\n${c
          .output()
          .split('\n')
          .filter((l) => /warn|error/i.test(l))
          .slice(-6)
          .join('\n')}`,
    )
    .join('\n');
}

/** One line of figures for the test log (docs/multi-cell.md quotes them). */
export function report(name: string, f: Figures, extra: Record<string, number> = {}): void {
  console.log(`# fault ${name}: ${JSON.stringify({ ...f, ...extra })}`);
}

/** Why the clock scenarios cannot run here (libfaketime missing: `make faketime-deps`), or false. */
export const NO_FAKETIME = existsSync(FAKETIME_LIB) ? false : `libfaketime is missing (${FAKETIME_LIB}): make faketime-deps`;

/** The environment that runs a cell `offset` off the real time (libfaketime; timers keep the real monotonic clock). */
export function faketime(offset: string): Record<string, string> {
  return { LD_PRELOAD: FAKETIME_LIB, FAKETIME: offset, FAKETIME_DONT_FAKE_MONOTONIC: '1', FAKETIME_NO_CACHE: '1' };
}
