/**
 * The `runs` table: one row per orchestration run, crew runs and job runs
 * alike (one run id space). A run's identifier is `run_` + 80 random bits,
 * reused by its journal and its event stream.
 *
 * States: queued -> running -> (waiting <-> running) -> completed | failed |
 * refused | cancelled. The four last are terminal: once a run is terminal its
 * state never changes again and its journal is closed (see journal.ts).
 *
 * Reads are synchronous (`cell.store.get/all`); writes go through
 * `cell.store.write` and are durable when they resolve.
 */
import type { Cell } from '../context.ts';
import type { Migration, Tx } from '../store/types.ts';

export type RunKind = 'crew' | 'job';
export type RunState = 'queued' | 'running' | 'waiting' | 'completed' | 'failed' | 'refused' | 'cancelled';
export const RUN_STATES: readonly RunState[] = ['queued', 'running', 'waiting', 'completed', 'failed', 'refused', 'cancelled'];
export const TERMINAL_STATES: readonly RunState[] = ['completed', 'failed', 'refused', 'cancelled'];

export function isTerminal(state: string): boolean {
  return (TERMINAL_STATES as readonly string[]).includes(state);
}

/** A run's error: a stable code from core/errors plus a machine sub-reason. */
export interface RunError { code: string; message: string; reason?: string; details?: Record<string, unknown> }

export interface Run {
  run_id: string;
  kind: RunKind;
  /** Job runs: notebook | compute | sql | single (and agent for scheduled agent dispatch). */
  job_type: string | null;
  /** Crew runs: the crew. */
  crew_id: string | null;
  workspace_id: string | null;
  /** Principal id of the requester, always from the authenticated session. */
  requester: string;
  state: RunState;
  graph_hash: string | null;
  spec: unknown;
  output: unknown;
  error: RunError | null;
  /** Free-form flags, e.g. `{ investigate: true }`. */
  flags: Record<string, unknown>;
  /** Cell id that drives (coordinates) the run. */
  coordinator: string | null;
  /** Where the run came from: `api`, `schedule:<schedule_id>`, `endpoint:<endpoint_id>`. */
  source: string;
  created_at: number;
  updated_at: number;
  finished_at: number | null;
}

export const RUNS_MIGRATIONS: readonly Migration[] = [
  {
    id: 'runs-001-runs',
    sql: `CREATE TABLE runs (
      run_id TEXT PRIMARY KEY,
      kind TEXT NOT NULL,
      job_type TEXT,
      crew_id TEXT,
      workspace_id TEXT,
      requester TEXT NOT NULL,
      state TEXT NOT NULL,
      graph_hash TEXT,
      spec TEXT NOT NULL,
      output TEXT,
      error TEXT,
      flags TEXT NOT NULL DEFAULT '{}',
      coordinator TEXT,
      source TEXT NOT NULL DEFAULT 'api',
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL,
      finished_at INTEGER
    );
    CREATE INDEX runs_by_created ON runs (created_at, run_id);
    CREATE INDEX runs_by_kind ON runs (kind, created_at, run_id);
    CREATE INDEX runs_by_state ON runs (state);`,
  },
  {
    id: 'runs-002-journal',
    sql: `CREATE TABLE journal (
      run_id TEXT NOT NULL,
      seq INTEGER NOT NULL,
      kind TEXT NOT NULL,
      record TEXT NOT NULL,
      PRIMARY KEY (run_id, seq)
    );
    CREATE TABLE journal_blobs (hash TEXT PRIMARY KEY, body TEXT NOT NULL);`,
  },
];

type RunRow = {
  run_id: string; kind: string; job_type: string | null; crew_id: string | null; workspace_id: string | null;
  requester: string; state: string; graph_hash: string | null; spec: string; output: string | null; error: string | null;
  flags: string; coordinator: string | null; source: string; created_at: number; updated_at: number; finished_at: number | null;
};

function fromRow(r: RunRow): Run {
  return {
    run_id: r.run_id,
    kind: r.kind as RunKind,
    job_type: r.job_type,
    crew_id: r.crew_id,
    workspace_id: r.workspace_id,
    requester: r.requester,
    state: r.state as RunState,
    graph_hash: r.graph_hash,
    spec: JSON.parse(r.spec) as unknown,
    output: r.output === null ? null : (JSON.parse(r.output) as unknown),
    error: r.error === null ? null : (JSON.parse(r.error) as RunError),
    flags: JSON.parse(r.flags) as Record<string, unknown>,
    coordinator: r.coordinator,
    source: r.source,
    created_at: r.created_at,
    updated_at: r.updated_at,
    finished_at: r.finished_at,
  };
}

/** A fresh run id: `run_` + 20 hex digits (80 random bits). */
export function newRunId(): string {
  const b = crypto.getRandomValues(new Uint8Array(10));
  return `run_${Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('')}`;
}

export const RUN_ID_PATTERN = /^run_[0-9a-f]{20}$/;

export interface NewRun {
  run_id?: string;
  kind: RunKind;
  job_type?: string | null;
  crew_id?: string | null;
  workspace_id?: string | null;
  requester: string;
  state?: RunState;
  graph_hash?: string | null;
  spec: unknown;
  flags?: Record<string, unknown>;
  coordinator?: string | null;
  source?: string;
  /** Creation time (ms); pass `cell.clock.now()`. */
  at: number;
}

