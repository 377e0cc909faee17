/**
 * The cell's durable store: sql.js (SQLite in memory) made durable by a
 * write-ahead log of committed transactions and periodic snapshots.
 *
 * `write(fn)` runs `fn` synchronously inside BEGIN/COMMIT, records the
 * statements it ran, and appends them as one checksummed log record; the
 * promise resolves once that record is fsync'd. Records committed while an
 * fsync is in flight are written and fsync'd together in the next batch
 * (group commit). A checkpoint exports the database to `snapshot.db` (write
 * temp, fsync, rename, fsync dir) tagged with the last LSN it contains, then
 * truncates the log. Opening loads the snapshot, replays log records after
 * its LSN, and drops only a torn or corrupt tail. Formats and guarantees:
 * docs/storage.md.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import type { Database } from 'sql.js';
import { ServiceError } from '../../core/errors.ts';
import { writeAll, writeFileDurably } from './_files.ts';
import { acquireDirLock, type DirLock } from './_lock.ts';
import { encodeRecord, HEADER_BYTES, MAX_RECORD_BYTES, RECORD_HEAD_BYTES, type Statement } from './_log.ts';
import { readSnapshotLsn, replayLog, type ReplayResult } from './_replay.ts';
import { execute, queryAll, Statements, tune } from './_sql.ts';
import { loadSqlJs } from './_sqljs.ts';
import type { Change, Migration, OpenStoreOptions, Row, SqlValue, Store, StoreHealth, Tx } from './types.ts';
import { tablesWritten } from './_tables.ts';

/** Log size that triggers an automatic checkpoint when the caller sets none. */
export const DEFAULT_CHECKPOINT_BYTES = 64 * 1024 * 1024;

/** Statements that would break the store's own BEGIN/COMMIT around write(). */
const TX_CONTROL = /^\s*(BEGIN|COMMIT|END|ROLLBACK|SAVEPOINT|RELEASE|VACUUM|ATTACH|DETACH)\b/i;

export const SNAPSHOT_FILE = 'snapshot.db';
export const LOG_FILE = 'wal.log';

export interface StoreStats {
  /** Transactions appended to the log since open. */
  commits: number;
  /** fsync calls on the log since open (one per group-commit batch). */
  fsyncs: number;
  checkpoints: number;
  /** Current log size in bytes (header included). */
  logBytes: number;
  /** Last LSN assigned. */
  lsn: number;
}

/** The Store contract plus what operators, tests and benchmarks look at. */
export interface DurableStore extends Store {
  readonly stats: Readonly<StoreStats>;
  /** True once a log write or fsync failed: every later write is refused. */
  readonly failed: boolean;
  /** What opening found: records replayed, bytes of torn or corrupt tail dropped. */
  readonly recovery: { replayed: number; droppedBytes: number; droppedReason: string | null };
  /** Writes a snapshot and truncates the log. */
  checkpoint(): Promise<void>;
}

export interface DurableStoreOptions extends OpenStoreOptions {
  /** Data directory of the store; created when missing. */
  dir: string;
  /** Log size that triggers an automatic checkpoint (bytes). */
  checkpointBytes?: number;
  /** Test seam: replaces the fsync of the log file (e.g. to count or fail it). */
  fsync?: (fh: FileHandle) => Promise<void>;
  /**
   * A timer checkpoints a log that has grown since the last checkpoint at most
   * this often (default 5 minutes), so a quiet cell also restarts quickly.
   * 0 turns the timer off (size and close still checkpoint).
   */
  checkpointIntervalMs?: number;
}

/** How often an idle-but-written store checkpoints by time. */
export const DEFAULT_CHECKPOINT_INTERVAL_MS = 5 * 60 * 1000;

