/**
 * Every SQL statement of the cluster module (the `cells` table), with its row
 * decoder. Statements stay in the dialect both engines run (docs/storage.md).
 */
import { json, num, numOrNull, object, str, strOrNull } from '../store/decode.ts';
import { dbNow as storeNow, type DbNow as StoreNow } from '../store/db-clock.ts';
import type { Reader, Row, Tx } from '../store/types.ts';

/**
 * "Now" as the statement that judges a heartbeat reads it (cell/store/db-clock.ts):
 * on PostgreSQL the database's own clock in the same statement, so every cell
 * of a group judges on one clock; on the embedded engine (one cell by
 * construction) the cell's clock, passed in.
 */
export interface DbNow extends StoreNow {
  /**
   * Since when the store has answered without a break it knows of (ms since
   * the epoch): on PostgreSQL the server's start (`pg_postmaster_start_time()`),
   * as no member could beat while it was down; 0 on the embedded engine.
   */
  upSql: string;
}

const PG_UP = 'CAST(FLOOR(EXTRACT(EPOCH FROM pg_postmaster_start_time()) * 1000) AS BIGINT)';

/** The database's clock on PostgreSQL; `local` (the cell's clock) on the embedded engine. */
export function dbNow(engine: 'embedded' | 'postgres', local: number): DbNow {
  return { ...storeNow(engine, local), upSql: engine === 'postgres' ? PG_UP : 'CAST(0 AS BIGINT)' };
}

/** The database's clock now, ms since the epoch. */
export async function readNow(db: Reader, now: DbNow): Promise<number> {
  return num((await db.get(`SELECT ${now.sql} AS now_ms`, now.params))!, 'now_ms');
}

export interface CellRow {
  cell_id: string;
  region: string;
  clearance: number;
  topology: Record<string, string>;
  posture: string;
  url: string | null;
  heartbeat_ms: number;
  lease_ms: number;
  started_at: number;
  heartbeat_at: number;
  stopped_at: number | null;
  /** SHA-256 (hex) of the member's secret: only the process holding it beats or stops this row. Null on rows older than the field. */
  member_key: string | null;
  /** The member's clock minus the database's, ms, at its last heartbeat (null: not measured). */
  clock_offset_ms: number | null;
}

const COLUMNS =
  'cell_id, region, clearance, topology, posture, url, heartbeat_ms, lease_ms, started_at, heartbeat_at, stopped_at, member_key, clock_offset_ms';

function labels(v: unknown): Record<string, string> {
  const o = object(v);
  for (const x of Object.values(o)) if (typeof x !== 'string') throw new TypeError('store row: topology labels are strings');
  return o as Record<string, string>;
}

function decode(r: Row): CellRow {
  return {
    cell_id: str(r, 'cell_id'),
    region: str(r, 'region'),
    clearance: num(r, 'clearance'),
    topology: json(r, 'topology', labels),
    posture: str(r, 'posture'),
    url: strOrNull(r, 'url'),
    heartbeat_ms: num(r, 'heartbeat_ms'),
    lease_ms: num(r, 'lease_ms'),
    started_at: num(r, 'started_at'),
    heartbeat_at: num(r, 'heartbeat_at'),
    stopped_at: numOrNull(r, 'stopped_at'),
    member_key: strOrNull(r, 'member_key'),
    clock_offset_ms: numOrNull(r, 'clock_offset_ms'),
  };
}

/** Every cell that ever started on this store, by id. */
export async function allCells(db: Reader): Promise<CellRow[]> {
  return (await db.all(`SELECT ${COLUMNS} FROM cells ORDER BY cell_id`)).map(decode);
}

/** One cell's row, or undefined. */
export async function cellById(db: Reader, cellId: string): Promise<CellRow | undefined> {
  const r = await db.get(`SELECT ${COLUMNS} FROM cells WHERE cell_id = ?`, [cellId]);
  return r ? decode(r) : undefined;
}

/** The judging clock now and since when the store has answered (DbNow.upSql), in one statement. */
export async function readJudgeClock(db: Reader, now: DbNow): Promise<{ now: number; up: number }> {
  const r = (await db.get(`SELECT ${now.sql} AS now_ms, ${now.upSql} AS up_ms`, now.params))!;
  return { now: num(r, 'now_ms'), up: num(r, 'up_ms') };
}

/**
 * One cell's row with the database's clock (and since when the store has
 * answered) read in the same statement (the lease judgement), or undefined.
 */
export async function cellByIdAt(db: Reader, cellId: string, now: DbNow): Promise<{ row: CellRow; now: number; up: number } | undefined> {
  const r = await db.get(`SELECT ${COLUMNS}, ${now.sql} AS now_ms, ${now.upSql} AS up_ms FROM cells WHERE cell_id = ?`, [
    ...now.params,
    cellId,
  ]);
  return r ? { row: decode(r), now: num(r, 'now_ms'), up: num(r, 'up_ms') } : undefined;
}

/** Registers (or re-registers, on a restart) a cell with what it is now (`started_at`, `heartbeat_at`: the database's clock). */
export async function upsertCell(tx: Tx, c: Omit<CellRow, 'started_at' | 'heartbeat_at'>, now: DbNow): Promise<void> {
  await tx.run(
    `INSERT INTO cells (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ${now.sql}, ${now.sql}, ?, ?, ?)
     ON CONFLICT (cell_id) DO UPDATE SET region = excluded.region, clearance = excluded.clearance, topology = excluded.topology,
       posture = excluded.posture, url = excluded.url, heartbeat_ms = excluded.heartbeat_ms, lease_ms = excluded.lease_ms,
       started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at, stopped_at = excluded.stopped_at,
       member_key = excluded.member_key, clock_offset_ms = excluded.clock_offset_ms`,
    [
      c.cell_id,
      c.region,
      c.clearance,
      JSON.stringify(c.topology),
      c.posture,
      c.url,
      c.heartbeat_ms,
      c.lease_ms,
      ...now.params,
      ...now.params,
      c.stopped_at,
      c.member_key,
      c.clock_offset_ms,
    ],
  );
}

/**
 * The heartbeat, stamped with the database's clock: one row written; a
 * heartbeat never moves back (two beats of one cell may commit out of order).
 * Only the member holding the row's key beats it. False when the row is gone,
 * the cell stopped, or the row is another process's.
 */
export async function beat(
  tx: Tx,
  m: { cellId: string; memberKey: string; url: string | null; clockOffsetMs: number | null },
  now: DbNow,
): Promise<boolean> {
  return (
    (
      await tx.run(
        `UPDATE cells SET heartbeat_at = CASE WHEN heartbeat_at > ${now.sql} THEN heartbeat_at ELSE ${now.sql} END,
           url = COALESCE(CAST(? AS TEXT), url), clock_offset_ms = ?
         WHERE cell_id = ? AND stopped_at IS NULL AND member_key = ?`,
        [...now.params, ...now.params, m.url, m.clockOffsetMs, m.cellId, m.memberKey],
      )
    ).changes === 1
  );
}

/** A clean stop: the cell is no member any more (its runs may be taken over at once). Only the row's own member stops it. */
export async function markStopped(tx: Tx, cellId: string, memberKey: string, now: DbNow): Promise<void> {
  await tx.run(`UPDATE cells SET stopped_at = ${now.sql} WHERE cell_id = ? AND (member_key = ? OR member_key IS NULL)`, [
    ...now.params,
    cellId,
    memberKey,
  ]);
}
