/**
 * What runs keep in the store, and the three limits on it (docs/jobs.md,
 * "Storage limits"). Every byte a run stores goes through journal.ts, which
 * meters it here in the same transaction that writes it:
 *
 * - a run's bytes: its spec (as the run row keeps it, counted when the run is
 *   first metered), each journal record (as stored), each distinct payload
 *   value (step inputs and outputs, stored once by content hash: a value a
 *   run stores twice there counts once), and its final output and error as the
 *   run row keeps them (a second copy of the last step's output). Limit: the
 *   run cap (`runStorageCapBytes`, default 1 MiB);
 * - a workspace's bytes: what the runs of that workspace keep, plus the size
 *   of the workspace's SQL database file (a provider the jobs module
 *   registers). Limit: `workspaceQuotaBytes`;
 * - the cell's bytes: what all runs keep. Limit: `runStorageQuotaBytes`
 *   (workspace ids are the caller's choice, so only a cell-wide limit bounds
 *   the store).
 *
 * A payload that would pass a limit is refused: nothing of it is written,
 * `RunStorageLimitError` is thrown, and the run fails with the limit's reason
 * (drive.ts). Records that carry no payload (refusals, cancels, the terminal
 * record) are counted but never refused, so a run can always record how it
 * ended. Runs are kept: a workspace or a cell without room for a new run
 * refuses new job runs (`assertStorageRoom`, 409) and scheduled fires
 * (`storageRoomRefusal`) until an operator raises the limit.
 */
import { ServiceError } from '../../core/errors.ts';
import type { JournalRecord } from '../../core/journal/record.ts';
import type { Cell } from '../context.ts';
import type { Migration, Tx } from '../store/types.ts';

export const STORAGE_MIGRATIONS: readonly Migration[] = [
  {
    // Runs recorded before metering are counted from what they keep now: records and the
    // distinct blobs their records name (as stored: UTF-8 bytes of the JSON text).
    id: 'runs-003-storage',
    sql: `CREATE TABLE run_storage (run_id TEXT PRIMARY KEY, workspace_id TEXT, bytes INTEGER NOT NULL);
    CREATE TABLE storage_totals (scope TEXT PRIMARY KEY, bytes INTEGER NOT NULL);
    INSERT INTO run_storage (run_id, workspace_id, bytes)
      SELECT r.run_id, r.workspace_id,
        length(CAST(r.spec AS BLOB)) + COALESCE(length(CAST(r.output AS BLOB)), 0) + COALESCE(length(CAST(r.error AS BLOB)), 0)
        + COALESCE((SELECT SUM(length(CAST(j.record AS BLOB))) FROM journal j WHERE j.run_id = r.run_id), 0)
        + COALESCE((SELECT SUM(length(CAST(b.body AS BLOB))) FROM journal_blobs b WHERE b.hash IN (
            SELECT json_extract(j.record, '$.input_hash') FROM journal j WHERE j.run_id = r.run_id
            UNION SELECT json_extract(j.record, '$.output_hash') FROM journal j WHERE j.run_id = r.run_id)), 0)
      FROM runs r;
    INSERT INTO storage_totals (scope, bytes) SELECT 'cell', COALESCE(SUM(bytes), 0) FROM run_storage;
    INSERT INTO storage_totals (scope, bytes)
      SELECT 'workspace:' || workspace_id, SUM(bytes) FROM run_storage WHERE workspace_id IS NOT NULL GROUP BY workspace_id;`,
  },
];

export type StorageLimit = 'run_storage_cap' | 'workspace_quota' | 'cell_storage_quota';

/** A payload refused because storing it would pass a limit; nothing of it was written. */
export class RunStorageLimitError extends Error {
  constructor(readonly reason: StorageLimit, readonly limitBytes: number, readonly usedBytes: number, readonly addingBytes: number) {
    super(`storing ${addingBytes} more bytes would pass the ${LIMIT_NAMES[reason]} of ${limitBytes} bytes (${usedBytes} used)`);
    this.name = 'RunStorageLimitError';
  }

  /** The run's error `details`. */
  details(): Record<string, number> {
    return { limit_bytes: this.limitBytes, used_bytes: this.usedBytes, adding_bytes: this.addingBytes };
  }
}

const LIMIT_NAMES: Record<StorageLimit, string> = {
  run_storage_cap: 'run storage cap',
  workspace_quota: 'workspace storage quota',
  cell_storage_quota: 'cell run storage quota',
};