interface Pending {
  lsn: number;
  buf: Buffer;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** The transaction a piece of code runs inside, if any (reads inside it must not wait for it). */
const inTx = new AsyncLocalStorage<object>();

/** Opens (or creates) the store in `opts.dir`: lock, snapshot, replay, migrations. */
export async function openStore(opts: DurableStoreOptions): Promise<DurableStore> {
  const note = opts.log ?? ((msg: string) => console.warn(msg));
  const checkpointBytes = opts.checkpointBytes ?? DEFAULT_CHECKPOINT_BYTES;
  if (!(checkpointBytes > 0)) throw new TypeError('openStore: checkpointBytes must be positive');
  checkMigrations(opts.migrations);
  mkdirSync(opts.dir, { recursive: true, mode: 0o700 });
  const lock = acquireDirLock(opts.dir, note);
  let db: Database | undefined;
  let fh: FileHandle | undefined;
  try {
    const SQL = await loadSqlJs();
    const snapPath = join(opts.dir, SNAPSHOT_FILE);
    rmSync(`${snapPath}.tmp`, { force: true });
    db = existsSync(snapPath) ? new SQL.Database(readFileSync(snapPath)) : new SQL.Database();
    let snapshotLsn: number;
    try {
      tune(db);
      snapshotLsn = readSnapshotLsn(db);
    } catch (err) {
      throw new Error(`store: ${snapPath} is unreadable (${(err as Error).message}); refusing to open`);
    }
    const logPath = join(opts.dir, LOG_FILE);
    const replay = await replayLog(db, logPath, opts.dir, snapshotLsn, note);
    fh = await open(logPath, 'a');
    const store = new SqlJsStore(db, fh, lock, opts.dir, {
      lsn: replay.lastLsn,
      logBytes: replay.logBytes,
      checkpointBytes,
      recovery: replay.recovery,
      note,
      fsync: opts.fsync ?? ((h) => h.sync()),
    });
    await store.migrate(opts.migrations);
    store.startCheckpointTimer(opts.checkpointIntervalMs ?? DEFAULT_CHECKPOINT_INTERVAL_MS);
    // A long replay is not worth repeating on the next start.
    if (store.stats.logBytes > checkpointBytes) {
      await store.checkpoint().catch((err: unknown) => {
        note(`store: checkpoint after replay failed (the log still holds everything): ${(err as Error).message}`);
      });
    }
    return store;
  } catch (err) {
    await fh?.close().catch(() => undefined);
    db?.close();
    lock.release();
    throw err;
  }
}

function checkMigrations(migrations: readonly Migration[]): void {
  const seen = new Set<string>();
  for (const m of migrations) {
    if (typeof m.id !== 'string' || m.id === '' || typeof m.sql !== 'string') {
      throw new TypeError('openStore: a migration needs a non-empty id and sql');
    }
    if (seen.has(m.id)) throw new TypeError(`openStore: duplicate migration id ${m.id}`);
    seen.add(m.id);
  }
}

function unavailable(reason: string): ServiceError {
  return new ServiceError('service_unavailable', 'The store cannot accept writes.', {
    details: { reason },
    retryable: true,
  });
}

function copyParams(params: readonly SqlValue[]): SqlValue[] {
  return params.map((v) => (v instanceof Uint8Array ? v.slice() : v));
}

interface StoreInit {
  lsn: number;
  logBytes: number;
  checkpointBytes: number;
  recovery: ReplayResult['recovery'];
  note: (msg: string) => void;
  fsync: (fh: FileHandle) => Promise<void>;
}

class SqlJsStore implements DurableStore {
  readonly recovery: ReplayResult['recovery'];
  readonly stats: StoreStats;
  readonly engine = 'embedded' as const;
  #failed = false;
  #closing = false;
  #closed = false;
  /** The open write transaction (token) and a promise that settles when it ends. */
  #tx: { token: object; done: Promise<void> } | null = null;
  /** Writers wait here, one transaction at a time. */
  #writeLock: Promise<void> = Promise.resolve();
  readonly #listeners = new Set<(c: Change) => void>();
  #queue: Pending[] = [];
  #flushing = false;
  #paused = false;
  #pumpScheduled = false;
  #idleWaiters: (() => void)[] = [];
  #checkpointing: Promise<void> | null = null;
  #closingRun: Promise<void> | undefined;
  readonly #checkpointBytes: number;
  /** Log size past which the next automatic checkpoint starts (raised after a failed one). */
  #autoCheckpointAt: number;
  readonly #note: (msg: string) => void;
  readonly #fsync: (fh: FileHandle) => Promise<void>;
  readonly #stmts: Statements;

