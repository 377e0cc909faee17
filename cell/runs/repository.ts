/**
 * Every SQL statement of the runs module (runs and their order, journal
 * records and blobs, approval requests and decisions), with the row
 * decoders. Domain code calls these functions; nothing else in the module
 * writes SQL. Statements stay in the dialect both engines run (docs/storage.md).
 */
import type { RunOutcome } from '../../core/engine/types.ts';
import type { JournalRecord, JsonObject } from '../../core/journal/record.ts';
import type { RunErrorCode, WireReason } from '../../core/reasons.ts';
import { anyJson, count, json, jsonOrNull, num, numOrNull, object, str, strOrNull } from '../store/decode.ts';
import type { Reader, Row, SqlValue, Store, Tx } from '../store/types.ts';
import { recordText } from './internal/record-text.ts';

export type RunKind = 'crew' | 'job';
/**
 * `waiting`: on an approval or a timer; `outcome_unknown`: on an operator, for a side-effecting call whose
 * outcome was lost in a crash (nothing wakes it but a resolution, a cancel or a recover).
 */
export type RunState = 'queued' | 'running' | 'waiting' | 'outcome_unknown' | 'completed' | 'failed' | 'refused' | 'cancelled';
export const RUN_STATES: readonly RunState[] = [
  'queued',
  'running',
  'waiting',
  'outcome_unknown',
  'completed',
  'failed',
  'refused',
  'cancelled',
];
export const TERMINAL_STATES: readonly RunState[] = ['completed', 'failed', 'refused', 'cancelled'];
const RUN_KINDS: readonly RunKind[] = ['crew', 'job'];

/** A run's error: a stable code from core/errors plus a machine sub-reason (core/reasons.ts). */
export interface RunError {
  code: RunErrorCode;
  message: string;
  /** A declared reason; the run's outcome when the engine named none. */
  reason?: WireReason | RunOutcome;
  details?: Record<string, unknown>;
}

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
  /** The cell holding the run's lease (cell/runs/lease.ts); null while it waits or before anyone claimed it. */
  lease_owner: string | null;
  /** The lease's fencing token: grows by one at every claim. */
  lease_epoch: number;
  /** When its journal last grew (null before its first record): a running run with none for several leases is stalled. */
  progress_at: number | null;
  /** Where the run came from: `api`, `schedule:<schedule_id>`, `endpoint:<endpoint_id>`. */
  source: string;
  created_at: number;
  updated_at: number;
  finished_at: number | null;
}

function oneOf<T extends string>(values: readonly T[], v: string, what: string): T {
  if (!(values as readonly string[]).includes(v)) throw new TypeError(`store row: unknown ${what} ${v}`);
  return v as T;
}

function runError(v: unknown): RunError {
  const o = object(v);
  if (typeof o['code'] !== 'string' || typeof o['message'] !== 'string')
    throw new TypeError('store row: a run error needs code and message');
  // Written through RunError, so a run error code and a declared reason; read back as they were stored.
  const e: RunError = { code: o['code'] as RunErrorCode, message: o['message'] };
  if (typeof o['reason'] === 'string') e.reason = o['reason'] as WireReason;
  if (o['details'] !== undefined) e.details = object(o['details']);
  return e;
}

/** What a run's `error_reason` column holds: the error's reason, else its code (the run lists filter on it). */
export function errorReasonOf(e: RunError): string {
  return e.reason ?? e.code;
}

const RUN_COLUMN_NAMES =
  'run_id, kind, job_type, crew_id, workspace_id, requester, state, graph_hash, spec, output, error, ' +
  'flags, coordinator, source, created_at, updated_at, finished_at, lease_owner, lease_epoch, progress_at';
const RUN_COLUMNS = RUN_COLUMN_NAMES.split(', ')
  .map((c) => `r.${c}`)
  .join(', ');

function decodeRun(r: Row): Run {
  return {
    run_id: str(r, 'run_id'),
    kind: oneOf(RUN_KINDS, str(r, 'kind'), 'run kind'),
    job_type: strOrNull(r, 'job_type'),
    crew_id: strOrNull(r, 'crew_id'),
    workspace_id: strOrNull(r, 'workspace_id'),
    requester: str(r, 'requester'),
    state: oneOf(RUN_STATES, str(r, 'state'), 'run state'),
    graph_hash: strOrNull(r, 'graph_hash'),
    spec: json(r, 'spec', anyJson),
    output: jsonOrNull(r, 'output', anyJson),
    error: jsonOrNull(r, 'error', runError),
    flags: json(r, 'flags', object),
    coordinator: strOrNull(r, 'coordinator'),
    lease_owner: strOrNull(r, 'lease_owner'),
    lease_epoch: num(r, 'lease_epoch'),
    progress_at: numOrNull(r, 'progress_at'),
    source: str(r, 'source'),
    created_at: num(r, 'created_at'),
    updated_at: num(r, 'updated_at'),
    finished_at: numOrNull(r, 'finished_at'),
  };
}

// ---------------------------------------------------------------- runs

export interface RunInsert {
  run_id: string;
  kind: RunKind;
  job_type: string | null;
  crew_id: string | null;
  workspace_id: string | null;
  requester: string;
  state: RunState;
  graph_hash: string | null;
  spec: unknown;
  flags: Record<string, unknown>;
  coordinator: string | null;
  source: string;
  at: number;
  /** The lease's epoch: 0 (the coordinator holds it until it claims the run), 1 for a run recorded claimed (runs/opening.ts). */
  lease_epoch: number;
  /** What the cell that executes the run must meet (placement; every claim enforces it). */
  need_clearance: number;
  need_topology: Record<string, string>;
}

/**
 * Inserts a run and numbers it in the order runs were recorded; answers the
 * run as inserted (`RETURNING`, not a read: on PostgreSQL a read of the runs
 * table by id inside the creating serializable transaction takes a predicate
 * lock on an index page, or on the whole table once the planner prefers a
 * sequential scan of a small table, and runs created at once then fail each
 * other's commits with serialization failures).
 */
export async function insertRun(tx: Tx, r: RunInsert): Promise<Run> {
  // Both statements issued before either answer is awaited: one round trip on PostgreSQL.
  const inserted = tx.get(
    `INSERT INTO runs (run_id, kind, job_type, crew_id, workspace_id, requester, state, graph_hash, spec, output, error, flags, investigate, coordinator, source, created_at, updated_at, finished_at, lease_owner, lease_epoch, need_clearance, need_topology)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?)
     RETURNING ${RUN_COLUMN_NAMES}`,
    [
      r.run_id,
      r.kind,
      r.job_type,
      r.crew_id,
      r.workspace_id,
      r.requester,
      r.state,
      r.graph_hash,
      JSON.stringify(r.spec ?? null),
      JSON.stringify(r.flags),
      r.flags['investigate'] ? 1 : 0,
      r.coordinator,
      r.source,
      r.at,
      r.at,
      r.coordinator,
      r.lease_epoch,
      r.need_clearance,
      JSON.stringify(r.need_topology),
    ],
  );
  const [row] = await Promise.all([inserted, tx.run('INSERT INTO run_order (run_id) VALUES (?)', [r.run_id])]);
  if (!row) throw new TypeError(`insertRun: the insert of run ${r.run_id} returned no row`);
  return decodeRun(row);
}