/** Inserts a run inside the caller's transaction; returns its id. State defaults to `queued`. */
export function createRunTx(tx: Tx, r: NewRun): string {
  const id = r.run_id ?? newRunId();
  tx.run(
    `INSERT INTO runs (run_id, kind, job_type, crew_id, workspace_id, requester, state, graph_hash, spec, output, error, flags, coordinator, source, created_at, updated_at, finished_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?, ?, ?, ?, ?, NULL)`,
    [id, r.kind, r.job_type ?? null, r.crew_id ?? null, r.workspace_id ?? null, r.requester, r.state ?? 'queued',
      r.graph_hash ?? null, JSON.stringify(r.spec ?? null), JSON.stringify(r.flags ?? {}), r.coordinator ?? null,
      r.source ?? 'api', r.at, r.at],
  );
  return id;
}

/** The run, or undefined when this cell does not know it. */
export function getRun(cell: Cell, runId: string): Run | undefined {
  const r = cell.store.get<RunRow>('SELECT * FROM runs WHERE run_id = ?', [runId]);
  return r ? fromRow(r) : undefined;
}

export interface ListRunsOptions { limit: number; offset: number; kind?: RunKind; crewId?: string; state?: RunState; flag?: string }

/**
 * Runs in a stable order: the order they were recorded (oldest first; the
 * table's rowid, which log replay reproduces). New runs only ever append, so a
 * page that was read stays the same page.
 */
export function listRuns(cell: Cell, o: ListRunsOptions): { items: Run[]; total: number } {
  const where: string[] = [];
  const params: (string | number)[] = [];
  if (o.kind) { where.push('kind = ?'); params.push(o.kind); }
  if (o.crewId) { where.push('crew_id = ?'); params.push(o.crewId); }
  if (o.state) { where.push('state = ?'); params.push(o.state); }
  if (o.flag) { where.push("json_extract(flags, '$.' || ?) IS NOT NULL AND json_extract(flags, '$.' || ?) != 0"); params.push(o.flag, o.flag); }
  const w = where.length ? `WHERE ${where.join(' AND ')}` : '';
  const total = cell.store.get<{ n: number }>(`SELECT count(*) AS n FROM runs ${w}`, params)?.n ?? 0;
  const items = cell.store.all<RunRow>(`SELECT * FROM runs ${w} ORDER BY rowid LIMIT ? OFFSET ?`, [...params, o.limit, o.offset]).map(fromRow);
  return { items, total };
}

/** Runs in non-terminal states (recovery sweeps). */
export function activeRuns(cell: Cell, kind?: RunKind): Run[] {
  const rows = kind
    ? cell.store.all<RunRow>("SELECT * FROM runs WHERE kind = ? AND state IN ('queued','running','waiting') ORDER BY rowid", [kind])
    : cell.store.all<RunRow>("SELECT * FROM runs WHERE state IN ('queued','running','waiting') ORDER BY rowid");
  return rows.map(fromRow);
}

export interface StatePatch { output?: unknown; error?: RunError | null; graph_hash?: string; coordinator?: string }

/**
 * Moves a non-terminal run to `state` inside a transaction. Returns false (and
 * changes nothing) when the run is unknown or already terminal: terminal
 * states are final. Prefer `finishRun` (journal.ts) for terminal states: it
 * also writes the terminal journal record in the same transaction.
 */
export function setRunStateTx(tx: Tx, runId: string, state: RunState, at: number, patch: StatePatch = {}): boolean {
  const sets = ['state = ?', 'updated_at = ?'];
  const params: (string | number | null)[] = [state, at];
  if (isTerminal(state)) { sets.push('finished_at = ?'); params.push(at); }
  if ('output' in patch) { sets.push('output = ?'); params.push(JSON.stringify(patch.output ?? null)); }
  if ('error' in patch) { sets.push('error = ?'); params.push(patch.error ? JSON.stringify(patch.error) : null); }
  if (patch.graph_hash !== undefined) { sets.push('graph_hash = ?'); params.push(patch.graph_hash); }
  if (patch.coordinator !== undefined) { sets.push('coordinator = ?'); params.push(patch.coordinator); }
  const r = tx.run(`UPDATE runs SET ${sets.join(', ')} WHERE run_id = ? AND state NOT IN ('completed','failed','refused','cancelled')`, [...params, runId]);
  return r.changes > 0;
}

/** Durable `setRunStateTx` of its own. */
export async function setRunState(cell: Cell, runId: string, state: RunState, patch: StatePatch = {}): Promise<boolean> {
  const at = cell.clock.now();
  return cell.store.write((tx) => setRunStateTx(tx, runId, state, at, patch));
}

/** Merges `flags` into the run's flags (e.g. `{ investigate: true }`). */
export async function setRunFlags(cell: Cell, runId: string, flags: Record<string, unknown>): Promise<void> {
  const run = getRun(cell, runId);
  if (!run) return;
  const merged = { ...run.flags, ...flags };
  const at = cell.clock.now();
  await cell.store.write((tx) => tx.run('UPDATE runs SET flags = ?, updated_at = ? WHERE run_id = ?', [JSON.stringify(merged), at, runId]));
}
