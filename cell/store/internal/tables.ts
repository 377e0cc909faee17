/**
 * What a SQL statement does, read from its text: whether it writes (so the
 * embedded engine logs it even when it comes through `tx.get`/`tx.all`, e.g.
 * `INSERT … RETURNING`), whether it is transaction control (refused inside
 * `write()`), and which tables it writes (for change notifications and cache
 * invalidation). `describeStatement` answers all of it, and whether the text
 * is in the shared dialect, once per SQL text (the embedded engine keeps the
 * answer with the statement it prepared).
 */
import { checkPortable } from './dialect.ts';

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

/** Any schema change, anywhere in a script (a false positive only costs re-preparing). */
const DDL = /\b(CREATE|ALTER|DROP)\s+(TABLE|INDEX|VIEW|TRIGGER|UNIQUE|TEMP|TEMPORARY|VIRTUAL)\b/i;

/** What a SQL text does, read once from the text. */
export interface StatementInfo {
  /** Logged even when it comes through tx.get/tx.all (isWriteStatement). */
  readonly write: boolean;
  /** Refused inside write() (isTxControl). */
  readonly txControl: boolean;
  /** May change the schema: prepared statements are dropped after it. */
  readonly ddl: boolean;
  /** Tables it writes, lower case (tablesWritten). */
  readonly tables: readonly string[];
  /** checkPortable's refusal, when the text is outside the shared dialect. */
  readonly refused: string | null;
}

/** The facts above, from the text (no cache: callers keep the answer). */
export function describeStatement(sql: string): StatementInfo {
  let refused: string | null = null;
  try {
    checkPortable(sql);
  } catch (err) {
    refused = (err as Error).message;
  }
  return {
    write: isWriteStatement(sql),
    txControl: isTxControl(sql),
    ddl: DDL.test(sql),
    tables: [...tablesWritten([sql])],
    refused,
  };
}
