/** The tables a list of SQL statements writes (for change notifications and cache invalidation). */

const WRITE = /^\s*(?:INSERT\s+(?:OR\s+\w+\s+)?INTO|UPDATE(?:\s+OR\s+\w+)?|DELETE\s+FROM|REPLACE\s+INTO)\s+"?([A-Za-z_][A-Za-z0-9_]*)"?/i;

/** Table names written by `statements` (lower case); DDL and reads name none. */
export function tablesWritten(statements: readonly string[]): Set<string> {
  const out = new Set<string>();
  for (const sql of statements) {
    const m = WRITE.exec(sql);
    if (m) out.add(m[1]!.toLowerCase());
  }
  return out;
}
