/**
 * The contract of the cell's durable store (implementation: cell/store/store.ts).
 *
 * sql.js holds the database in memory. A write transaction runs synchronously
 * inside BEGIN/COMMIT; its statements are recorded and appended to a
 * checksummed log that is fsync'd before `write()` resolves (group commit:
 * concurrent writers share one fsync). A throwing transaction is rolled back
 * and nothing is logged. Replay re-executes the recorded statements, so a
 * transaction must be deterministic: no `random()`, no `datetime('now')`;
 * pass times and ids in as parameters.
 */

export type SqlValue = string | number | null | Uint8Array;
export type Row = Record<string, SqlValue>;

export interface Reader {
  /** First row of a query, or undefined. */
  get<T extends Row = Row>(sql: string, params?: readonly SqlValue[]): T | undefined;
  /** All rows of a query. */
  all<T extends Row = Row>(sql: string, params?: readonly SqlValue[]): T[];
}

export interface Tx extends Reader {
  /** Executes a statement inside the transaction; returns the rows changed. */
  run(sql: string, params?: readonly SqlValue[]): { changes: number };
}

export interface Migration {
  /** Unique, stable name, e.g. `iam-001-principals`. Never renamed once shipped. */
  id: string;
  sql: string;
}

export interface Store extends Reader {
  /**
   * Runs `fn` as one transaction and resolves once it is durable on disk.
   * If `fn` throws, the transaction is rolled back, nothing is logged, and the
   * returned promise rejects with that error.
   */
  write<T>(fn: (tx: Tx) => T): Promise<T>;
  /** Writes a snapshot and truncates the log. */
  checkpoint(): Promise<void>;
  /** Flushes, checkpoints and releases the directory lock. */
  close(): Promise<void>;
  /** What opening found: records replayed, bytes of torn or corrupt tail dropped. */
  readonly recovery: { replayed: number; droppedBytes: number; droppedReason: string | null };
}

export interface OpenStoreOptions {
  /** Data directory; created when missing. */
  dir: string;
  /** Migrations applied in order on open (each once, as a logged transaction). */
  migrations: readonly Migration[];
  /** Log size that triggers an automatic checkpoint (bytes). */
  checkpointBytes?: number;
  /** Called with human-readable notes (e.g. dropped tail) for the operator log. */
  log?: (msg: string) => void;
}
