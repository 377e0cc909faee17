/**
 * The contract of the cell's store: one asynchronous interface, two engines
 * (cell/store/embedded.ts: sql.js + checksummed log + group commit +
 * snapshots; cell/store/postgres.ts: a PostgreSQL server). Modules never see
 * which engine they run on; SQL lives in each module's repository file and
 * stays within the dialect both engines run (docs/storage.md, "One dialect").
 *
 * - Reads (`get`, `all`) see committed data only.
 * - `write(fn)` runs `fn` as one transaction and resolves once it is durable
 *   (fsync'd log on the embedded engine; a committed, flushed WAL record on
 *   PostgreSQL). If `fn` throws, nothing is kept and `write` rejects with
 *   that error. A statement that fails aborts the transaction, even if `fn`
 *   catches the error (PostgreSQL's rule, enforced on both engines): `write`
 *   rejects with the first error. `fn` may run more than once (PostgreSQL retries a
 *   serialization conflict), so it must have no effect outside the
 *   transaction: put in-memory effects in `tx.afterCommit`.
 * - A transaction must be deterministic given its SQL and parameters: no
 *   `random()`, no current time in SQL; pass times and ids in.
 * - Rows come back untyped (`Row`): each repository decodes them into its own
 *   types (cell/store/decode.ts), never by casting.
 */

export type SqlValue = string | number | null | Uint8Array;
export type Row = Readonly<Record<string, SqlValue>>;

export interface Reader {
  /** First row of a query, or undefined. */
  get(sql: string, params?: readonly SqlValue[]): Promise<Row | undefined>;
  /** All rows of a query. */
  all(sql: string, params?: readonly SqlValue[]): Promise<Row[]>;
}

export interface Tx extends Reader {
  /**
   * Executes a statement inside the transaction; resolves with the rows changed.
   * A statement `fn` issues and does not wait for (its promise handled, not
   * awaited) is still part of the transaction: it runs before COMMIT, and its
   * failure aborts the transaction (`write` rejects with it). On PostgreSQL the
   * COMMIT then travels in the same round trip (pipelined connection).
   */
  run(sql: string, params?: readonly SqlValue[]): Promise<{ changes: number }>;
  /**
   * Runs `effect` once the transaction is durable (never if it rolls back;
   * once even if `fn` was retried): in-memory mirrors, cache invalidation.
   */
  afterCommit(effect: () => void): void;
}

export interface Migration {
  /** Unique, stable name, e.g. `iam-001-principals`. Never renamed or edited once shipped. */
  id: string;
  /**
   * Statements separated by `;`, in the shared dialect. DDL column types are
   * written as SQLite spells them; the PostgreSQL engine maps `INTEGER` to
   * BIGINT, `INTEGER PRIMARY KEY AUTOINCREMENT` to BIGSERIAL PRIMARY KEY,
   * `BLOB` to BYTEA and `REAL` to DOUBLE PRECISION (docs/storage.md).
   */
  sql: string;
}

/** A committed change, as `onChange` listeners see it. */
export interface Change {
  /** Tables the transaction wrote. */
  tables: ReadonlySet<string>;
  /** True when another cell of the group committed it (PostgreSQL only). */
  remote: boolean;
  /**
   * PostgreSQL only, naming every table: `lost` when the notification
   * connection was lost (until `resumed`, other cells' changes are not heard:
   * a cache must neither trust what it holds nor keep what it reads), then
   * `resumed` once it is back (anything may have changed meanwhile).
   */
  gap?: 'lost' | 'resumed';
  /**
   * PostgreSQL only: the keys the writer declared for its rows (WriteOptions.subjects: the runs a
   * journal append wrote), the union over the writes one notification covers. Absent: unknown,
   * so a listener that follows keys treats every key as changed.
   */
  subjects?: ReadonlySet<string>;
}

export interface WriteOptions {
  /**
   * `false`: other cells are not told of this transaction (no NOTIFY on
   * PostgreSQL; this process's listeners still hear it). Only for tables no
   * cell caches (DPoP proofs seen, rate buckets): a notification costs every
   * cell a wake-up, and PostgreSQL serializes the commits of notifying
   * transactions.
   *
   * `'batched'`: other cells are told after the commit, within about
   * BATCHED_NOTIFY_MS, in one notification shared by every batched write of
   * that interval (PostgreSQL only; this process's listeners hear it at once).
   * For hot paths whose commits must not serialize on the notification lock
   * (journal appends); a cell that dies before it is sent leaves the others
   * untold of those commits until its next notification.
   */
  notify?: boolean | 'batched';
  /**
   * `row-locks`: on PostgreSQL the transaction runs READ COMMITTED instead of
   * SERIALIZABLE, so it never fails with a serialization conflict; it must
   * then take the row locks it relies on itself, by writing (UPDATE) the rows
   * whose values it depends on before it reads anything else (a run's
   * journal appends first update the run's row: cell/runs/journal.ts).
   * Deadlocks are still retried. The embedded engine runs every transaction
   * alone, so both modes are the same there.
   */
  isolation?: 'serializable' | 'row-locks';
  /**
   * The keys (run ids) of every row this transaction writes in tables followed by key (the journal):
   * carried with the notification to other cells (Change.subjects), so that a cell follows only the
   * keys it cares about instead of re-reading all of them at each change. A write that names none
   * is "any key". Keys are identifiers ([A-Za-z0-9_.:-], at most 100 characters); one that is not,
   * or too many in one notification, makes the notification "any key" again.
   */
  subjects?: readonly string[];
}

export interface StoreHealth {
  ok: boolean;
  /**
   * Why not, when not ok: `store_closed`, `store_failed`, `disk_full`
   * (embedded), `connection_lost`, `notifications_lost` (PostgreSQL).
   */
  reason?: string;
}

export interface Store extends Reader {
  readonly engine: 'embedded' | 'postgres';
  /** Runs `fn` as one transaction; resolves once it is durable. See the module header. */
  write<T>(fn: (tx: Tx) => Promise<T>, opts?: WriteOptions): Promise<T>;
  /**
   * Subscribes to committed writes: this process's at once, and on PostgreSQL
   * every other cell's of the same database within about a second. Returns
   * the unsubscribe function.
   */
  onChange(listener: (change: Change) => void): () => void;
  /** Whether a write could succeed now (readiness probe). */
  health(): Promise<StoreHealth>;
  /** Flushes and releases everything (lock, connections). Idempotent. */
  close(): Promise<void>;
}

export interface OpenStoreOptions {
  /** Migrations applied in order on open (each once, recorded in `_migrations`). */
  migrations: readonly Migration[];
  /** Called with human-readable notes (e.g. a dropped torn tail) for the operator log. */
  log?: (msg: string) => void;
  /** Told of each write's latency and, on the embedded engine, each group commit and checkpoint (the cell's metrics). */
  observe?: StoreObserver;
}

/** What the store tells the cell's metrics (cell/ops/metrics.ts); every method must be cheap and must not throw. */
export interface StoreObserver {
  /** A `write()` settled after `seconds` (from the call to durability or refusal). */
  write(seconds: number, ok: boolean): void;
  /** The embedded engine made `transactions` commits durable with one fsync. */
  fsyncBatch(transactions: number): void;
  /** The embedded engine wrote a checkpoint in `seconds`. */
  checkpoint(seconds: number): void;
  /** PostgreSQL ran a write function again after a serialization failure or deadlock (40001, 40P01). */
  retry?(sqlState: string): void;
}