export async function runById(db: Reader, runId: string): Promise<Run | undefined> {
  const r = await db.get(`SELECT ${RUN_COLUMNS} FROM runs r WHERE r.run_id = ?`, [runId]);
  return r ? decodeRun(r) : undefined;
}

export interface RunHead {
  state: RunState;
  graph_hash: string | null;
  lease_owner: string | null;
  lease_epoch: number;
}

/**
 * The first statement of a journal append's transaction (journal.ts): locks
 * the run's row (so appends and state changes of one run take turns, in every
 * cell) and stamps its last journal progress, if the run is not terminal and,
 * with `lease`, is still held under it. False when nothing matched.
 */
export async function touchRun(tx: Tx, runId: string, at: number, lease: { owner: string; epoch: number } | null): Promise<boolean> {
  const r = lease
    ? await tx.run(
        `UPDATE runs SET updated_at = ?, progress_at = ? WHERE run_id = ? AND state NOT IN ('completed', 'failed', 'refused', 'cancelled')
         AND lease_owner = ? AND lease_epoch = ?`,
        [at, at, runId, lease.owner, lease.epoch],
      )
    : await tx.run(
        `UPDATE runs SET updated_at = ?, progress_at = ? WHERE run_id = ? AND state NOT IN ('completed', 'failed', 'refused', 'cancelled')`,
        [at, at, runId],
      );
  return r.changes === 1;
}

/**
 * touchRun and runHead in one statement: locks the run's row, stamps its
 * progress and returns its head, when the run is not terminal and (with
 * `lease`) still held under it; undefined when nothing matched (read runHead
 * to tell why). The journal's tail is read by a statement of its own after
 * this one (lastSeqs): on PostgreSQL a statement that waited for the row
 * lock still reads with the snapshot it started with.
 */
export async function lockRunHead(
  tx: Tx,
  runId: string,
  at: number,
  lease: { owner: string; epoch: number } | null,
): Promise<RunHead | undefined> {
  const r = lease
    ? await tx.get(
        `UPDATE runs SET updated_at = ?, progress_at = ? WHERE run_id = ? AND state NOT IN ('completed', 'failed', 'refused', 'cancelled')
         AND lease_owner = ? AND lease_epoch = ? RETURNING state, graph_hash, lease_owner, lease_epoch`,
        [at, at, runId, lease.owner, lease.epoch],
      )
    : await tx.get(
        `UPDATE runs SET updated_at = ?, progress_at = ? WHERE run_id = ? AND state NOT IN ('completed', 'failed', 'refused', 'cancelled')
         RETURNING state, graph_hash, lease_owner, lease_epoch`,
        [at, at, runId],
      );
  return r
    ? {
        state: oneOf(RUN_STATES, str(r, 'state'), 'run state'),
        graph_hash: strOrNull(r, 'graph_hash'),
        lease_owner: strOrNull(r, 'lease_owner'),
        lease_epoch: num(r, 'lease_epoch'),
      }
    : undefined;
}

/**
 * A multi-row statement's text for `n` rows, built once per `n` up to 64 (a step writes the same few
 * shapes again and again, and the store reads a text's facts once per text; a text built anew each
 * time is hashed anew), built each time past that.
 */
function rowsText(cache: string[], n: number, build: (n: number) => string): string {
  if (n > 64) return build(n);
  cache[n] ??= build(n);
  return cache[n];
}

const insertRecordsTexts: string[] = [];
const putBlobsTexts: string[] = [];
const addStoragesTexts: string[] = [];
const lockRunHeadsTexts: string[] = [];
const lastSeqsTexts: string[] = [];

/**
 * The first statement of a group of journal appends (group-commit.ts): locks
 * and stamps, in one statement, the row of every run of the group that is
 * not terminal and still held by `owner` under the member's epoch. Returns the
 * heads of the runs it locked; a run missing from the answer was not touched.
 */
export async function lockRunHeads(
  tx: Tx,
  members: readonly { runId: string; epoch: number }[],
  owner: string,
  at: number,
): Promise<Map<string, RunHead>> {
  const params: SqlValue[] = [at, at, owner];
  for (const m of members) params.push(m.runId, m.epoch);
  const rows = await tx.all(
    rowsText(
      lockRunHeadsTexts,
      members.length,
      (
        n,
      ) => `UPDATE runs SET updated_at = ?, progress_at = ? WHERE lease_owner = ? AND state NOT IN ('completed', 'failed', 'refused', 'cancelled')
     AND (${Array(n).fill('(run_id = ? AND lease_epoch = ?)').join(' OR ')}) RETURNING run_id, state, graph_hash, lease_owner, lease_epoch`,
    ),
    params,
  );
  const out = new Map<string, RunHead>();
  for (const r of rows)
    out.set(str(r, 'run_id'), {
      state: oneOf(RUN_STATES, str(r, 'state'), 'run state'),
      graph_hash: strOrNull(r, 'graph_hash'),
      lease_owner: strOrNull(r, 'lease_owner'),
      lease_epoch: num(r, 'lease_epoch'),
    });
  return out;
}

/** The last seq of each of `runIds` (0 for a run without records), in one statement. */
export async function lastSeqs(db: Reader, runIds: readonly string[]): Promise<Map<string, number>> {
  // CAST(? AS TEXT): as lastSeq (SQLite compiles the statement once).
  const rows = await db.all(
    rowsText(
      lastSeqsTexts,
      runIds.length,
      (n) => `SELECT run_id, MAX(seq) AS n FROM journal WHERE run_id IN (${Array(n).fill('CAST(? AS TEXT)').join(', ')}) GROUP BY run_id`,
    ),
    runIds,
  );
  const out = new Map<string, number>(runIds.map((id) => [id, 0]));
  for (const r of rows) out.set(str(r, 'run_id'), num(r, 'n'));
  return out;
}

