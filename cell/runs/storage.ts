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
 * A write adds to its run's own share only (`run_storage_unfolded`: the bytes
 * not yet summed into its count and the totals); `foldStorage` sums the shares
 * into `run_storage` (each run's count) and `storage_totals` off the path, and
 * removes them, so the shares a limit reads are those of the runs that wrote
 * since the last fold. A limit is checked against what is committed
 * when the write reads it, outside any lock: writes of other runs in flight at
 * that moment are not seen, so a quota may be passed by at most those writes.
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
import type { Reader, Tx } from '../store/types.ts';
import type { RunMeter, RunsContext } from './context.ts';
import * as repo from './repository.ts';

export type StorageLimit = 'run_storage_cap' | 'workspace_quota' | 'cell_storage_quota';

/** A payload refused because storing it would pass a limit; nothing of it was written. */
export class RunStorageLimitError extends Error {
  constructor(
    readonly reason: StorageLimit,
    readonly limitBytes: number,
    readonly usedBytes: number,
    readonly addingBytes: number,
  ) {
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

/** How big the workspace's files are (its SQL databases: RunsContext.workspaceFiles); 0 without a workspace. */
export function workspaceFileBytes(ctx: RunsContext, workspaceId: string | null): number {
  if (workspaceId === null || !ctx.workspaceFiles) return 0;
  return ctx.workspaceFiles(workspaceId);
}

// ------------------------------------------------------------ usage

export interface WorkspaceUsage {
  /** Bytes the runs of the workspace keep in the store. */
  run_bytes: number;
  /** Bytes of the workspace's files (its SQL database). */
  file_bytes: number;
  quota_bytes: number;
}

/** What a workspace uses now. */
export async function workspaceUsage(ctx: RunsContext, workspaceId: string, db: Reader = ctx.core.store): Promise<WorkspaceUsage> {
  return {
    run_bytes: (await repo.storageTotal(db, `workspace:${workspaceId}`)) + (await repo.unfoldedStorage(db, workspaceId)),
    file_bytes: workspaceFileBytes(ctx, workspaceId),
    quota_bytes: ctx.core.config.workspaceQuotaBytes,
  };
}

/** Bytes the cell's runs keep in the store, all workspaces together (the cell's quota counts them). */
export async function cellRunBytes(ctx: RunsContext, db: Reader = ctx.core.store): Promise<number> {
  return (await repo.storageTotal(db, 'cell')) + (await repo.unfoldedStorage(db));
}

/** Room a run needs besides its spec: its records alone (about 650 bytes each, sealed) take a few KiB. */
export const MIN_RUN_ROOM_BYTES = 8 * 1024;

/** Why a new run of `specBytes` has no room (its own cap, the workspace's quota, the cell's), or null. */
export async function storageRoomRefusal(
  ctx: RunsContext,
  workspaceId: string,
  specBytes: number,
  db: Reader = ctx.core.store,
): Promise<{ reason: StorageLimit; used_bytes: number; quota_bytes: number } | null> {
  const config = ctx.core.config;
  if (specBytes + MIN_RUN_ROOM_BYTES > config.runStorageCapBytes)
    return { reason: 'run_storage_cap', used_bytes: specBytes, quota_bytes: config.runStorageCapBytes };
  // One statement for both scopes (it was four round trips, and a launch pays it).
  const usage = await repo.storageUsage(db, workspaceId);
  const wsUsed = usage.workspace + workspaceFileBytes(ctx, workspaceId);
  if (wsUsed + specBytes + MIN_RUN_ROOM_BYTES > config.workspaceQuotaBytes)
    return { reason: 'workspace_quota', used_bytes: wsUsed, quota_bytes: config.workspaceQuotaBytes };
  const used = usage.cell;
  if (used + specBytes + MIN_RUN_ROOM_BYTES > config.runStorageQuotaBytes)
    return { reason: 'cell_storage_quota', used_bytes: used, quota_bytes: config.runStorageQuotaBytes };
  return null;
}

/**
 * Refuses a new run of `specBytes` that has no room: 400 invalid_request
 * (`run_storage_cap`) when its spec alone leaves no room within the run cap,
 * 409 conflict (`workspace_quota`, `cell_storage_quota`) when the workspace or
 * the cell has none left. Nothing is written.
 */
export async function assertStorageRoom(ctx: RunsContext, workspaceId: string, specBytes: number): Promise<void> {
  const r = await storageRoomRefusal(ctx, workspaceId, specBytes);
  if (r === null) return;
  if (r.reason === 'run_storage_cap') {
    throw new ServiceError(
      'invalid_request',
      `the spec (${specBytes} bytes) leaves a run no room within the run storage cap of ${r.quota_bytes} bytes`,
      { details: { reason: r.reason, spec_bytes: specBytes, limit_bytes: r.quota_bytes } },
    );
  }
  const what = r.reason === 'workspace_quota' ? `workspace ${workspaceId} has` : "the cell's runs have";
  throw new ServiceError('conflict', `${what} no room left for a new run within the storage quota of ${r.quota_bytes} bytes`, {
    details: { ...r },
  });
}

/**
 * Bytes a run may still store before any limit refuses it: its own cap, its
 * workspace's quota and the cell's, whichever is closest (0 when none is left).
 */
export async function storageLeft(ctx: RunsContext, runId: string): Promise<number> {
  const config = ctx.core.config;
  const m = await meterOf(ctx, runId);
  let left = config.runStorageCapBytes - m.bytes;
  if (m.workspace !== null) {
    const ws = await workspaceUsage(ctx, m.workspace);
    left = Math.min(left, ws.quota_bytes - ws.run_bytes - ws.file_bytes);
  }
  left = Math.min(left, config.runStorageQuotaBytes - (await cellRunBytes(ctx)));
  return Math.max(0, left);
}

// ------------------------------------------------------------ metering (journal.ts)

/** The run's meter: loaded once per process from the store (its total, and the payload hashes its records name). */
async function meterOf(ctx: RunsContext, runId: string): Promise<RunMeter> {
  const hit = ctx.meters.get(runId);
  if (hit) return hit;
  const db = ctx.core.store;
  const bytes = await repo.runStorageBytes(db, runId);
  const run = await repo.runWorkspaceAndSpec(db, runId);
  const hashes = new Set<string>();
  for (const rec of (await repo.records(db, runId, 0, 1_000_000)) as JournalRecord[]) {
    hashes.add(rec.input_hash);
    hashes.add(rec.output_hash);
  }
  const m: RunMeter = {
    workspace: run?.workspace_id ?? null,
    bytes: bytes ?? 0,
    hashes,
    spec: bytes !== null || !run ? 0 : byteSize(run.spec),
  };
  // Another append may have loaded it meanwhile: keep the first.
  const again = ctx.meters.get(runId);
  if (again) return again;
  ctx.meters.set(runId, m);
  return m;
}

/** A value about to be stored: its content hash and its stored JSON text. */
export interface PreparedValue {
  hash: string;
  body: string;
}

/**
 * What storing `recordBytes` plus `values` adds to the run: the values whose
 * hash is new for the run (and not in `fresh`, the values of the same
 * transaction counted already, which it extends) count.
 */
export function measure(
  m: RunMeter,
  recordBytes: number,
  values: readonly PreparedValue[],
  fresh: Set<string> = new Set(),
): { adding: number; fresh: Set<string> } {
  let adding = recordBytes + m.spec;
  for (const v of values) {
    if (m.hashes.has(v.hash) || fresh.has(v.hash)) continue;
    fresh.add(v.hash);
    adding += byteSize(v.body);
  }
  return { adding, fresh };
}

/**
 * The limit that `adding` more bytes for the run would pass, given the
 * storage in use as one statement read it (repository storageUsage), or null.
 */
export function usageRefusal(
  ctx: RunsContext,
  m: RunMeter,
  usage: { cell: number; workspace: number },
  adding: number,
): RunStorageLimitError | null {
  const config = ctx.core.config;
  if (m.bytes + adding > config.runStorageCapBytes)
    return new RunStorageLimitError('run_storage_cap', config.runStorageCapBytes, m.bytes, adding);
  if (m.workspace !== null) {
    const used = usage.workspace + workspaceFileBytes(ctx, m.workspace);
    if (used + adding > config.workspaceQuotaBytes)
      return new RunStorageLimitError('workspace_quota', config.workspaceQuotaBytes, used, adding);
  }
  if (usage.cell + adding > config.runStorageQuotaBytes)
    return new RunStorageLimitError('cell_storage_quota', config.runStorageQuotaBytes, usage.cell, adding);
  return null;
}

async function refusal(ctx: RunsContext, db: Reader, m: RunMeter, adding: number): Promise<RunStorageLimitError | null> {
  const config = ctx.core.config;
  if (m.bytes + adding > config.runStorageCapBytes)
    return new RunStorageLimitError('run_storage_cap', config.runStorageCapBytes, m.bytes, adding);
  return usageRefusal(ctx, m, await repo.storageUsage(db, m.workspace), adding);
}

/** The limit that storing `recordBytes` plus `values` for the run would pass, or null (reads only). */
export async function storageRefusal(
  ctx: RunsContext,
  runId: string,
  recordBytes: number,
  values: readonly PreparedValue[],
): Promise<RunStorageLimitError | null> {
  const m = await meterOf(ctx, runId);
  return refusal(ctx, ctx.core.store, m, measure(m, recordBytes, values).adding);
}

/** Loads the run's meter before a transaction meters it (so the transaction function reads only through `tx`). */
export function prepareMeter(ctx: RunsContext, runId: string): Promise<RunMeter> {
  return meterOf(ctx, runId);
}

/**
 * Meters what one write of a run stores, inside that write's transaction:
 * `recordBytes` plus the values whose hash is new for the run. With
 * `enforce`, throws RunStorageLimitError (and the transaction rolls back)
 * when that would pass a limit. The in-memory meter moves once the
 * transaction is durable (afterCommit), so a retried transaction counts once.
 */
export async function meterTx(
  ctx: RunsContext,
  tx: Tx,
  m: RunMeter,
  runId: string,
  recordBytes: number,
  values: readonly PreparedValue[],
  enforce: boolean,
): Promise<void> {
  const { adding, fresh } = measure(m, recordBytes, values);
  if (enforce) {
    const refused = await refusal(ctx, tx, m, adding);
    if (refused) throw refused;
  }
  // Before the write below: a caller may leave it in flight to the COMMIT (store Tx.run).
  tx.afterCommit(() => {
    m.bytes += adding;
    m.spec = 0;
    for (const h of fresh) m.hashes.add(h);
  });
  // The run's own row only: the workspace's and the cell's totals are its share summed later (foldStorage).
  await repo.addStorage(tx, runId, m.workspace, adding);
}

/**
 * Sums every run's unfolded share into the scopes' totals (storage_totals),
 * off the runs' path: a timer of the runs module calls it. Until then the
 * totals are read as folded bytes plus the unfolded shares, so a limit sees
 * every committed byte either way. Returns the bytes folded.
 */
export function foldStorage(ctx: RunsContext): Promise<number> {
  return ctx.core.store.write((tx) => repo.foldStorage(tx), { notify: false, isolation: 'row-locks' });
}

/** Forgets a finished run's meter (its totals stay in the store). */
export function forgetMeter(ctx: RunsContext, runId: string): void {
  ctx.meters.delete(runId);
}
