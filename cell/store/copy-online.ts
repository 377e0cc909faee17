/**
 * A consistent copy of an embedded store's directory, taken without its lock
 * while a cell may be writing to it (`node dist/cell.mjs backup`).
 *
 * It reads what the store keeps on disk, never touching it: `snapshot.db`
 * (replaced whole by rename, so one read sees one snapshot, tagged with its
 * LSN `S`), then `wal.log`, and replays into a private in-memory database the
 * log records after `S`, in order, stopping at the first torn or unreadable
 * record (a record being appended right now). Every prefix of the log after
 * the snapshot is a state the cell committed, so the result is the store as
 * it was at one LSN. If a checkpoint ran between the two reads (the log was
 * truncated and its first record is past `S + 1`), the copy starts over; the
 * checkpoint is rare (64 MiB of log or 5 minutes), so a few tries suffice.
 *
 * Limit: a record written but not yet fsync'd (the cell has not acknowledged
 * it) can be in the copy; if the cell then fails that fsync, the copy holds a
 * transaction the cell dropped. The copy is still a state the cell's own
 * rules produced.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Database, SqlValue as SqlJsValue } from 'sql.js';
import { LOG_FILE, SNAPSHOT_FILE } from './internal/load.ts';
import { checkHeader, decodeRecord, HEADER_BYTES } from './internal/log.ts';
import { readSnapshotLsn } from './internal/replay.ts';
import { loadSqlJs } from './sqljs.ts';

export interface OnlineCopy {
  /** The database at `lsn` (the caller closes it). */
  db: Database;
  /** The last log record the copy holds (its snapshot's LSN when the log held none after it). */
  lsn: number;
}

/** Tries before giving up when checkpoints keep racing the copy. */
const TRIES = 20;

/**
 * Copies the store in `dir` (the `store` folder of a data directory) as of one
 * LSN. `maxLsn` stops the replay there (tests compare a copy with a later
 * state of the same directory). Throws an Error starting with `store:` when
 * the files cannot be used.
 */
export async function copyStoreOnline(dir: string, opts: { maxLsn?: number } = {}): Promise<OnlineCopy> {
  const SQL = await loadSqlJs();
  for (let attempt = 0; attempt < TRIES; attempt++) {
    const snapshot = readIfPresent(join(dir, SNAPSHOT_FILE));
    const log = readIfPresent(join(dir, LOG_FILE));
    const db = snapshot ? new SQL.Database(snapshot) : new SQL.Database();
    try {
      const result = replayReadOnly(db, log, readSnapshotLsn(db), opts.maxLsn ?? Number.POSITIVE_INFINITY);
      if (result !== 'raced') return { db, lsn: result };
    } catch (err) {
      db.close();
      throw err;
    }
    db.close();
    await new Promise((r) => setTimeout(r, 50 * (attempt + 1)));
  }
  throw new Error(`store: ${dir} was checkpointed during every one of ${TRIES} tries to copy it; try again`);
}

function readIfPresent(path: string): Buffer | null {
  try {
    return readFileSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/** Replays the records after `snapshotLsn` up to `maxLsn`; `raced` when the log no longer follows the snapshot. */
function replayReadOnly(db: Database, log: Buffer | null, snapshotLsn: number, maxLsn: number): number | 'raced' {
  let last = snapshotLsn;
  if (!log || log.length === 0) return last;
  const bad = checkHeader(log);
  if (bad) throw new Error(`store: the log is not usable (${bad})`);
  let off = HEADER_BYTES;
  let prev = 0;
  db.run('BEGIN');
  try {
    while (off < log.length) {
      const rec = decodeRecord(log, off);
      // A torn or unreadable record ends the copy: it is being written, or it is damage the cell will drop too.
      if (!rec.ok || rec.lsn <= prev) break;
      prev = rec.lsn;
      if (rec.lsn > maxLsn) break;
      if (rec.lsn > snapshotLsn) {
        if (rec.lsn !== last + 1) {
          db.run('ROLLBACK');
          return 'raced';
        }
        for (const [sql, params] of rec.stmts) {
          if (params && params.length > 0) db.run(sql, params as SqlJsValue[]);
          else db.run(sql);
        }
        last = rec.lsn;
      }
      off = rec.next;
    }
    db.run('COMMIT');
  } catch (err) {
    try {
      db.run('ROLLBACK');
    } catch {
      // The failed statement may have ended the transaction already.
    }
    throw new Error(`store: replaying the log into the copy failed: ${(err as Error).message}`);
  }
  // A snapshot newer than every record (the log truncated after it was read) is itself the state at its LSN.
  return last;
}