/** The RunStorageLimitError that ended a run, found along an error's `cause` chain (the engine wraps what its ports throw). */
export function storageLimitOf(err: unknown): RunStorageLimitError | undefined {
  for (let e = err, depth = 0; e !== undefined && e !== null && depth < 8; depth++) {
    if (e instanceof RunStorageLimitError) return e;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** UTF-8 size of a string as stored. */
export function byteSize(s: string): number {
  return Buffer.byteLength(s, 'utf8');
}

// ------------------------------------------------------------ workspace files

const fileProviders = new WeakMap<Cell, (workspaceId: string) => number>();

/** Registers how big a workspace's files are (the jobs module: its SQL database). */
export function registerWorkspaceFiles(cell: Cell, bytesOf: (workspaceId: string) => number): void {
  fileProviders.set(cell, bytesOf);
}

function fileBytes(cell: Cell, workspaceId: string | null): number {
  if (workspaceId === null) return 0;
  return fileProviders.get(cell)?.(workspaceId) ?? 0;
}

// ------------------------------------------------------------ usage

function total(db: Pick<Tx, 'get'>, scope: string): number {
  return db.get<{ bytes: number }>('SELECT bytes FROM storage_totals WHERE scope = ?', [scope])?.bytes ?? 0;
}

export interface WorkspaceUsage {
  /** Bytes the runs of the workspace keep in the store. */
  run_bytes: number;
  /** Bytes of the workspace's files (its SQL database). */
  file_bytes: number;
  quota_bytes: number;
}

/** What a workspace uses now. */
export function workspaceUsage(cell: Cell, workspaceId: string): WorkspaceUsage {
  return { run_bytes: total(cell.store, `workspace:${workspaceId}`), file_bytes: fileBytes(cell, workspaceId), quota_bytes: cell.config.workspaceQuotaBytes };
}

/** Bytes all runs keep in the store. */
export function cellRunBytes(cell: Cell): number {
  return total(cell.store, 'cell');
}

/** Room a run needs besides its spec: its records alone (about 650 bytes each, sealed) take a few KiB. */
export const MIN_RUN_ROOM_BYTES = 8 * 1024;

/** Why a new run of `specBytes` has no room (its own cap, the workspace's quota, the cell's), or null. */
export function storageRoomRefusal(cell: Cell, workspaceId: string, specBytes: number): { reason: StorageLimit; used_bytes: number; quota_bytes: number } | null {
  if (specBytes + MIN_RUN_ROOM_BYTES > cell.config.runStorageCapBytes) return { reason: 'run_storage_cap', used_bytes: specBytes, quota_bytes: cell.config.runStorageCapBytes };
  const ws = workspaceUsage(cell, workspaceId);
  const wsUsed = ws.run_bytes + ws.file_bytes;
  if (wsUsed + specBytes + MIN_RUN_ROOM_BYTES > ws.quota_bytes) return { reason: 'workspace_quota', used_bytes: wsUsed, quota_bytes: ws.quota_bytes };
  const used = cellRunBytes(cell);
  if (used + specBytes + MIN_RUN_ROOM_BYTES > cell.config.runStorageQuotaBytes) return { reason: 'cell_storage_quota', used_bytes: used, quota_bytes: cell.config.runStorageQuotaBytes };
  return null;
}

/**
 * Refuses a new run of `specBytes` that has no room: 400 invalid_request
 * (`run_storage_cap`) when its spec alone leaves no room within the run cap,
 * 409 conflict (`workspace_quota`, `cell_storage_quota`) when the workspace or
 * the cell has none left. Nothing is written.
 */
export function assertStorageRoom(cell: Cell, workspaceId: string, specBytes: number): void {
  const r = storageRoomRefusal(cell, workspaceId, specBytes);
  if (r === null) return;
  if (r.reason === 'run_storage_cap') {
    throw new ServiceError('invalid_request', `the spec (${specBytes} bytes) leaves a run no room within the run storage cap of ${r.quota_bytes} bytes`, { details: { reason: r.reason, spec_bytes: specBytes, limit_bytes: r.quota_bytes } });
  }
  const what = r.reason === 'workspace_quota' ? `workspace ${workspaceId} has` : 'the cell\'s runs have';
  throw new ServiceError('conflict', `${what} no room left for a new run within the storage quota of ${r.quota_bytes} bytes`, { details: { ...r } });
}

/**
 * Bytes a run may still store before any limit refuses it: its own cap, its
 * workspace's quota and the cell's, whichever is closest (0 when none is left).
 */
export function storageLeft(cell: Cell, runId: string): number {
  const m = meterOf(cell, runId);
  let left = cell.config.runStorageCapBytes - m.bytes;
  if (m.workspace !== null) {
    const ws = workspaceUsage(cell, m.workspace);
    left = Math.min(left, ws.quota_bytes - ws.run_bytes - ws.file_bytes);
  }
  left = Math.min(left, cell.config.runStorageQuotaBytes - cellRunBytes(cell));
  return Math.max(0, left);
}

// ------------------------------------------------------------ metering (journal.ts)

interface RunMeter {
  workspace: string | null;
  bytes: number;
  hashes: Set<string>;
  /** The spec's bytes, until the run's first metered write counts them. */
  spec: number;
}

const meters = new WeakMap<Cell, Map<string, RunMeter>>();

/** The run's meter: loaded once per process from the store (its total, and the payload hashes its records name). */
function meterOf(cell: Cell, runId: string): RunMeter {
  let byRun = meters.get(cell);
  if (!byRun) { byRun = new Map(); meters.set(cell, byRun); }
  let m = byRun.get(runId);
  if (m) return m;
  const row = cell.store.get<{ bytes: number }>('SELECT bytes FROM run_storage WHERE run_id = ?', [runId]);
  const run = cell.store.get<{ workspace_id: string | null; spec: string }>('SELECT workspace_id, spec FROM runs WHERE run_id = ?', [runId]);
  const hashes = new Set<string>();
  for (const r of cell.store.all<{ record: string }>('SELECT record FROM journal WHERE run_id = ?', [runId])) {
    const rec = JSON.parse(r.record) as JournalRecord;
    hashes.add(rec.input_hash);
    hashes.add(rec.output_hash);
  }
  m = { workspace: run?.workspace_id ?? null, bytes: row?.bytes ?? 0, hashes, spec: row || !run ? 0 : byteSize(run.spec) };
  byRun.set(runId, m);
  return m;
}

/** A value about to be stored: its content hash and its stored JSON text. */
export interface PreparedValue { hash: string; body: string }

function measure(m: RunMeter, recordBytes: number, values: readonly PreparedValue[]): { adding: number; fresh: Set<string> } {
  const fresh = new Set<string>();
  let adding = recordBytes + m.spec;
  for (const v of values) {
    if (m.hashes.has(v.hash) || fresh.has(v.hash)) continue;
    fresh.add(v.hash);
    adding += byteSize(v.body);
  }
  return { adding, fresh };
}

function refusal(cell: Cell, db: Pick<Tx, 'get'>, m: RunMeter, adding: number): RunStorageLimitError | null {
  if (m.bytes + adding > cell.config.runStorageCapBytes) return new RunStorageLimitError('run_storage_cap', cell.config.runStorageCapBytes, m.bytes, adding);
  if (m.workspace !== null) {
    const used = total(db, `workspace:${m.workspace}`) + fileBytes(cell, m.workspace);
    if (used + adding > cell.config.workspaceQuotaBytes) return new RunStorageLimitError('workspace_quota', cell.config.workspaceQuotaBytes, used, adding);
  }
  const used = total(db, 'cell');
  if (used + adding > cell.config.runStorageQuotaBytes) return new RunStorageLimitError('cell_storage_quota', cell.config.runStorageQuotaBytes, used, adding);
  return null;
}

/** The limit that storing `recordBytes` plus `values` for the run would pass, or null (reads only). */
export function storageRefusal(cell: Cell, runId: string, recordBytes: number, values: readonly PreparedValue[]): RunStorageLimitError | null {
  const m = meterOf(cell, runId);
  return refusal(cell, cell.store, m, measure(m, recordBytes, values).adding);
}

/**
 * Meters what one write of a run stores, inside that write's transaction:
 * `recordBytes` plus the values whose hash is new for the run. With
 * `enforce`, throws RunStorageLimitError (and the caller's transaction rolls
 * back) when that would pass a limit. Returns the commit step, to call once the
 * transaction is durable.
 */
export function meterTx(cell: Cell, tx: Tx, runId: string, recordBytes: number, values: readonly PreparedValue[], enforce: boolean): () => void {
  const m = meterOf(cell, runId);
  const { adding, fresh } = measure(m, recordBytes, values);
  if (enforce) {
    const refused = refusal(cell, tx, m, adding);
    if (refused) throw refused;
  }
  tx.run('INSERT INTO run_storage (run_id, workspace_id, bytes) VALUES (?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET bytes = bytes + excluded.bytes', [runId, m.workspace, adding]);
  const scopes = m.workspace !== null ? ['cell', `workspace:${m.workspace}`] : ['cell'];
  for (const scope of scopes) {
    tx.run('INSERT INTO storage_totals (scope, bytes) VALUES (?, ?) ON CONFLICT (scope) DO UPDATE SET bytes = bytes + excluded.bytes', [scope, adding]);
  }
  return () => {
    m.bytes += adding;
    m.spec = 0;
    for (const h of fresh) m.hashes.add(h);
  };
}

/** Forgets a finished run's meter (its totals stay in the store). */
export function forgetMeter(cell: Cell, runId: string): void {
  meters.get(cell)?.delete(runId);
}
