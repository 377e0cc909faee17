/**
 * The embedded engine of the store (contract: cell/store/types.ts): sql.js
 * (SQLite in memory) made durable by a write-ahead log of committed
 * transactions and periodic snapshots.
 *
 * `write(fn)` runs `fn` inside BEGIN/COMMIT, one transaction at a time (a
 * write lock held until COMMIT), records the statements it ran, and appends
 * them as one checksummed log record; the promise resolves once that record
 * is fsync'd. Records committed while an fsync is in flight are written and
 * fsync'd together in the next batch (group commit). Readers outside the
 * open transaction wait for it to end (they see committed data only). A
 * checkpoint exports the database to `snapshot.db` (write temp, fsync,
 * rename, fsync dir) tagged with the last LSN it contains, then truncates the
 * log. Opening loads the snapshot, replays log records after its LSN, and
 * drops only a torn or corrupt tail.
 *
 * A failed log write or fsync (a full disk) refuses writes with 503; the
 * store then cuts the log back to what was durable, re-opens itself from
 * disk, and accepts writes again once a probe write succeeds
 * (`internal/recovery.ts`). Formats and guarantees: docs/storage.md.
 */
import { mkdirSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import type { Database } from 'sql.js';
import { ServiceError } from '../../core/errors.ts';
import { writeAll, writeFileDurably } from './internal/files.ts';
import { LOG_FILE, loadFromDisk, SNAPSHOT_FILE } from './internal/load.ts';
import { acquireDirLock, type DirLock } from './internal/lock.ts';
import { encodeRecordJson, encodeStatement, HEADER_BYTES, MAX_RECORD_BYTES, RECORD_HEAD_BYTES } from './internal/log.ts';
import { checkMigrations, migrateEmbedded } from './internal/migrations.ts';
import { classifyFailure, probeWritable, type Failure } from './internal/recovery.ts';
import type { ReplayResult } from './internal/replay.ts';
import { checkEntry, type Entry, execute, queryAll, Statements, tune } from './internal/sql.ts';
import { TxContext } from './internal/tx-context.ts';
import type { Change, OpenStoreOptions, Row, SqlValue, Store, StoreHealth, StoreObserver, Tx } from './types.ts';

export { LOG_FILE, SNAPSHOT_FILE };

/** Log size that triggers an automatic checkpoint when the caller sets none. */
export const DEFAULT_CHECKPOINT_BYTES = 64 * 1024 * 1024;
/** How often an idle-but-written store checkpoints by time. */
export const DEFAULT_CHECKPOINT_INTERVAL_MS = 5 * 60 * 1000;
/** First wait before probing the disk again after a failed log write; doubled up to 30 s. */
export const DEFAULT_RECOVERY_DELAY_MS = 1000;
const MAX_RECOVERY_DELAY_MS = 30_000;

export interface StoreStats {
  /** Transactions appended to the log since open. */
  commits: number;
  /** fsync calls on the log since open (one per group-commit batch). */
  fsyncs: number;
  checkpoints: number;
  /** Current log size in bytes (header included) that is durable. */
  logBytes: number;
  /** Last LSN assigned. */
  lsn: number;
  /** Times the store re-opened itself from disk after a failed log write. */
  reloads: number;
}

/** The Store contract plus what operators, tests and benchmarks look at. */
export interface EmbeddedStore extends Store {
  readonly engine: 'embedded';
  readonly stats: Readonly<StoreStats>;
  /** True while writes are refused after a failed log write or fsync. */
  readonly failed: boolean;
  /** What opening found: records replayed, bytes of torn or corrupt tail dropped. */
  readonly recovery: { replayed: number; droppedBytes: number; droppedReason: string | null };
  /** Writes a snapshot and truncates the log. */
  checkpoint(): Promise<void>;
}

export interface EmbeddedStoreOptions extends OpenStoreOptions {
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
  /** First wait before the disk is probed again after a failed log write (ms, default 1000; doubled up to 30 s). */
  recoveryDelayMs?: number;
}

interface Pending {
  lsn: number;
  buf: Buffer;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** The transaction a piece of code runs inside, if any (reads inside it must not wait for it). */
const inTx = new TxContext<object>();

/** Opens (or creates) the store in `opts.dir`: lock, snapshot, replay, migrations. */
export async function openEmbeddedStore(opts: EmbeddedStoreOptions): Promise<EmbeddedStore> {
  const note = opts.log ?? ((msg: string) => console.warn(msg));
  const checkpointBytes = opts.checkpointBytes ?? DEFAULT_CHECKPOINT_BYTES;
  if (!(checkpointBytes > 0)) throw new TypeError('openStore: checkpointBytes must be positive');
  checkMigrations(opts.migrations);
  mkdirSync(opts.dir, { recursive: true, mode: 0o700 });
  const lock = acquireDirLock(opts.dir, note);
  let db: Database | undefined;
  let fh: FileHandle | undefined;
  try {
    const loaded = await loadFromDisk(opts.dir, note);
    db = loaded.db;
    fh = await open(join(opts.dir, LOG_FILE), 'a');
    const store = new SqlJsStore(db, fh, lock, opts.dir, {
      lsn: loaded.replay.lastLsn,
      logBytes: loaded.replay.logBytes,
      checkpointBytes,
      recovery: loaded.replay.recovery,
      note,
      fsync: opts.fsync ?? ((h) => h.sync()),
      recoveryDelayMs: opts.recoveryDelayMs ?? DEFAULT_RECOVERY_DELAY_MS,
      observe: opts.observe,
    });
    db = undefined; // the store owns it now
    try {
      await migrateEmbedded(store, opts.migrations, note);
    } catch (err) {
      await store.close();
      throw err;
    }
    store.startCheckpointTimer(opts.checkpointIntervalMs ?? DEFAULT_CHECKPOINT_INTERVAL_MS);
    // A long replay is not worth repeating on the next start.
    if (store.stats.logBytes > checkpointBytes) {
      await store.checkpoint().catch((err: unknown) => {
        note(`store: checkpoint after replay failed (the log still holds everything): ${(err as Error).message}`);
      });
    }
    return store;
  } catch (err) {
    if (db) {
      await fh?.close().catch(() => undefined);
      db.close();
      lock.release();
    }
    throw err;
  }
}

function closedError(): ServiceError {
  return new ServiceError('service_unavailable', 'The store is closed.', { details: { reason: 'store_closed' }, retryable: true });
}

interface StoreInit {
  lsn: number;
  logBytes: number;
  checkpointBytes: number;
  recovery: ReplayResult['recovery'];
  note: (msg: string) => void;
  fsync: (fh: FileHandle) => Promise<void>;
  recoveryDelayMs: number;
  observe: StoreObserver | undefined;
}

class SqlJsStore implements EmbeddedStore {
  readonly recovery: ReplayResult['recovery'];
  readonly stats: StoreStats;
  readonly engine = 'embedded' as const;
  #db: Database;
  #stmts: Statements;
  #failure: Failure | null = null;
  /** Consecutive failed log writes without a successful one in between (drives the probe backoff). */
  #failures = 0;
  #recoveryTimer: NodeJS.Timeout | undefined;
  #closing = false;
  #closed = false;
  /** The open write transaction (token) and a promise that settles when it ends. */
  #tx: { token: object; done: Promise<void> } | null = null;
  /** Writers, checkpoints and recoveries wait here, one at a time. */
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
  readonly #observe: StoreObserver | undefined;
  readonly #recoveryDelayMs: number;
  #timer: NodeJS.Timeout | undefined;
  #checkpointedAtLsn = -1;

  constructor(
    db: Database,
    private readonly fh: FileHandle,
    private readonly lock: DirLock,
    private readonly dir: string,
    init: StoreInit,
  ) {
    this.#db = db;
    this.recovery = init.recovery;
    this.stats = { commits: 0, fsyncs: 0, checkpoints: 0, logBytes: init.logBytes, lsn: init.lsn, reloads: 0 };
    this.#checkpointBytes = init.checkpointBytes;
    this.#autoCheckpointAt = init.checkpointBytes;
    this.#note = init.note;
    this.#fsync = init.fsync;
    this.#observe = init.observe;
    this.#recoveryDelayMs = init.recoveryDelayMs;
    this.#stmts = new Statements(db);
  }

  get failed(): boolean {
    return this.#failure !== null;
  }

  /** Checkpoints by time when the log has grown since the last checkpoint. */
  startCheckpointTimer(intervalMs: number): void {
    if (!(intervalMs > 0)) return;
    this.#checkpointedAtLsn = this.stats.lsn;
    this.#timer = setInterval(() => {
      if (this.#closing || this.#failure || this.stats.lsn === this.#checkpointedAtLsn) return;
      const lsn = this.stats.lsn;
      this.checkpoint().then(
        () => {
          this.#checkpointedAtLsn = lsn;
        },
        (err: unknown) => {
          this.#note(`store: timed checkpoint failed (the log still holds everything): ${(err as Error).message}`);
        },
      );
    }, intervalMs);
    this.#timer.unref();
  }

  // ---- reads

  async get(sql: string, params?: readonly SqlValue[]): Promise<Row | undefined> {
    return (await this.#read(sql, params, true))[0];
  }

  all(sql: string, params?: readonly SqlValue[]): Promise<Row[]> {
    return this.#read(sql, params, false);
  }

  async #read(sql: string, params: readonly SqlValue[] | undefined, first: boolean): Promise<Row[]> {
    checkEntry(this.#stmts.entry(sql));
    await this.#committedView();
    // Looked up again: the wait may have let a checkpoint or a schema change drop the statement.
    return queryAll<Row>(this.#stmts, this.#stmts.entry(sql), params, first);
  }

  /**
   * Reads see committed data only: while a write transaction is open (its
   * function awaits between statements), readers outside it wait for it to end.
   */
  #committedView(): Promise<void> | void {
    if (this.#closed) throw closedError();
    const tx = this.#tx;
    if (tx && inTx.current() !== tx.token) return tx.done.then(() => this.#committedView());
  }

  // ---- notifications and health

  onChange(listener: (c: Change) => void): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  async health(): Promise<StoreHealth> {
    if (this.#closing || this.#closed) return { ok: false, reason: 'store_closed' };
    if (this.#failure) return { ok: false, reason: this.#failure.reason };
    return { ok: true };
  }

  // ---- writes

  write<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    if (this.#closing || this.#closed) return Promise.reject(closedError());
    if (this.#failure) return Promise.reject(this.#failure.refusal());
    if (this.#tx && inTx.current() === this.#tx.token)
      return Promise.reject(new TypeError('store.write: nested write inside a transaction'));
    const prev = this.#writeLock;
    let release!: () => void;
    this.#writeLock = new Promise<void>((r) => {
      release = r;
    });
    // The lock is held until COMMIT only: the next transaction runs while this one's fsync is pending (group commit).
    const written = prev
      .then(() => this.#runTx(fn))
      .finally(() => release())
      .then((committed) => committed());
    const observe = this.#observe;
    if (!observe) return written;
    const start = performance.now();
    written.then(
      () => observe.write((performance.now() - start) / 1000, true),
      () => observe.write((performance.now() - start) / 1000, false),
    );
    return written;
  }

  /**
   * One transaction: BEGIN, the function, the log record encoded, COMMIT.
   * Resolves (at COMMIT) with a function that waits for durability via the group commit.
   */
  async #runTx<T>(fn: (tx: Tx) => Promise<T>): Promise<() => Promise<T>> {
    if (this.#closed) throw closedError();
    if (this.#failure) throw this.#failure.refusal();
    const db = this.#db;
    const cache = this.#stmts;
    /** The log record's statements, each encoded as it ran (its parameters as they were then). */
    const recorded: string[] = [];
    const tables = new Set<string>();
    const effects: (() => void)[] = [];
    const token = {};
    let live = true;
    // As on PostgreSQL, a failed statement aborts the transaction even if `fn` catches the error.
    let firstError: unknown;
    const guard = (e: Entry): void => {
      if (!live) throw new TypeError('store: a transaction was used after it ended');
      if (e.info.txControl)
        throw new TypeError(`store: "${e.sql.trim().split(/\s/)[0]}" is not allowed inside write(); the store owns the transaction`);
      if (firstError !== undefined)
        throw new Error(`store: the transaction is aborted by an earlier error (${(firstError as Error).message})`);
    };
    const record = (e: Entry, params: readonly SqlValue[] | undefined): void => {
      recorded.push(encodeStatement(e.sql, params));
      for (const t of e.info.tables) tables.add(t);
    };
    const step = <R>(sql: string, run: (e: Entry) => R): R => {
      const e = cache.entry(sql);
      guard(e);
      try {
        checkEntry(e);
        return run(e);
      } catch (err) {
        firstError = err;
        throw err;
      }
    };
    const read = (sql: string, params: readonly SqlValue[] | undefined, first: boolean): Row[] =>
      step(sql, (e) => {
        const rows = queryAll<Row>(cache, e, params, first);
        // A write that returns rows (INSERT … RETURNING) is logged like any write.
        if (e.info.write) record(e, params);
        return rows;
      });
    const tx: Tx = {
      get: async (sql, params) => read(sql, params, true)[0],
      all: async (sql, params) => read(sql, params, false),
      run: async (sql, params) =>
        step(sql, (e) => {
          const changes = execute(db, cache, e, params);
          record(e, params);
          return { changes };
        }),
      afterCommit: (effect) => {
        effects.push(effect);
      },
    };
    let endTx!: () => void;
    this.#tx = {
      token,
      done: new Promise<void>((r) => {
        endTx = r;
      }),
    };
    let result: T;
    let buf: Buffer | undefined;
    try {
      db.run('BEGIN');
      try {
        result = await inTx.run(token, () => fn(tx));
        live = false;
        if (firstError !== undefined) throw firstError;
        if (recorded.length > 0) {
          // Encoded before COMMIT: a record the log could not hold is refused, not half-kept.
          buf = encodeRecordJson(this.stats.lsn + 1, `[${recorded.join(',')}]`);
          if (buf.length - RECORD_HEAD_BYTES > MAX_RECORD_BYTES) {
            throw new TypeError(`store.write: transaction too large for one log record (${buf.length} bytes)`);
          }
        }
        db.run('COMMIT');
      } catch (err) {
        live = false;
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
        this.#runEffects(effects);
        return result;
      };
    }
    const lsn = ++this.stats.lsn;
    this.stats.commits++;
    const durable = new Promise<void>((resolve, reject) => {
      // The log failed while this transaction ran: it is refused (and dropped by the re-open from disk).
      if (this.#failure) return reject(this.#failure.refusal());
      this.#queue.push({ lsn, buf: buf!, resolve, reject });
      this.#schedulePump();
    });
    return async () => {
      await durable;
      this.#runEffects(effects);
      if (tables.size > 0) this.#emit({ tables, remote: false });
      return result;
    };
  }

  /** Effects and listeners run after durability; one that throws is logged, never turns an acknowledged write into a failure. */
  #runEffects(effects: (() => void)[]): void {
    for (const e of effects) {
      try {
        e();
      } catch (err) {
        this.#note(`store: an afterCommit effect threw: ${(err as Error).message}`);
      }
    }
  }

  #emit(change: Change): void {
    for (const l of this.#listeners) {
      try {
        l(change);
      } catch (err) {
        this.#note(`store: a change listener threw: ${(err as Error).message}`);
      }
    }
  }

  /** Takes the write lock for `run` (between transactions). */
  #exclusive<R>(run: () => Promise<R>): Promise<R> {
    const prev = this.#writeLock;
    let release!: () => void;
    this.#writeLock = new Promise<void>((r) => {
      release = r;
    });
    return prev.then(run).finally(() => release());
  }

  // ---- checkpoint

  async checkpoint(): Promise<void> {
    if (this.#closed) throw closedError();
    if (this.#failure) throw this.#failure.refusal();
    if (this.#checkpointing) return this.#checkpointing;
    // Between transactions only: an open one (its function may be awaiting) must not be exported.
    const start = performance.now();
    const run = this.#exclusive(() => this.#doCheckpoint()).finally(() => {
      this.#observe?.checkpoint((performance.now() - start) / 1000);
      this.#checkpointing = null;
      this.#paused = false;
      this.#schedulePump();
    });
    this.#checkpointing = run;
    return run;
  }

  async #doCheckpoint(): Promise<void> {
    this.#paused = true;
    // Let an in-flight batch finish; queued records wait (they may become redundant).
    while (this.#flushing) await new Promise<void>((r) => this.#idleWaiters.push(r));
    if (this.#failure) throw this.#failure.refusal();
    const lsn = this.stats.lsn;
    const db = this.#db;
    db.run('CREATE TABLE IF NOT EXISTS _store_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)');
    db.run("INSERT OR REPLACE INTO _store_meta (key, value) VALUES ('lsn', ?)", [lsn]);
    this.#stmts.clear();
    const bytes = db.export();
    tune(db); // older sql.js releases reopen the database in export()
    await writeFileDurably(join(this.dir, SNAPSHOT_FILE), bytes, this.dir);
    // The snapshot now holds every LSN <= lsn durably: queued records up to it are done,
    // and nothing in the log is needed any more.
    const covered = this.#queue.filter((p) => p.lsn <= lsn);
    this.#queue = this.#queue.filter((p) => p.lsn > lsn);
    this.stats.logBytes = HEADER_BYTES;
    for (const p of covered) p.resolve();
    try {
      await this.fh.truncate(HEADER_BYTES);
      await this.#fsync(this.fh);
      this.stats.fsyncs++;
    } catch (err) {
      // Records <= lsn left in the log are skipped on replay; but fail closed on a failed fsync.
      this.#fail(err, []);
      throw this.#failure!.refusal();
    }
    this.stats.checkpoints++;
  }

  // ---- close

  close(): Promise<void> {
    this.#closingRun ??= this.#close();
    return this.#closingRun;
  }

  async #close(): Promise<void> {
    this.#closing = true;
    clearInterval(this.#timer);
    clearTimeout(this.#recoveryTimer);
    try {
      // Transactions already waiting for the lock run (and are refused); then nothing is open.
      await this.#exclusive(async () => undefined);
      await this.#drained();
      if (this.#checkpointing) await this.#checkpointing.catch(() => undefined);
      if (!this.#failure) {
        try {
          await this.checkpoint();
        } catch (err) {
          this.#note(`store: checkpoint on close failed (the log still holds everything): ${(err as Error).message}`);
        }
      }
    } finally {
      this.#closed = true;
      clearTimeout(this.#recoveryTimer);
      await this.fh.close().catch(() => undefined);
      this.#stmts.clear();
      this.#db.close();
      this.lock.release();
    }
  }

  // ---- group commit

  #schedulePump(): void {
    if (this.#pumpScheduled || this.#flushing || this.#paused) return;
    this.#pumpScheduled = true;
    // The batch is cut in the check phase of the event loop: every transaction that can commit
    // in this turn (an async write function takes several microtasks) joins it. A microtask here
    // cut it after the first commit and halved the transactions per fsync (16 instead of 32 at 32 writers).
    setImmediate(() => {
      this.#pumpScheduled = false;
      void this.#pump();
    });
  }

  async #pump(): Promise<void> {
    if (this.#flushing || this.#paused) return;
    this.#flushing = true;
    try {
      while (this.#queue.length > 0 && !this.#paused && !this.#failure) {
        const batch = this.#queue;
        this.#queue = [];
        const bytes = batch.length === 1 ? batch[0]!.buf : Buffer.concat(batch.map((p) => p.buf));
        try {
          await writeAll(this.fh, bytes);
          await this.#fsync(this.fh);
          this.stats.fsyncs++;
          this.stats.logBytes += bytes.length;
          this.#observe?.fsyncBatch(batch.length);
          this.#failures = 0;
        } catch (err) {
          this.#fail(err, batch);
          return;
        }
        for (const p of batch) p.resolve();
      }
    } finally {
      this.#flushing = false;
      if (this.#queue.length === 0 || this.#paused || this.#failure) {
        const waiters = this.#idleWaiters;
        this.#idleWaiters = [];
        for (const w of waiters) w();
      }
    }
    if (this.stats.logBytes > this.#autoCheckpointAt && !this.#checkpointing && !this.#closing && !this.#failure) {
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

  /** Resolves when no flush is running and (unless paused) nothing is queued. */
  #drained(): Promise<void> {
    if (!this.#flushing && (this.#queue.length === 0 || this.#paused || this.#failure) && !this.#pumpScheduled) {
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      this.#idleWaiters.push(resolve);
    }).then(() => this.#drained());
  }

  // ---- failure and recovery

  /** A log write or fsync failed: refuse writes, reject what waits, and start recovering. */
  #fail(err: unknown, batch: Pending[]): void {
    this.#failures++;
    this.#failure = classifyFailure(err);
    this.#note(`store: log write or fsync failed (${(err as Error).message}); refusing writes until the store has re-opened from disk`);
    const rejected = [...batch, ...this.#queue];
    this.#queue = [];
    for (const p of rejected) p.reject(this.#failure.refusal());
    if (!this.#closing) this.#scheduleRecovery(0);
  }

  #scheduleRecovery(delayMs: number): void {
    clearTimeout(this.#recoveryTimer);
    this.#recoveryTimer = setTimeout(() => {
      this.#recoveryTimer = undefined;
      void this.#exclusive(() => this.#recover());
    }, delayMs);
    this.#recoveryTimer.unref();
  }

  #nextDelay(): number {
    return Math.min(MAX_RECOVERY_DELAY_MS, this.#recoveryDelayMs * 2 ** Math.max(0, this.#failures - 1));
  }

  /**
   * Recovery, under the write lock: (1) cut the log back to its durable end
   * (what a failed write may have left after it is neither acknowledged nor
   * trusted: after a failed fsync the page cache may say anything), (2)
   * re-open the database from the snapshot and the log, dropping every
   * transaction that was refused, (3) accept writes again once a probe write
   * and fsync of the same directory succeed. A step that fails transiently is
   * tried again later; one that cannot succeed without an operator leaves
   * the store refusing writes with `retryable: false`.
   */
  async #recover(): Promise<void> {
    const failure = this.#failure;
    if (!failure || this.#closing || this.#closed) return;
    try {
      while (this.#flushing) await new Promise<void>((r) => this.#idleWaiters.push(r));
      if (failure.needsReload) {
        await this.fh.truncate(this.stats.logBytes);
        await this.#fsync(this.fh);
        const { db, replay } = await loadFromDisk(this.dir, this.#note);
        this.#stmts.clear();
        this.#db.close();
        this.#db = db;
        this.#stmts = new Statements(db);
        this.stats.lsn = replay.lastLsn;
        this.stats.logBytes = replay.logBytes;
        this.stats.reloads++;
        failure.needsReload = false;
        this.#note(`store: re-opened from disk after the failed log write (LSN ${replay.lastLsn})`);
      }
      if (!failure.retryable) {
        this.#note('store: the failure is not one that passes by itself; writes stay refused until an operator restarts the cell');
        return;
      }
      await probeWritable(this.dir);
    } catch (err) {
      const next = classifyFailure(err);
      if (!next.retryable || (err instanceof Error && err.message.startsWith('store:'))) {
        failure.retryable = false;
        this.#note(`store: cannot recover by itself (${(err as Error).message}); writes stay refused until an operator restarts the cell`);
        return;
      }
      failure.reason = next.reason;
      this.#scheduleRecovery(this.#nextDelay());
      this.#failures++;
      return;
    }
    this.#failure = null;
    this.#note('store: the disk accepts writes again; the store accepts writes');
  }
}