/** The storage in use, as four sub-selects: every run's bytes (folded total plus unfolded shares), and a workspace's runs'. */
const USAGE_COLUMNS = `(SELECT COALESCE(SUM(bytes), 0) FROM storage_totals WHERE scope = 'cell') AS cell_total,
       (SELECT COALESCE(SUM(bytes), 0) FROM run_storage_unfolded) AS cell_unfolded,
       (SELECT COALESCE(SUM(bytes), 0) FROM storage_totals WHERE scope = CAST(? AS TEXT)) AS ws_total,
       (SELECT COALESCE(SUM(bytes), 0) FROM run_storage_unfolded WHERE workspace_id = CAST(? AS TEXT)) AS ws_unfolded`;

const usageParams = (ws: string | null): SqlValue[] => [ws === null ? '' : `workspace:${ws}`, ws ?? ''];

const usageOf = (r: Row | undefined, ws: string | null): { cell: number; workspace: number } => ({
  cell: count(r, 'cell_total') + count(r, 'cell_unfolded'),
  workspace: ws === null ? 0 : count(r, 'ws_total') + count(r, 'ws_unfolded'),
});

/** What PostgreSQL's log quotes when the guard of a one-round-trip append refuses it (docs/storage.md). */
const GUARD_REFUSED = 'journal append guard refused: written again locked first';

/**
 * The lock and guard of a journal append sent in one round trip (group-commit.ts writeAtOnce), one
 * statement: it locks the run's row and stamps its progress (as lockRunHead) when the run is still
 * held by `owner` under `epoch`, not terminal, with the graph hash the records were sealed with, and
 * it fails (its answer cast to a number is GUARD_REFUSED, which is not one: PostgreSQL aborts the
 * transaction, and the statements sent behind it and the COMMIT with it, and its log names the
 * guard) unless it locked the row, the journal's last seq is `lastSeq`, and (with `quota`) the
 * storage in use plus `adding` stays within the limits. The lock's conditions are judged on the
 * row's latest version (READ COMMITTED re-checks a row it waited for); the seq and the storage in use
 * are read with the statement's snapshot, which does not see what a writer it waited for committed.
 * That writer ended the run or took its lease (the lock then refuses), or it added a record, whose
 * seq the append's own record then takes again: the journal's key refuses it, which aborts the
 * transaction as the guard would. Only on PostgreSQL (the embedded engine has no statement of this shape).
 */
export async function lockAndGuardAppend(
  tx: Tx,
  g: {
    runId: string;
    at: number;
    owner: string;
    epoch: number;
    graph: string | null;
    lastSeq: number;
    /** `adding` counts against the cell's limit, `workspaceAdding` (default: `adding`) against the workspace's. */
    quota: { workspaceId: string | null; adding: number; workspaceAdding?: number; cellLimit: number; workspaceLimit: number } | null;
  },
): Promise<void> {
  const params: SqlValue[] = [g.at, g.at, g.runId, g.owner, g.epoch, g.graph ?? '', g.runId, g.lastSeq];
  if (g.quota) {
    params.push(g.quota.adding, g.quota.cellLimit);
    if (g.quota.workspaceId !== null) params.push(g.quota.workspaceAdding ?? g.quota.adding, g.quota.workspaceLimit);
    params.push(...usageParams(g.quota.workspaceId));
  }
  await tx.get(!g.quota ? GUARD_SQL.plain : g.quota.workspaceId === null ? GUARD_SQL.cell : GUARD_SQL.workspace, params);
}

/** lockAndGuardAppend's three texts (no quota; the cell's; the cell's and a workspace's), built once. */
const GUARD_SQL = (() => {
  const text = (quota: string, from: string) =>
    `WITH locked AS (UPDATE runs SET updated_at = ?, progress_at = ? WHERE run_id = ? AND state NOT IN ('completed', 'failed', 'refused', 'cancelled')
       AND lease_owner = ? AND lease_epoch = ? AND COALESCE(graph_hash, '') = ? RETURNING run_id)
     SELECT CAST(CASE WHEN EXISTS (SELECT 1 FROM locked)
       AND (SELECT COALESCE(MAX(seq), 0) FROM journal WHERE run_id = ?) = ?${quota} THEN '1' ELSE '${GUARD_REFUSED}' END AS BIGINT) AS ok${from}`;
  const cell = ' AND u.cell_total + u.cell_unfolded + CAST(? AS BIGINT) <= CAST(? AS BIGINT)';
  const workspace = ' AND u.ws_total + u.ws_unfolded + CAST(? AS BIGINT) <= CAST(? AS BIGINT)';
  const from = ` FROM (SELECT ${USAGE_COLUMNS}) u`;
  return { plain: text('', ''), cell: text(cell, from), workspace: text(cell + workspace, from) };
})();

/** The storage in use by every run and (with a workspace) by the workspace's runs, in one statement. */
export async function storageUsage(db: Reader, workspaceId: string | null): Promise<{ cell: number; workspace: number }> {
  return usageOf(await db.get(`SELECT ${USAGE_COLUMNS}`, usageParams(workspaceId)), workspaceId);
}

/** Runs queued or running whose last journal progress (or creation) is before `before`: stalled (none, waiting runs). */
export async function countStalled(db: Reader, before: number): Promise<{ kind: string; n: number }[]> {
  const rows = await db.all(
    `SELECT kind, COUNT(*) AS n FROM runs WHERE state IN ('queued', 'running') AND COALESCE(progress_at, created_at) < ? GROUP BY kind`,
    [before],
  );
  return rows.map((r) => ({ kind: str(r, 'kind'), n: num(r, 'n') }));
}

/** The run's state, graph hash and lease only (the journal's hot path). */
export async function runHead(db: Reader, runId: string): Promise<RunHead | undefined> {
  const r = await db.get('SELECT state, graph_hash, lease_owner, lease_epoch FROM runs WHERE run_id = ?', [runId]);
  return r
    ? {
        state: oneOf(RUN_STATES, str(r, 'state'), 'run state'),
        graph_hash: strOrNull(r, 'graph_hash'),
        lease_owner: strOrNull(r, 'lease_owner'),
        lease_epoch: num(r, 'lease_epoch'),
      }
    : undefined;
}

export interface RunLease extends RunHead {
  coordinator: string | null;
  need_clearance: number;
  need_topology: Record<string, string>;
}

/** What a claim needs to know of a run (cell/runs/lease.ts). */
export async function runLease(db: Reader, runId: string): Promise<RunLease | undefined> {
  const r = await db.get(
    'SELECT state, graph_hash, lease_owner, lease_epoch, coordinator, need_clearance, need_topology FROM runs WHERE run_id = ?',
    [runId],
  );
  if (!r) return undefined;
  return {
    state: oneOf(RUN_STATES, str(r, 'state'), 'run state'),
    graph_hash: strOrNull(r, 'graph_hash'),
    lease_owner: strOrNull(r, 'lease_owner'),
    lease_epoch: num(r, 'lease_epoch'),
    coordinator: strOrNull(r, 'coordinator'),
    need_clearance: num(r, 'need_clearance'),
    need_topology: json(r, 'need_topology', object) as Record<string, string>,
  };
}

