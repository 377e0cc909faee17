/** Thin helpers over a sql.js Database: settings, queries, statements. */
import type { Database, SqlValue as SqlJsValue, Statement } from 'sql.js';
import type { Row, SqlValue } from '../types.ts';
import { describeStatement, type StatementInfo } from './tables.ts';

/**
 * The database file lives in sql.js's in-memory filesystem and dies with the
 * process, so SQLite's own crash safety buys nothing: keep the rollback journal
 * in memory (ROLLBACK still works) instead of writing it to the emulated file.
 */
export function tune(db: Database): void {
  db.run('PRAGMA journal_mode = MEMORY');
  db.run('PRAGMA temp_store = MEMORY');
  // One process owns the database: holding the lock spares SQLite its
  // hot-journal file probe on every read (point selects ~3.8x faster).
  db.run('PRAGMA locking_mode = EXCLUSIVE');
}

/** A SQL text the store has seen: what it does (read once) and its prepared statement, if any yet. */
export interface Entry {
  readonly sql: string;
  readonly info: StatementInfo;
  st: Statement | null;
}

/**
 * Prepared statements kept by SQL text (compiling is about half the cost of a
 * point lookup), each with what its text does (`describeStatement`: the
 * dialect check and the write, transaction-control, DDL and tables-written
 * readings), so a statement that runs again costs one lookup, not a check and
 * four regular expressions. Statements must be dropped before anything that
 * may free them (`db.export()` in some sql.js releases, `db.close()`): call
 * `clear()`.
 */
export class Statements {
  readonly #map = new Map<string, Entry>();
  constructor(
    private readonly db: Database,
    private readonly max = 256,
  ) {}

  /** The entry of `sql` (described on first sight), most recently used. */
  entry(sql: string): Entry {
    let e = this.#map.get(sql);
    if (e) {
      this.#map.delete(sql);
    } else {
      e = { sql, info: describeStatement(sql), st: null };
      if (this.#map.size >= this.max) {
        const [oldest, old] = this.#map.entries().next().value as [string, Entry];
        this.#map.delete(oldest);
        old.st?.free();
      }
    }
    this.#map.set(sql, e);
    return e;
  }

  /** The entry's prepared statement (prepared on first use). Use it before the next `entry()` call. */
  prepared(e: Entry): Statement {
    e.st ??= this.db.prepare(e.sql);
    return e.st;
  }

  clear(): void {
    for (const e of this.#map.values()) {
      e.st?.free();
      e.st = null;
    }
    this.#map.clear();
  }
}

/** Throws a text's dialect refusal (a TypeError, as checkPortable throws it). */
export function checkEntry(e: Entry): void {
  if (e.info.refused !== null) throw new TypeError(e.info.refused);
}

/**
 * Column names per prepared statement. sql.js's getAsObject() asks SQLite for
 * every column name on every row (a UTF-8 decode per column); a statement's
 * columns only change with the schema, and DDL drops every statement.
 */
const columnNames = new WeakMap<Statement, string[]>();

export function queryAll<T extends Row>(stmts: Statements, e: Entry, params: readonly SqlValue[] | undefined, first: boolean): T[] {
  const st = stmts.prepared(e);
  try {
    if (params && params.length > 0) st.bind(params as SqlJsValue[]);
    const rows: T[] = [];
    while (st.step()) {
      const values = st.get();
      let names = columnNames.get(st);
      if (!names || names.length !== values.length) {
        names = st.getColumnNames();
        columnNames.set(st, names);
      }
      const row: Record<string, SqlValue> = {};
      for (let i = 0; i < names.length; i++) row[names[i]!] = values[i] as SqlValue;
      rows.push(row as T);
      if (first) break;
    }
    return rows;
  } finally {
    st.reset();
  }
}

/** Runs one statement (or, without parameters, a script of several); returns the rows changed. */
export function execute(db: Database, stmts: Statements, e: Entry, params: readonly SqlValue[] | undefined): number {
  if (params && params.length > 0) {
    stmts.prepared(e).run(params as SqlJsValue[]);
  } else {
    db.run(e.sql);
  }
  const changed = db.getRowsModified();
  // A schema change may alter what a cached `SELECT *` returns: prepare afresh.
  if (e.info.ddl) stmts.clear();
  return changed;
}
