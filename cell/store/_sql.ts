/** Thin helpers over a sql.js Database: settings, queries, statements. */
import type { Database, SqlValue as SqlJsValue } from 'sql.js';
import type { Row, SqlValue } from './types.ts';

/**
 * The database file lives in sql.js's in-memory filesystem and dies with the
 * process, so SQLite's own crash safety buys nothing: keep the rollback journal
 * in memory (ROLLBACK still works) instead of writing it to the emulated file.
 */
export function tune(db: Database): void {
  db.run('PRAGMA journal_mode = MEMORY');
  db.run('PRAGMA temp_store = MEMORY');
}

export function queryAll<T extends Row>(db: Database, sql: string, params: readonly SqlValue[] | undefined, first: boolean): T[] {
  const st = db.prepare(sql);
  try {
    if (params && params.length > 0) st.bind(params as SqlJsValue[]);
    const rows: T[] = [];
    while (st.step()) {
      rows.push(st.getAsObject() as T);
      if (first) break;
    }
    return rows;
  } finally {
    st.free();
  }
}

export function execute(db: Database, sql: string, params: readonly SqlValue[] | undefined): number {
  if (params && params.length > 0) {
    const st = db.prepare(sql);
    try {
      st.run(params as SqlJsValue[]);
    } finally {
      st.free();
    }
  } else {
    db.run(sql);
  }
  return db.getRowsModified();
}