/**
 * Gives the run's lease to `owner` with epoch `epoch`, if nobody claimed it
 * since `prevEpoch` was read; the run is `running` under it. False otherwise.
 *
 * `from: 'self'` retakes a lease this cell holds already (the cell that created
 * the run, or drove it, claims it again): the same change, only while the owner
 * is still `owner` at `prevEpoch`. Run as the first statement of a `row-locks`
 * transaction, it locks the row and is its own compare-and-set.
 */
export async function takeLease(
  tx: Tx,
  runId: string,
  owner: string,
  epoch: number,
  prevEpoch: number,
  at: number,
  graphHash: string | null,
  from: 'anyone' | 'self' = 'anyone',
): Promise<boolean> {
  const self = from === 'self';
  const r = await tx.run(
    `UPDATE runs SET lease_owner = ?, lease_epoch = ?, coordinator = ?, state = 'running', updated_at = ?, graph_hash = COALESCE(CAST(? AS TEXT), graph_hash)
     WHERE run_id = ?${self ? ' AND lease_owner = ?' : ''} AND lease_epoch = ? AND state NOT IN ('completed', 'failed', 'refused', 'cancelled')`,
    [owner, epoch, owner, at, graphHash, runId, ...(self ? [owner] : []), prevEpoch],
  );
  return r.changes === 1;
}

/**
 * The lease holder lets go of a run that waits (`waiting`, or `outcome_unknown`; anyone may claim it when
 * it wakes); false when the lease is not its own.
 */
export async function releaseToWaiting(
  tx: Tx,
  runId: string,
  owner: string,
  epoch: number,
  at: number,
  state: 'waiting' | 'outcome_unknown' = 'waiting',
): Promise<boolean> {
  const r = await tx.run(
    `UPDATE runs SET state = ?, lease_owner = NULL, updated_at = ?
     WHERE run_id = ? AND lease_owner = ? AND lease_epoch = ? AND state NOT IN ('completed', 'failed', 'refused', 'cancelled')`,
    [state, at, runId, owner, epoch],
  );
  return r.changes === 1;
}

/** The creating cell lets go of a run it never claimed (epoch 0), for a qualifying peer to claim. */
export async function releaseUnclaimed(tx: Tx, runId: string, owner: string): Promise<boolean> {
  const r = await tx.run(
    `UPDATE runs SET lease_owner = NULL, coordinator = NULL WHERE run_id = ? AND lease_owner = ? AND lease_epoch = 0 AND state = 'queued'`,
    [runId, owner],
  );
  return r.changes === 1;
}

/** ` AND (col IS NULL OR col NOT IN (?, …))` for `excluded` (none: nothing excluded). */
function notHeldBy(col: string, excluded: readonly string[]): string {
  return excluded.length === 0 ? '' : ` AND (${col} IS NULL OR ${col} NOT IN (${excluded.map(() => '?').join(', ')}))`;
}

/**
 * Runs queued or running under none of the `excluded` cells' leases (or
 * none): takeover candidates, oldest first. The callers exclude the cells
 * whose lease still holds (live members, and themselves), so a busy group's
 * heartbeat reads its few orphans, not every run in flight.
 */
export async function leasedElsewhere(db: Reader, kind: RunKind, excluded: readonly string[]): Promise<Run[]> {
  const rows = await db.all(
    `SELECT ${RUN_COLUMNS} FROM runs r JOIN run_order o ON o.run_id = r.run_id
     WHERE r.kind = ? AND r.state IN ('queued', 'running')${notHeldBy('r.lease_owner', excluded)} ORDER BY o.seq`,
    [kind, ...excluded],
  );
  return rows.map(decodeRun);
}

/**
 * Runs of `kind` waiting (an approval, a timer) that a cell not `excluded`
 * drove last: their wake-up timer lives in that cell's process.
 */
export async function waitingElsewhere(db: Reader, kind: RunKind, excluded: readonly string[]): Promise<Run[]> {
  const rows = await db.all(
    `SELECT ${RUN_COLUMNS} FROM runs r JOIN run_order o ON o.run_id = r.run_id
     WHERE r.kind = ? AND r.state = 'waiting' AND r.coordinator IS NOT NULL${notHeldBy('r.coordinator', excluded)} ORDER BY o.seq`,
    [kind, ...excluded],
  );
  return rows.map(decodeRun);
}

/** Which runs a list or count reads (runs.ts `ListRunsOptions` adds the page). */
export interface RunFilter {
  kind?: RunKind | undefined;
  crewId?: string | undefined;
  state?: RunState | undefined;
  /** Only runs flagged for investigation. */
  investigate?: boolean | undefined;
  jobType?: string | undefined;
  source?: string | undefined;
  /** Only runs created after / before these epoch ms (exclusive). */
  createdAfter?: number | undefined;
  createdBefore?: number | undefined;
  /** Only runs that ended with this reason (the error's reason, else its code: `errorReasonOf`). */
  errorReason?: string | undefined;
}

function where(f: RunFilter): { sql: string; params: SqlValue[] } {
  const w: string[] = [];
  const params: SqlValue[] = [];
  if (f.kind) {
    w.push('r.kind = ?');
    params.push(f.kind);
  }
  if (f.crewId) {
    w.push('r.crew_id = ?');
    params.push(f.crewId);
  }
  if (f.state) {
    w.push('r.state = ?');
    params.push(f.state);
  }
  if (f.investigate) w.push('r.investigate = 1');
  if (f.jobType) {
    w.push('r.job_type = ?');
    params.push(f.jobType);
  }
  if (f.source) {
    // `schedule` also matches `schedule:<definition id>` (a source with its origin's id).
    w.push('(r.source = ? OR SUBSTR(r.source, 1, ?) = ?)');
    params.push(f.source, f.source.length + 1, `${f.source}:`);
  }
  if (f.createdAfter !== undefined) {
    w.push('r.created_at > ?');
    params.push(f.createdAfter);
  }
  if (f.createdBefore !== undefined) {
    w.push('r.created_at < ?');
    params.push(f.createdBefore);
  }
  if (f.errorReason) {
    w.push('r.error_reason = ?');
    params.push(f.errorReason);
  }
  return { sql: w.length ? `WHERE ${w.join(' AND ')}` : '', params };
}

/** Runs in the order they were recorded (oldest first). */
export async function listRuns(db: Reader, f: RunFilter, limit: number, offset: number): Promise<Run[]> {
  const w = where(f);
  const rows = await db.all(
    `SELECT ${RUN_COLUMNS} FROM runs r JOIN run_order o ON o.run_id = r.run_id ${w.sql} ORDER BY o.seq LIMIT ? OFFSET ?`,
    [...w.params, limit, offset],
  );
  return rows.map(decodeRun);
}