  constructor(
    private readonly db: Database,
    private readonly fh: FileHandle,
    private readonly lock: DirLock,
    private readonly dir: string,
    init: StoreInit,
  ) {
    this.recovery = init.recovery;
    this.stats = { commits: 0, fsyncs: 0, checkpoints: 0, logBytes: init.logBytes, lsn: init.lsn };
    this.#checkpointBytes = init.checkpointBytes;
    this.#autoCheckpointAt = init.checkpointBytes;
    this.#note = init.note;
    this.#fsync = init.fsync;
    this.#stmts = new Statements(db);
  }

  get failed(): boolean {
    return this.#failed;
  }

  #timer: NodeJS.Timeout | undefined;
  #checkpointedAtLsn = -1;

  /** Checkpoints by time when the log has grown since the last checkpoint. */
  startCheckpointTimer(intervalMs: number): void {
    if (!(intervalMs > 0)) return;
    this.#checkpointedAtLsn = this.stats.lsn;
    this.#timer = setInterval(() => {
      if (this.#closing || this.#failed || this.stats.lsn === this.#checkpointedAtLsn) return;
      const lsn = this.stats.lsn;
      this.checkpoint().then(() => { this.#checkpointedAtLsn = lsn; }, (err: unknown) => {
        this.#note(`store: timed checkpoint failed (the log still holds everything): ${(err as Error).message}`);
      });
    }, intervalMs);
    this.#timer.unref();
  }

