/**
 * What a SQL statement does, read from its text: whether it writes (so the
 * embedded engine logs it even when it comes through `tx.get`/`tx.all`, e.g.
 * `INSERT … RETURNING`), whether it is transaction control (refused inside
 * `write()`), and which tables it writes (for change notifications and cache
 * invalidation).
 */

const WRITES =
  /(?:\bINSERT\s+(?:OR\s+\w+\s+)?INTO|(?<!\bDO\s+)\bUPDATE(?:\s+OR\s+\w+)?|\bDELETE\s+FROM|\bREPLACE\s+INTO)\s+"?([A-Za-z_][A-Za-z0-9_]*)"?/gi;

/** Table names written by `statements` (lower case); DDL and reads name none. */
export function tablesWritten(statements: readonly string[]): Set<string> {
  const out = new Set<string>();
  for (const sql of statements) {
    for (const m of sql.matchAll(WRITES)) out.add(m[1]!.toLowerCase());
  }
  return out;
}

const READ_ONLY = /^\s*(SELECT|VALUES|EXPLAIN)\b/i;
const WITH_WRITE = /\b(INSERT|UPDATE|DELETE|REPLACE)\b/i;

/** True unless the statement only reads (SELECT, VALUES, EXPLAIN, or a WITH that writes nothing). */
export function isWriteStatement(sql: string): boolean {
  if (READ_ONLY.test(sql)) return false;
  if (/^\s*WITH\b/i.test(sql)) return WITH_WRITE.test(sql);
  return true;
}

/** Statements that would break the store's own BEGIN/COMMIT around write(). */
const TX_CONTROL =
  /^\s*(BEGIN|COMMIT|END|ROLLBACK|SAVEPOINT|RELEASE|VACUUM|ATTACH|DETACH|START\s+TRANSACTION|PREPARE\s+TRANSACTION|SET\s+TRANSACTION|LISTEN|UNLISTEN)\b/i;

export function isTxControl(sql: string): boolean {
  return TX_CONTROL.test(sql);
}