export async function countRuns(db: Reader, f: RunFilter): Promise<number> {
  const w = where(f);
  return count(await db.get(`SELECT COUNT(*) AS n FROM runs r JOIN run_order o ON o.run_id = r.run_id ${w.sql}`, w.params));
}

/** How many runs there are of each kind in each state (the cell's metrics). */
export async function runCountsByKindAndState(db: Reader): Promise<{ kind: string; state: string; n: number }[]> {
  const rows = await db.all('SELECT kind, state, COUNT(*) AS n FROM runs GROUP BY kind, state');
  return rows.map((r) => ({ kind: String(r['kind']), state: String(r['state']), n: Number(r['n']) }));
}

/** Runs in non-terminal states, in the order they were recorded. */
export async function activeRuns(db: Reader, kind?: RunKind): Promise<Run[]> {
  const rows = kind
    ? await db.all(
        `SELECT ${RUN_COLUMNS} FROM runs r JOIN run_order o ON o.run_id = r.run_id WHERE r.kind = ? AND r.state IN ('queued', 'running', 'waiting', 'outcome_unknown') ORDER BY o.seq`,
        [kind],
      )
    : await db.all(
        `SELECT ${RUN_COLUMNS} FROM runs r JOIN run_order o ON o.run_id = r.run_id WHERE r.state IN ('queued', 'running', 'waiting', 'outcome_unknown') ORDER BY o.seq`,
      );
  return rows.map(decodeRun);
}

export interface StateUpdate {
  state: RunState;
  at: number;
  terminal: boolean;
  /** JSON text of the output, when it changes. */
  output?: string;
  /** The error, when it changes (stored as JSON, with its reason in `error_reason`). */
  error?: RunError | null;
  graph_hash?: string;
  coordinator?: string;
}

/** Moves a non-terminal run to a state; false when it is unknown or already terminal. */
export async function updateRunState(tx: Tx, runId: string, u: StateUpdate): Promise<boolean> {
  const sets = ['state = ?', 'updated_at = ?'];
  const params: SqlValue[] = [u.state, u.at];
  if (u.terminal) {
    sets.push('finished_at = ?');
    params.push(u.at);
  }
  if (u.output !== undefined) {
    sets.push('output = ?');
    params.push(u.output);
  }
  if (u.error !== undefined) {
    sets.push('error = ?', 'error_reason = ?');
    params.push(u.error === null ? null : JSON.stringify(u.error), u.error === null ? null : errorReasonOf(u.error));
  }
  if (u.graph_hash !== undefined) {
    sets.push('graph_hash = ?');
    params.push(u.graph_hash);
  }
  if (u.coordinator !== undefined) {
    sets.push('coordinator = ?');
    params.push(u.coordinator);
  }
  const r = await tx.run(
    `UPDATE runs SET ${sets.join(', ')} WHERE run_id = ? AND state NOT IN ('completed', 'failed', 'refused', 'cancelled')`,
    [...params, runId],
  );
  return r.changes > 0;
}

/**
 * Fills `error_reason` of up to `limit` runs whose error was stored before the column (migration
 * runs-008); answers how many it filled. Idempotent: a peer doing the same at once writes the same.
 */
export async function backfillErrorReasons(db: Store, limit: number): Promise<number> {
  const rows = await db.all('SELECT run_id, error FROM runs WHERE error IS NOT NULL AND error_reason IS NULL LIMIT ?', [limit]);
  if (rows.length === 0) return 0;
  await db.write(async (tx) => {
    for (const r of rows) {
      const e = jsonOrNull(r, 'error', runError);
      await tx.run('UPDATE runs SET error_reason = ? WHERE run_id = ? AND error_reason IS NULL', [
        e ? errorReasonOf(e) : 'unknown',
        str(r, 'run_id'),
      ]);
    }
  });
  return rows.length;
}

/** The run's flags, or undefined when there is no such run. */
export async function runFlags(db: Reader, runId: string): Promise<Record<string, unknown> | undefined> {
  const r = await db.get('SELECT flags FROM runs WHERE run_id = ?', [runId]);
  return r ? json(r, 'flags', object) : undefined;
}

/** Locks the run's row (a `row-locks` transaction's first statement); false when there is no such run. */
export async function lockRunRow(tx: Tx, runId: string, at: number): Promise<boolean> {
  return (await tx.run('UPDATE runs SET updated_at = ? WHERE run_id = ?', [at, runId])).changes === 1;
}

export async function updateRunFlags(tx: Tx, runId: string, flags: Record<string, unknown>, at: number): Promise<void> {
  await tx.run('UPDATE runs SET flags = ?, investigate = ?, updated_at = ? WHERE run_id = ?', [
    JSON.stringify(flags),
    flags['investigate'] ? 1 : 0,
    at,
    runId,
  ]);
}

// ---------------------------------------------------------------- journal

/** A stored journal record (format v1 or v2: exactly these fields, as signed). */
function journalRecord(v: unknown): JournalRecord {
  const o = object(v);
  const text = (k: string): string => {
    const x = o[k];
    if (typeof x !== 'string') throw new TypeError(`store row: journal record field ${k} is not text`);
    return x;
  };
  const int = (k: string): number => {
    const x = o[k];
    if (typeof x !== 'number' || !Number.isSafeInteger(x)) throw new TypeError(`store row: journal record field ${k} is not an integer`);
    return x;
  };
  if (o['v'] !== 1 && o['v'] !== 2) throw new TypeError('store row: journal record of an unknown format version');
  const data = o['data'] === undefined ? undefined : object(o['data']);
  // Keys in the order sealRecord writes them (RFC 8785 order: hashing serializes with JSON.stringify).
  if (o['v'] === 2) {
    return {
      at: int('at'),
      cell_id: text('cell_id'),
      ...(data !== undefined ? { data } : {}),
      epoch: int('epoch'),
      graph_hash: text('graph_hash'),
      input_hash: text('input_hash'),
      kind: text('kind'),
      output_hash: text('output_hash'),
      prev_hash: text('prev_hash'),
      run_id: text('run_id'),
      seq: int('seq'),
      sig: text('sig'),
      signer_kid: text('signer_kid'),
      step_id: text('step_id'),
      v: 2,
    };
  }
  return {
    at: int('at'),
    ...(data !== undefined ? { data } : {}),
    graph_hash: text('graph_hash'),
    input_hash: text('input_hash'),
    kind: text('kind'),
    output_hash: text('output_hash'),
    prev_hash: text('prev_hash'),
    run_id: text('run_id'),
    seq: int('seq'),
    sig: text('sig'),
    signer_kid: text('signer_kid'),
    step_id: text('step_id'),
    v: 1,
  };
}

