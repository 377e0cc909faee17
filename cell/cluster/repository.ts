/**
 * Every SQL statement of the cluster module (the `cells` table), with its row
 * decoder. Statements stay in the dialect both engines run (docs/storage.md).
 */
import { json, num, numOrNull, object, str, strOrNull } from '../store/decode.ts';
import type { Reader, Row, Tx } from '../store/types.ts';

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
}

const COLUMNS = 'cell_id, region, clearance, topology, posture, url, heartbeat_ms, lease_ms, started_at, heartbeat_at, stopped_at';

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

/** Registers (or re-registers, on a restart) a cell with what it is now. */
export async function upsertCell(tx: Tx, c: CellRow): Promise<void> {
  await tx.run(
    `INSERT INTO cells (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (cell_id) DO UPDATE SET region = excluded.region, clearance = excluded.clearance, topology = excluded.topology,
       posture = excluded.posture, url = excluded.url, heartbeat_ms = excluded.heartbeat_ms, lease_ms = excluded.lease_ms,
       started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at, stopped_at = excluded.stopped_at`,
    [
      c.cell_id,
      c.region,
      c.clearance,
      JSON.stringify(c.topology),
      c.posture,
      c.url,
      c.heartbeat_ms,
      c.lease_ms,
      c.started_at,
      c.heartbeat_at,
      c.stopped_at,
    ],
  );
}

/**
 * The heartbeat: one row written; a heartbeat never moves back (two beats of one
 * cell may commit out of order). False when the row is gone (or the cell stopped).
 */
export async function beat(tx: Tx, cellId: string, at: number, url: string | null): Promise<boolean> {
  return (
    (
      await tx.run(
        `UPDATE cells SET heartbeat_at = CASE WHEN heartbeat_at > ? THEN heartbeat_at ELSE ? END, url = COALESCE(CAST(? AS TEXT), url)
         WHERE cell_id = ? AND stopped_at IS NULL`,
        [at, at, url, cellId],
      )
    ).changes === 1
  );
}

/** A clean stop: the cell is no member any more (its runs may be taken over at once). */
export async function markStopped(tx: Tx, cellId: string, at: number): Promise<void> {
  await tx.run('UPDATE cells SET stopped_at = ? WHERE cell_id = ?', [at, cellId]);
}
