/** Thin helpers over a sql.js Database: settings, queries, statements. */
import type { Database, SqlValue as SqlJsValue, Statement } from 'sql.js';
import type { Row, SqlValue } from '../types.ts';

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

/**
 * Prepared statements kept by SQL text (compiling is about half the cost of a
 * point lookup). Statements must be dropped before anything that may free them
 * (`db.export()` in some sql.js releases, `db.close()`): call `clear()`.
 */
export class Statements {
  readonly #map = new Map<string, Statement>();
  constructor(
    private readonly db: Database,
    private readonly max = 256,
  ) {}

  get(sql: string): Statement {
    let st = this.#map.get(sql);
    if (st) {
      this.#map.delete(sql);
    } else {
      st = this.db.prepare(sql);
      if (this.#map.size >= this.max) {
        const [oldest, old] = this.#map.entries().next().value as [string, Statement];
        this.#map.delete(oldest);
        old.free();
      }
    }
    this.#map.set(sql, st);
    return st;
  }

  clear(): void {
    for (const st of this.#map.values()) st.free();
    this.#map.clear();
  }
}

/**
 * Column names per prepared statement. sql.js's getAsObject() asks SQLite for
 * every column name on every row (a UTF-8 decode per column); a statement's
 * columns only change with the schema, and DDL drops every statement.
 */
const columnNames = new WeakMap<Statement, string[]>();

export function queryAll<T extends Row>(stmts: Statements, sql: string, params: readonly SqlValue[] | undefined, first: boolean): T[] {
  const st = stmts.get(sql);
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

/** Any schema change, anywhere in a script (a false positive only costs re-preparing). */
const DDL = /\b(CREATE|ALTER|DROP)\s+(TABLE|INDEX|VIEW|TRIGGER|UNIQUE|TEMP|TEMPORARY|VIRTUAL)\b/i;

/** Runs one statement (or, without parameters, a script of several); returns the rows changed. */
export function execute(db: Database, stmts: Statements, sql: string, params: readonly SqlValue[] | undefined): number {
  if (params && params.length > 0) {
    stmts.get(sql).run(params as SqlJsValue[]);
  } else {
    db.run(sql);
  }
  const changed = db.getRowsModified();
  // A schema change may alter what a cached `SELECT *` returns: prepare afresh.
  if (DDL.test(sql)) stmts.clear();
  return changed;
}