const decodeRecord = (r: Row): JournalRecord => json(r, 'record', journalRecord);

export async function insertRecord(tx: Tx, rec: JournalRecord): Promise<void> {
  await tx.run('INSERT INTO journal (run_id, seq, kind, record) VALUES (?, ?, ?, ?)', [rec.run_id, rec.seq, rec.kind, recordText(rec)]);
}

/** Inserts records in one statement (a step's records written together: journal.ts appendJournalBatch). */
export async function insertRecords(tx: Tx, recs: readonly JournalRecord[]): Promise<void> {
  if (recs.length === 0) return;
  const params: SqlValue[] = [];
  for (const rec of recs) params.push(rec.run_id, rec.seq, rec.kind, recordText(rec));
  await tx.run(
    rowsText(
      insertRecordsTexts,
      recs.length,
      (n) => `INSERT INTO journal (run_id, seq, kind, record) VALUES ${Array(n).fill('(?, ?, ?, ?)').join(', ')}`,
    ),
    params,
  );
}

/** Stores blobs by hash (idempotent) in one statement; give them in hash order (two writers lock rows in the same order). */
export async function putBlobs(tx: Tx, values: readonly { hash: string; body: string }[]): Promise<void> {
  if (values.length === 0) return;
  const params: SqlValue[] = [];
  for (const v of values) params.push(v.hash, v.body);
  await tx.run(
    rowsText(
      putBlobsTexts,
      values.length,
      (n) => `INSERT INTO journal_blobs (hash, body) VALUES ${Array(n).fill('(?, ?)').join(', ')} ON CONFLICT (hash) DO NOTHING`,
    ),
    params,
  );
}

/** The run's last record, or undefined. */
export async function lastRecord(db: Reader, runId: string): Promise<JournalRecord | undefined> {
  const r = await db.get('SELECT record FROM journal WHERE run_id = ? ORDER BY seq DESC LIMIT 1', [runId]);
  return r ? decodeRecord(r) : undefined;
}

/** The run's records with seq > afterSeq, in order. */
export async function records(db: Reader, runId: string, afterSeq: number, limit: number): Promise<JournalRecord[]> {
  return (await db.all('SELECT record FROM journal WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?', [runId, afterSeq, limit])).map(
    decodeRecord,
  );
}

/** The run's records of the given kinds, in order. */
export async function recordsOfKinds(db: Reader, runId: string, kinds: readonly string[]): Promise<JournalRecord[]> {
  if (kinds.length === 0) return [];
  const rows = await db.all(`SELECT record FROM journal WHERE run_id = ? AND kind IN (${kinds.map(() => '?').join(', ')}) ORDER BY seq`, [
    runId,
    ...kinds,
  ]);
  return rows.map(decodeRecord);
}

/**
 * Of `runIds`, those whose journal holds a cancel request or their end, with
 * who asked for the cancel (null when the run ended without one).
 */
export async function closedOrCancelled(db: Reader, runIds: readonly string[]): Promise<{ run_id: string; by: string | null }[]> {
  if (runIds.length === 0) return [];
  const rows = await db.all(
    `SELECT record FROM journal WHERE kind IN ('cancel_requested', 'run_finished') AND run_id IN (${runIds.map(() => '?').join(', ')}) ORDER BY seq`,
    [...runIds],
  );
  return rows.map((r) => {
    const rec = decodeRecord(r);
    const by = rec.kind === 'cancel_requested' ? rec.data?.['by'] : undefined;
    return { run_id: rec.run_id, by: typeof by === 'string' ? by : null };
  });
}

export async function hasRecordOfKind(db: Reader, runId: string, kind: string): Promise<boolean> {
  return (await db.get('SELECT 1 AS x FROM journal WHERE run_id = ? AND kind = ? LIMIT 1', [runId, kind])) !== undefined;
}

/**
 * The run's highest seq (0 when it has no record). The run id is bound as
 * CAST(? AS TEXT): with a bare `?` compared to the key column of a MAX(),
 * a call on the embedded engine (SQLite) costs about what compiling the
 * statement again costs (measured: 11.5 µs against 2.5 µs at 63 records; for
 * a statement reading it with the storage in use, 70 µs against 12 µs); PostgreSQL plans both spellings alike.
 */
export async function lastSeq(db: Reader, runId: string): Promise<number> {
  return count(await db.get('SELECT COALESCE(MAX(seq), 0) AS n FROM journal WHERE run_id = CAST(? AS TEXT)', [runId]));
}

/** Stores a blob by its hash (idempotent). */
export async function putBlob(tx: Tx, hash: string, body: string): Promise<void> {
  await tx.run('INSERT INTO journal_blobs (hash, body) VALUES (?, ?) ON CONFLICT (hash) DO NOTHING', [hash, body]);
}

export async function blob(db: Reader, hash: string): Promise<unknown> {
  const r = await db.get('SELECT body FROM journal_blobs WHERE hash = ?', [hash]);
  return r ? json(r, 'body', anyJson) : undefined;
}

// ---------------------------------------------------------------- approvals

export type Decision = 'approve' | 'reject';
const DECISIONS: readonly Decision[] = ['approve', 'reject'];

export interface DecisionRow {
  principal: string;
  /** The deciding chain: the principal, then the actors of its token (rows from before chains: the principal). */
  chain: string[];
  decision: Decision;
  comment: string | null;
  /** The digest of the step input it approved; null for rows from before digests (they approve nothing). */
  input_hash: string | null;
  at: number;
}

function chainOf(r: Row): string[] {
  const principal = str(r, 'principal');
  const raw = strOrNull(r, 'chain');
  if (raw === null) return [principal];
  const v: unknown = JSON.parse(raw);
  if (!Array.isArray(v) || !v.every((p) => typeof p === 'string')) throw new TypeError('store row: team_approvals.chain');
  return v as string[];
}

function decisionRow(r: Row): DecisionRow & { step_id: string } {
  return {
    step_id: str(r, 'step_id'),
    principal: str(r, 'principal'),
    chain: chainOf(r),
    decision: oneOf(DECISIONS, str(r, 'decision'), 'decision'),
    comment: strOrNull(r, 'comment'),
    input_hash: strOrNull(r, 'input_hash'),
    at: num(r, 'at'),
  };
}

const DECISION_COLUMNS = 'step_id, principal, chain, decision, comment, input_hash, at';

/** Decisions recorded for a step, oldest first. */
export async function decisions(db: Reader, runId: string, stepId: string): Promise<DecisionRow[]> {
  const rows = await db.all(`SELECT ${DECISION_COLUMNS} FROM team_approvals WHERE run_id = ? AND step_id = ? ORDER BY at, principal`, [
    runId,
    stepId,
  ]);
  return rows.map(decisionRow);
}

