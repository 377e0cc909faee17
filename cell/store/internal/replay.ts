/**
 * Opening a store: read the snapshot's LSN, replay the log records after it in
 * one transaction, stop at the first torn or corrupt record, save the dropped
 * bytes beside the log and truncate it there. Rules: docs/storage.md.
 */
import { existsSync, readFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import type { Database, SqlValue as SqlJsValue } from 'sql.js';
import { writeFileDurably } from './files.ts';
import { checkHeader, decodeRecord, encodeHeader, HEADER_BYTES } from './log.ts';

/** SQLite's default page cache (-2000 = 2000 KiB), restored after replay. */
const DEFAULT_CACHE_SIZE = -2000;

export function readSnapshotLsn(db: Database): number {
  const t = db.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_store_meta'");
  if (t.length === 0) return 0;
  const r = db.exec("SELECT value FROM _store_meta WHERE key = 'lsn'");
  const v = r[0]?.values[0]?.[0];
  return typeof v === 'number' ? v : 0;
}

export interface ReplayResult {
  lastLsn: number;
  logBytes: number;
  recovery: { replayed: number; droppedBytes: number; droppedReason: string | null };
}

/** Replays `logPath` into `db` (records after `snapshotLsn`), truncating a bad tail. */
export async function replayLog(
  db: Database,
  logPath: string,
  dir: string,
  snapshotLsn: number,
  note: (m: string) => void,
): Promise<ReplayResult> {
  const recovery = { replayed: 0, droppedBytes: 0, droppedReason: null as string | null };
  if (!existsSync(logPath)) {
    await createLog(logPath, dir);
    return { lastLsn: snapshotLsn, logBytes: HEADER_BYTES, recovery };
  }
  const buf = readFileSync(logPath);
  const bad = checkHeader(buf);
  if (bad) {
    if (buf.length === 0) {
      await createLog(logPath, dir);
      return { lastLsn: snapshotLsn, logBytes: HEADER_BYTES, recovery };
    }
    throw new Error(`store: ${logPath} is not a usable log (${bad}); refusing to open`);
  }
  let off = HEADER_BYTES;
  let prev = 0;
  let last = snapshotLsn;
  const cache = new Map<string, ReturnType<Database['prepare']>>();
  // Replay is one big transaction: a large page cache keeps its dirty pages from
  // spilling into sql.js's emulated file (about 2x faster); back to the default after.
  db.run('PRAGMA cache_size = -262144');
  db.run('BEGIN');
  try {
    while (off < buf.length) {
      const rec = decodeRecord(buf, off);
      if (!rec.ok) {
        recovery.droppedReason = `${rec.reason} at offset ${off}`;
        break;
      }
      if (rec.lsn <= prev) {
        recovery.droppedReason = `LSN ${rec.lsn} out of order after ${prev} at offset ${off}`;
        break;
      }
      prev = rec.lsn;
      if (rec.lsn > snapshotLsn) {
        if (rec.lsn !== last + 1) {
          throw new Error(`store: log record LSN ${rec.lsn} follows LSN ${last}: records are missing; refusing to open`);
        }
        for (const [sql, params] of rec.stmts) {
          if (params && params.length > 0) {
            let st = cache.get(sql);
            if (!st) {
              st = db.prepare(sql);
              cache.set(sql, st);
            }
            st.run(params as SqlJsValue[]);
          } else {
            db.run(sql);
          }
        }
        last = rec.lsn;
        recovery.replayed++;
      }
      off = rec.next;
    }
    for (const st of cache.values()) st.free();
    cache.clear();
    db.run('COMMIT');
    db.run(`PRAGMA cache_size = ${DEFAULT_CACHE_SIZE}`);
  } catch (err) {
    for (const st of cache.values()) st.free();
    try {
      db.run('ROLLBACK');
    } catch {
      // The failed statement may already have ended the transaction.
    }
    if (err instanceof Error && err.message.startsWith('store:')) throw err;
    throw new Error(`store: replaying the log failed at offset ${off}: ${(err as Error).message}; refusing to open`);
  }
  if (off < buf.length) {
    recovery.droppedBytes = buf.length - off;
    // Keep the dropped bytes beside the log for forensics; never delete data silently.
    const keep = `${logPath}.dropped-${Date.now()}`;
    await writeFileDurably(keep, buf.subarray(off), dir);
    note(
      `store: dropped ${recovery.droppedBytes} bytes of log tail (${recovery.droppedReason}); kept ${recovery.replayed} replayed records; the dropped bytes are saved in ${keep}`,
    );
    const fh = await open(logPath, 'r+');
    try {
      await fh.truncate(off);
      await fh.sync();
    } finally {
      await fh.close();
    }
  }
  return { lastLsn: last, logBytes: off, recovery };
}

/** Creates an empty log atomically (temp, fsync, rename, fsync dir). */
async function createLog(logPath: string, dir: string): Promise<void> {
  await writeFileDurably(logPath, encodeHeader(), dir);
}