  async get(sql: string, params?: readonly SqlValue[]): Promise<Row | undefined> {
    await this.#committedView();
    return queryAll<Row>(this.#stmts, sql, params, true)[0];
  }

  async all(sql: string, params?: readonly SqlValue[]): Promise<Row[]> {
    await this.#committedView();
    return queryAll<Row>(this.#stmts, sql, params, false);
  }

  /**
   * Reads see committed data only: while a write transaction is open (its
   * function awaits between statements), readers outside it wait for it to end.
   */
  #committedView(): Promise<void> | void {
    this.#assertOpen();
    const tx = this.#tx;
    if (tx && inTx.getStore() !== tx.token) return tx.done.then(() => this.#committedView());
  }

  onChange(listener: (c: Change) => void): () => void {
    this.#listeners.add(listener);
    return () => { this.#listeners.delete(listener); };
  }

  async health(): Promise<StoreHealth> {
    if (this.#closing || this.#closed) return { ok: false, reason: 'store_closed' };
    if (this.#failed) return { ok: false, reason: 'store_failed' };
    return { ok: true };
  }

  write<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    if (this.#closing || this.#closed) return Promise.reject(unavailable('store_closed'));
    if (this.#failed) return Promise.reject(unavailable('store_failed'));
    if (this.#tx && inTx.getStore() === this.#tx.token) return Promise.reject(new TypeError('store.write: nested write inside a transaction'));
    const prev = this.#writeLock;
    let release!: () => void;
    this.#writeLock = new Promise<void>((r) => { release = r; });
    // The lock is held until COMMIT only: the next transaction runs while this one's fsync is pending (group commit).
    return prev.then(() => this.#runTx(fn)).finally(() => release()).then((committed) => committed());
  }

  /**
   * One transaction: BEGIN, the function, the log record encoded, COMMIT.
   * Resolves (at COMMIT) with a function that waits for durability via the group commit.
   */
  async #runTx<T>(fn: (tx: Tx) => Promise<T>): Promise<() => Promise<T>> {
    if (this.#closed) throw unavailable('store_closed');
    if (this.#failed) throw unavailable('store_failed');
    const db = this.db;
    const cache = this.#stmts;
    const recorded: Statement[] = [];
    const effects: (() => void)[] = [];
    const token = {};
    let endTx!: () => void;
    this.#tx = { token, done: new Promise<void>((r) => { endTx = r; }) };
    const tx: Tx = {
      get: async (sql, params) => queryAll<Row>(cache, sql, params, true)[0],
      all: async (sql, params) => queryAll<Row>(cache, sql, params, false),
      run: async (sql, params) => {
        if (TX_CONTROL.test(sql)) throw new TypeError(`store: "${sql.trim().split(/\s/)[0]}" is not allowed inside write(); the store owns the transaction`);
        const changes = execute(db, cache, sql, params);
        recorded.push(params && params.length > 0 ? [sql, copyParams(params)] : [sql]);
        return { changes };
      },
      afterCommit: (effect) => { effects.push(effect); },
    };
    let result: T;
    let buf: Buffer | undefined;
    try {
      db.run('BEGIN');
      try {
        result = await inTx.run(token, () => fn(tx));
        if (recorded.length > 0) {
          // Encoded before COMMIT: a record the log could not hold is refused, not half-kept.
          buf = encodeRecord(this.stats.lsn + 1, recorded);
          if (buf.length - RECORD_HEAD_BYTES > MAX_RECORD_BYTES) {
            throw new TypeError(`store.write: transaction too large for one log record (${buf.length} bytes)`);
          }
        }
        db.run('COMMIT');
      } catch (err) {
        try {
          db.run('ROLLBACK');
        } catch {
          // SQLite already rolled the transaction back (e.g. a failed COMMIT).
        }
        throw err;
      }
    } finally {
      this.#tx = null;
      endTx();
    }
    if (!buf) {
      return async () => {
        for (const e of effects) e();
        return result;
      };
    }
    const lsn = ++this.stats.lsn;
    this.stats.commits++;
    const tables = tablesWritten(recorded.map((r) => r[0]));
    const durable = new Promise<void>((resolve, reject) => {
      this.#queue.push({ lsn, buf: buf!, resolve, reject });
      this.#schedulePump();
    });
    return async () => {
      await durable;
      for (const e of effects) e();
      if (tables.size > 0) for (const l of this.#listeners) l({ tables, remote: false });
      return result;
    };
  }

  async checkpoint(): Promise<void> {
    if (this.#closed) throw unavailable('store_closed');
    if (this.#failed) throw unavailable('store_failed');
    if (this.#checkpointing) return this.#checkpointing;
    // Between transactions only: an open one (its function may be awaiting) must not be exported.
    const prev = this.#writeLock;
    let release!: () => void;
    this.#writeLock = new Promise<void>((r) => { release = r; });
    const run = prev.then(() => this.#doCheckpoint()).finally(() => {
      release();
      this.#checkpointing = null;
      this.#paused = false;
      this.#schedulePump();
    });
    this.#checkpointing = run;
    return run;
  }

  close(): Promise<void> {
    this.#closingRun ??= this.#close();
    return this.#closingRun;
  }

  async #close(): Promise<void> {
    this.#closing = true;
    clearInterval(this.#timer);
    try {
      await this.#drained();
      if (this.#checkpointing) await this.#checkpointing.catch(() => undefined);
      if (!this.#failed) {
        try {
          await this.checkpoint();
        } catch (err) {
          this.#note(`store: checkpoint on close failed (the log still holds everything): ${(err as Error).message}`);
        }
      }
    } finally {
      this.#closed = true;
      await this.fh.close().catch(() => undefined);
      this.#stmts.clear();
      this.db.close();
      this.lock.release();
    }
  }

  /** Applies each migration not yet recorded in `_migrations`, in the given order. */
  async migrate(migrations: readonly Migration[]): Promise<void> {
    const hasTable = await this.get("SELECT 1 AS one FROM sqlite_master WHERE type = 'table' AND name = '_migrations'");
    if (!hasTable) {
      await this.write(async (tx) => {
        await tx.run('CREATE TABLE IF NOT EXISTS _migrations (id TEXT PRIMARY KEY, seq INTEGER NOT NULL, sql_sha256 TEXT NOT NULL)');
      });
    }
    for (const m of migrations) {
      const sha = createHash('sha256').update(m.sql).digest('hex');
      const row = await this.get('SELECT sql_sha256 FROM _migrations WHERE id = ?', [m.id]);
      if (row) {
        if (row['sql_sha256'] !== sha) this.#note(`store: migration ${m.id} was applied with different SQL; it is not re-run`);
        continue;
      }
      await this.write(async (tx) => {
        try {
          await tx.run(m.sql);
        } catch (err) {
          throw new Error(`store: migration ${m.id} failed: ${(err as Error).message}`);
        }
        const n = (await tx.get('SELECT COUNT(*) AS n FROM _migrations'))?.['n'];
        await tx.run('INSERT INTO _migrations (id, seq, sql_sha256) VALUES (?, ?, ?)', [m.id, (typeof n === 'number' ? n : 0) + 1, sha]);
      });
    }
  }

  #assertOpen(): void {
    if (this.#closed) throw unavailable('store_closed');
  }

  #schedulePump(): void {
    if (this.#pumpScheduled || this.#flushing || this.#paused) return;
    this.#pumpScheduled = true;
    // A microtask groups every transaction committed in the current turn into one batch.
    queueMicrotask(() => {
      this.#pumpScheduled = false;
      void this.#pump();
    });
  }

  async #pump(): Promise<void> {
    if (this.#flushing || this.#paused) return;
    this.#flushing = true;
    try {
      while (this.#queue.length > 0 && !this.#paused && !this.#failed) {
        const batch = this.#queue;
        this.#queue = [];
        const bytes = batch.length === 1 ? batch[0]!.buf : Buffer.concat(batch.map((p) => p.buf));
        try {
          await writeAll(this.fh, bytes);
          await this.#fsync(this.fh);
          this.stats.fsyncs++;
          this.stats.logBytes += bytes.length;
        } catch (err) {
          this.#fail(err, batch);
          return;
        }
        for (const p of batch) p.resolve();
      }
    } finally {
      this.#flushing = false;
      if (this.#queue.length === 0 || this.#paused || this.#failed) {
        const waiters = this.#idleWaiters;
        this.#idleWaiters = [];
        for (const w of waiters) w();
      }
    }
    if (this.stats.logBytes > this.#autoCheckpointAt && !this.#checkpointing && !this.#closing && !this.#failed) {
      this.checkpoint().then(
        () => {
          this.#autoCheckpointAt = this.#checkpointBytes;
        },
        (err: unknown) => {
          // Retry after another quarter of checkpointBytes, not after every batch.
          this.#autoCheckpointAt = this.stats.logBytes + Math.ceil(this.#checkpointBytes / 4);
          this.#note(`store: automatic checkpoint failed (the log still holds everything): ${(err as Error).message}`);
        },
      );
    }
  }

  #fail(err: unknown, batch: Pending[]): void {
    this.#failed = true;
    this.#note(`store: log write or fsync failed; refusing all further writes: ${(err as Error).message}`);
    const rejected = [...batch, ...this.#queue];
    this.#queue = [];
    for (const p of rejected) p.reject(unavailable('store_failed'));
  }

  /** Resolves when no flush is running and (unless paused) nothing is queued. */
  #drained(): Promise<void> {
    if (!this.#flushing && (this.#queue.length === 0 || this.#paused || this.#failed) && !this.#pumpScheduled) {
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      this.#idleWaiters.push(resolve);
    }).then(() => this.#drained());
  }

  async #doCheckpoint(): Promise<void> {
    this.#paused = true;
    // Let an in-flight batch finish; queued records wait (they may become redundant).
    while (this.#flushing) await new Promise<void>((r) => this.#idleWaiters.push(r));
    if (this.#failed) throw unavailable('store_failed');
    const lsn = this.stats.lsn;
    this.db.run('CREATE TABLE IF NOT EXISTS _store_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)');
    this.db.run("INSERT OR REPLACE INTO _store_meta (key, value) VALUES ('lsn', ?)", [lsn]);
    this.#stmts.clear();
    const bytes = this.db.export();
    tune(this.db); // older sql.js releases reopen the database in export()
    await writeFileDurably(join(this.dir, SNAPSHOT_FILE), bytes, this.dir);
    // The snapshot now holds every LSN <= lsn durably: queued records up to it are done.
    const covered = this.#queue.filter((p) => p.lsn <= lsn);
    this.#queue = this.#queue.filter((p) => p.lsn > lsn);
    try {
      await this.fh.truncate(HEADER_BYTES);
      await this.#fsync(this.fh);
      this.stats.fsyncs++;
    } catch (err) {
      // Records <= lsn left in the log are skipped on replay; but fail closed on a failed fsync.
      for (const p of covered) p.resolve();
      this.#fail(err, []);
      throw unavailable('store_failed');
    }
    this.stats.logBytes = HEADER_BYTES;
    this.stats.checkpoints++;
    for (const p of covered) p.resolve();
  }
}