/** Every decision of a run, oldest first (the run's view keeps them after their step is decided). */
export async function runDecisions(db: Reader, runId: string): Promise<(DecisionRow & { step_id: string })[]> {
  const rows = await db.all(`SELECT ${DECISION_COLUMNS} FROM team_approvals WHERE run_id = ? ORDER BY at, step_id, principal`, [runId]);
  return rows.map(decisionRow);
}

export async function insertDecision(
  tx: Tx,
  d: {
    runId: string;
    stepId: string;
    principal: string;
    chain: readonly string[];
    decision: Decision;
    comment: string | null;
    inputHash: string;
    at: number;
  },
): Promise<void> {
  await tx.run(
    'INSERT INTO team_approvals (run_id, step_id, principal, chain, decision, comment, input_hash, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    [d.runId, d.stepId, d.principal, JSON.stringify(d.chain), d.decision, d.comment, d.inputHash, d.at],
  );
}

/** Removes a principal's decision on a step (it decided on another input; its new decision replaces it). */
export async function deleteDecision(tx: Tx, runId: string, stepId: string, principal: string): Promise<void> {
  await tx.run('DELETE FROM team_approvals WHERE run_id = ? AND step_id = ? AND principal = ?', [runId, stepId, principal]);
}

/** What the engine asked when it started waiting on a step. */
export interface ApprovalAsk {
  kind: string;
  rule: string;
  approvers: string[];
  quorum: number;
  prompt: string | null;
  due: number | null;
  /** The digest of the step input a decision approves; null for requests from before digests. */
  input_hash: string | null;
}

function approvalAsk(v: unknown): ApprovalAsk {
  const o = object(v);
  const approvers = o['approvers'];
  if (
    typeof o['kind'] !== 'string' ||
    typeof o['rule'] !== 'string' ||
    typeof o['quorum'] !== 'number' ||
    !Array.isArray(approvers) ||
    !approvers.every((a) => typeof a === 'string')
  ) {
    throw new TypeError('store row: not an approval request');
  }
  const prompt = o['prompt'];
  const due = o['due'];
  return {
    kind: o['kind'],
    rule: o['rule'],
    approvers: approvers as string[],
    quorum: o['quorum'],
    prompt: typeof prompt === 'string' ? prompt : null,
    due: typeof due === 'number' ? due : null,
    input_hash: typeof o['input_hash'] === 'string' ? o['input_hash'] : null,
  };
}

/** The input digest of a step's approval request: null when the request names none, undefined when there is no request. */
export async function approvalRequestDigest(db: Reader, runId: string, stepId: string): Promise<string | null | undefined> {
  const r = await db.get('SELECT body FROM team_approval_requests WHERE run_id = ? AND step_id = ?', [runId, stepId]);
  return r === undefined ? undefined : json(r, 'body', approvalAsk).input_hash;
}

/**
 * Records what the engine waits on. The first request's time stays; its body is replaced only by a
 * request that names the input digest (a request from before digests gains it on the next drive).
 */
export async function insertApprovalRequest(tx: Tx, runId: string, stepId: string, ask: JsonObject, at: number): Promise<void> {
  await tx.run(
    `INSERT INTO team_approval_requests (run_id, step_id, body, at) VALUES (?, ?, ?, ?)
     ON CONFLICT (run_id, step_id) DO UPDATE SET body = excluded.body`,
    [runId, stepId, JSON.stringify(ask), at],
  );
}

/** The run's approval requests, oldest first. */
export async function approvalRequests(db: Reader, runId: string): Promise<(ApprovalAsk & { step_id: string; at: number })[]> {
  const rows = await db.all('SELECT step_id, body, at FROM team_approval_requests WHERE run_id = ? ORDER BY at, step_id', [runId]);
  return rows.map((r) => ({ step_id: str(r, 'step_id'), ...json(r, 'body', approvalAsk), at: num(r, 'at') }));
}

// ---------------------------------------------------------------- storage metering (storage.ts)

/** Bytes counted for a scope (`cell`, `workspace:<id>`) and folded into its total (add unfoldedStorage for the rest). */
export async function storageTotal(db: Reader, scope: string): Promise<number> {
  const r = await db.get('SELECT bytes FROM storage_totals WHERE scope = ?', [scope]);
  return r ? num(r, 'bytes') : 0;
}

/** Bytes counted for a run (folded, plus its share not yet folded), or null when it was never metered. */
export async function runStorageBytes(db: Reader, runId: string): Promise<number | null> {
  const r = await db.get(
    `SELECT (SELECT bytes FROM run_storage WHERE run_id = CAST(? AS TEXT)) AS folded,
       (SELECT bytes FROM run_storage_unfolded WHERE run_id = CAST(? AS TEXT)) AS unfolded`,
    [runId, runId],
  );
  const folded = r === undefined ? null : numOrNull(r, 'folded');
  const unfolded = r === undefined ? null : numOrNull(r, 'unfolded');
  return folded === null && unfolded === null ? null : (folded ?? 0) + (unfolded ?? 0);
}

/** A run's workspace and spec text (what its first metered write counts). */
export async function runWorkspaceAndSpec(db: Reader, runId: string): Promise<{ workspace_id: string | null; spec: string } | undefined> {
  const r = await db.get('SELECT workspace_id, spec FROM runs WHERE run_id = ?', [runId]);
  return r ? { workspace_id: strOrNull(r, 'workspace_id'), spec: str(r, 'spec') } : undefined;
}

/**
 * The one order every writer of several storage shares takes their rows in (addStorages, foldStorage):
 * run ids as JavaScript compares strings, which the database's collation may not.
 */
const shareOrder = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * Adds `bytes` to a run's share not yet summed into its count and the scopes' totals
 * (`run_storage_unfolded`): the run's own row only (foldStorage sums it). The row's one indexed
 * column never changes, so PostgreSQL updates it in place (HOT) and prunes what it replaced.
 */
export async function addStorage(tx: Tx, runId: string, workspaceId: string | null, bytes: number): Promise<void> {
  await tx.run(
    `INSERT INTO run_storage_unfolded (run_id, workspace_id, bytes) VALUES (?, ?, ?)
     ON CONFLICT (run_id) DO UPDATE SET bytes = run_storage_unfolded.bytes + excluded.bytes`,
    [runId, workspaceId, bytes],
  );
}

