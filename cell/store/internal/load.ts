/**
 * Loading the embedded store from its directory: the snapshot (or an empty
 * database), then the log records after the snapshot's LSN. Used at open and
 * when the store re-opens itself from disk after a failed log write.
 */
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Database } from 'sql.js';
import { readSnapshotLsn, replayLog, type ReplayResult } from './replay.ts';
import { tune } from './sql.ts';
import { loadSqlJs } from '../sqljs.ts';

export const SNAPSHOT_FILE = 'snapshot.db';
export const LOG_FILE = 'wal.log';

/** A database rebuilt from `dir`; throws an Error starting with `store:` when the files cannot be used. */
export async function loadFromDisk(dir: string, note: (msg: string) => void): Promise<{ db: Database; replay: ReplayResult }> {
  const SQL = await loadSqlJs();
  const snapPath = join(dir, SNAPSHOT_FILE);
  rmSync(`${snapPath}.tmp`, { force: true });
  const db = existsSync(snapPath) ? new SQL.Database(readFileSync(snapPath)) : new SQL.Database();
  try {
    let snapshotLsn: number;
    try {
      tune(db);
      snapshotLsn = readSnapshotLsn(db);
    } catch (err) {
      throw new Error(`store: ${snapPath} is unreadable (${(err as Error).message}); refusing to open`);
    }
    const replay = await replayLog(db, join(dir, LOG_FILE), dir, snapshotLsn, note);
    return { db, replay };
  } catch (err) {
    db.close();
    throw err;
  }
}
