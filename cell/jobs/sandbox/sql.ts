/**
 * SQL job statements against a workspace's own SQLite database (sql.js), run
 * inside the sandbox worker (worker.ts).
 *
 * Each workspace has one database file, `<data>/workspaces/<workspace_id>/sql.sqlite`.
 * A job's statements run as one transaction: all of them commit or none do.
 * After a commit that may have changed anything (any statement that is not a
 * plain SELECT) the database is written durably: export, write a temp file,
 * fsync, rename over the file, fsync the directory. A crash or a kill at any
 * point leaves the previous committed file. The host serialises jobs of one
 * workspace, so there is a single writer per file.
 *
 * Caps: a row cap per statement (rows past it are not returned and the result
 * says `truncated: true`); the time cap and cancel are enforced by the host,
 * which terminates this worker (sql.js has no progress handler).
 */
import { existsSync, readFileSync } from 'node:fs';
import { loadSqlJs } from '../../store/_sqljs.ts';
import { writeFileDurable } from '../../../runtime/write-durable.ts';

export type SqlParam = string | number | boolean | null;

export interface SqlTask {
  dbPath: string;
  statements: { sql: string; params?: SqlParam[] | Record<string, SqlParam> }[];
  rowLimit: number;
}

export interface SqlStatementResult {
  columns: string[];
  rows: SqlParam[][];
  truncated: boolean;
  changes: number;
}

export type SqlOutcome =
  | { ok: true; results: SqlStatementResult[]; duration_ms: number }
  | { ok: false; reason: 'sql_error'; message: string; statement: number; duration_ms: number };

const REFUSED = /^\s*(begin|commit|end|rollback|savepoint|release|attach|detach|vacuum)\b/i;

function toBind(p: SqlTask['statements'][number]['params']): (string | number | null)[] | Record<string, string | number | null> | undefined {
  if (p === undefined) return undefined;
  const conv = (v: SqlParam) => (typeof v === 'boolean' ? (v ? 1 : 0) : v);
  if (Array.isArray(p)) return p.map(conv);
  const out: Record<string, string | number | null> = {};
  for (const [k, v] of Object.entries(p)) out[/^[:@$]/.test(k) ? k : `:${k}`] = conv(v);
  return out;
}

/** Runs a job's statements as one transaction and persists the database if it may have changed. */
export async function runSql(task: SqlTask): Promise<SqlOutcome> {
  const started = Date.now();
  const SQL = await loadSqlJs();
  const db = new SQL.Database(existsSync(task.dbPath) ? readFileSync(task.dbPath) : undefined);
  const results: SqlStatementResult[] = [];
  let writes = false;
  let index = 0;
  try {
    db.exec('BEGIN');
    for (; index < task.statements.length; index++) {
      const s = task.statements[index]!;
      if (REFUSED.test(s.sql)) throw new Error('transaction control, ATTACH, DETACH and VACUUM are not allowed: each job is one transaction');
      if (!/^\s*select\b/i.test(s.sql)) writes = true;
      const stmt = db.prepare(s.sql);
      try {
        const bind = toBind(s.params);
        if (bind !== undefined) stmt.bind(bind);
        const columns = stmt.getColumnNames();
        const rows: SqlParam[][] = [];
        let truncated = false;
        while (stmt.step()) {
          if (rows.length >= task.rowLimit) { truncated = true; break; }
          rows.push(stmt.get().map((v) => (v instanceof Uint8Array ? Buffer.from(v).toString('base64') : v)) as SqlParam[]);
        }
        results.push({ columns, rows, truncated, changes: columns.length === 0 ? db.getRowsModified() : 0 });
      } finally {
        stmt.free();
      }
    }
    db.exec('COMMIT');
    if (writes) writeFileDurable(task.dbPath, db.export(), { mode: 0o600 });
    return { ok: true, results, duration_ms: Date.now() - started };
  } catch (err) {
    try { db.exec('ROLLBACK'); } catch { /* no transaction open */ }
    const message = err instanceof Error ? err.message : String(err);
    return { ok: false, reason: 'sql_error', message: message.slice(0, 1000), statement: index, duration_ms: Date.now() - started };
  } finally {
    db.close();
  }
}