/** addStorage for several runs in one statement (one row each; give each run once). */
export async function addStorages(tx: Tx, shares: readonly { runId: string; workspaceId: string | null; bytes: number }[]): Promise<void> {
  if (shares.length === 0) return;
  const params: SqlValue[] = [];
  // In run id order, as the fold takes them (foldStorage): two writers of these rows lock them in one order.
  for (const x of [...shares].sort((a, b) => shareOrder(a.runId, b.runId))) params.push(x.runId, x.workspaceId, x.bytes);
  await tx.run(
    rowsText(
      addStoragesTexts,
      shares.length,
      (n) => `INSERT INTO run_storage_unfolded (run_id, workspace_id, bytes) VALUES ${Array(n).fill('(?, ?, ?)').join(', ')}
     ON CONFLICT (run_id) DO UPDATE SET bytes = run_storage_unfolded.bytes + excluded.bytes`,
    ),
    params,
  );
}

/** Bytes of runs not summed into the totals yet: of every run, or of a workspace's runs. */
export async function unfoldedStorage(db: Reader, workspaceId?: string): Promise<number> {
  const r =
    workspaceId === undefined
      ? await db.get('SELECT COALESCE(SUM(bytes), 0) AS n FROM run_storage_unfolded')
      : await db.get('SELECT COALESCE(SUM(bytes), 0) AS n FROM run_storage_unfolded WHERE workspace_id = ?', [workspaceId]);
  return count(r);
}

/**
 * Sums the runs' unfolded shares (run_storage_unfolded) into their runs' counts (run_storage) and
 * the scopes' totals (storage_totals), in a `row-locks` transaction: the cell total's row is locked
 * first, so folds of several cells take turns, and each share is read after that lock and subtracted
 * as read (an append adding to it meanwhile keeps what it added); a share left at nothing is removed,
 * so the table holds the runs that wrote since the last fold. Returns the bytes folded.
 */
export async function foldStorage(tx: Tx): Promise<number> {
  await tx.run(
    "INSERT INTO storage_totals (scope, bytes) VALUES ('cell', 0) ON CONFLICT (scope) DO UPDATE SET bytes = storage_totals.bytes",
  );
  const rows = (await tx.all('SELECT run_id, workspace_id, bytes FROM run_storage_unfolded ORDER BY run_id LIMIT 500')).sort((a, b) =>
    shareOrder(str(a, 'run_id'), str(b, 'run_id')),
  );
  if (rows.length === 0) return 0;
  let total = 0;
  const byWorkspace = new Map<string, number>();
  const counts: SqlValue[] = [];
  for (const r of rows) {
    const n = num(r, 'bytes');
    const ws = strOrNull(r, 'workspace_id');
    counts.push(str(r, 'run_id'), ws, n);
    total += n;
    if (ws !== null) byWorkspace.set(ws, (byWorkspace.get(ws) ?? 0) + n);
  }
  // Every statement issued before any answer is awaited (one round trip on PostgreSQL): the shares
  // are locked (and their runs' appends wait) for that long, not a round trip per run, so a fold never
  // holds the runs' path up on a busy machine. Each share is taken by a statement of its own, in run
  // id order, the order a group of appends adds to them (addStorages): a statement over them all would
  // lock them in the order its plan reads the table, and a group adding to two of them in the other
  // order would deadlock with it (PostgreSQL breaks that after its deadlock_timeout, a second).
  const ids = rows.map((r) => str(r, 'run_id'));
  const add =
    'INSERT INTO storage_totals (scope, bytes) VALUES (?, ?) ON CONFLICT (scope) DO UPDATE SET bytes = storage_totals.bytes + excluded.bytes';
  await Promise.all([
    ...rows.map((r) => tx.run('UPDATE run_storage_unfolded SET bytes = bytes - ? WHERE run_id = ?', [num(r, 'bytes'), str(r, 'run_id')])),
    tx.run(`DELETE FROM run_storage_unfolded WHERE run_id IN (${ids.map(() => '?').join(', ')}) AND bytes = 0`, ids),
    tx.run(
      `INSERT INTO run_storage (run_id, workspace_id, bytes) VALUES ${rows.map(() => '(?, ?, ?)').join(', ')}
       ON CONFLICT (run_id) DO UPDATE SET bytes = run_storage.bytes + excluded.bytes`,
      counts,
    ),
    tx.run(add, ['cell', total]),
    ...[...byWorkspace].sort(([a], [b]) => (a < b ? -1 : 1)).map(([ws, n]) => tx.run(add, [`workspace:${ws}`, n])),
  ]);
  return total;
}

/** How many approval decisions a run has (a drive that waits compares it with the count it started with). */
export async function decisionCount(db: Reader, runId: string): Promise<number> {
  return count(await db.get('SELECT COUNT(*) AS n FROM team_approvals WHERE run_id = ?', [runId]));
}

// ---------------------------------------------------------------- lost outcomes (outcomes.ts)

export type Resolution = 'retry' | 'record' | 'fail';
const RESOLUTIONS: readonly Resolution[] = ['retry', 'record', 'fail'];

export interface ResolutionRow {
  attempt: number;
  resolution: Resolution;
  /** `record`: the call's result (JSON); null otherwise. */
  result: unknown;
  principal: string;
  comment: string | null;
  at: number;
}

/** The latest resolution of a lost outcome of a step (its highest attempt), or undefined. */
export async function latestResolution(db: Reader, runId: string, stepId: string): Promise<ResolutionRow | undefined> {
  const r = await db.get(
    `SELECT attempt, resolution, result, principal, comment, at FROM run_outcome_resolutions
     WHERE run_id = ? AND step_id = ? ORDER BY attempt DESC LIMIT 1`,
    [runId, stepId],
  );
  if (!r) return undefined;
  return {
    attempt: num(r, 'attempt'),
    resolution: oneOf(RESOLUTIONS, str(r, 'resolution'), 'resolution'),
    result: jsonOrNull(r, 'result', anyJson),
    principal: str(r, 'principal'),
    comment: strOrNull(r, 'comment'),
    at: num(r, 'at'),
  };
}

/** Whether the attempt of a step was resolved already. */
export async function hasResolution(db: Reader, runId: string, stepId: string, attempt: number): Promise<boolean> {
  return (
    (await db.get('SELECT 1 AS x FROM run_outcome_resolutions WHERE run_id = ? AND step_id = ? AND attempt = ?', [
      runId,
      stepId,
      attempt,
    ])) !== undefined
  );
}

export async function insertResolution(tx: Tx, runId: string, stepId: string, r: ResolutionRow): Promise<void> {
  await tx.run(
    'INSERT INTO run_outcome_resolutions (run_id, step_id, attempt, resolution, result, principal, comment, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    [
      runId,
      stepId,
      r.attempt,
      r.resolution,
      r.resolution === 'record' ? JSON.stringify(r.result ?? null) : null,
      r.principal,
      r.comment,
      r.at,
    ],
  );
}
