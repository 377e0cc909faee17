/**
 * The shared dialect, enforced: a statement that only one engine would run
 * (or would answer differently) is refused with a TypeError naming the rule
 * and the portable spelling, on both engines, so the embedded engine's tests
 * catch SQL that would break on PostgreSQL. Checks look at code only (not
 * inside string literals, quoted identifiers or comments) and each SQL text
 * is checked once. Rules: docs/storage.md, "One dialect".
 */
import { lex } from './lex.ts';

interface Rule {
  test: (code: string) => boolean;
  why: string;
}

const re = (r: RegExp) => (code: string) => r.test(code);

/** True when `MAX(`/`MIN(` somewhere has two arguments (the scalar form). */
function scalarMinMax(code: string): boolean {
  const head = /\b(MAX|MIN)\s*\(/gi;
  for (let m = head.exec(code); m; m = head.exec(code)) {
    let depth = 1;
    for (let i = m.index + m[0].length; i < code.length && depth > 0; i++) {
      const c = code[i];
      if (c === '(') depth++;
      else if (c === ')') depth--;
      else if (c === ',' && depth === 1) return true;
    }
  }
  return false;
}

const RULES: Rule[] = [
  {
    test: re(/\bINSERT\s+OR\s+(IGNORE|REPLACE|ABORT|FAIL|ROLLBACK)\b|\bREPLACE\s+INTO\b/i),
    why: 'INSERT OR … / REPLACE INTO are SQLite-only: write INSERT … ON CONFLICT (cols) DO NOTHING or DO UPDATE SET c = excluded.c',
  },
  { test: re(/\bIFNULL\s*\(/i), why: 'IFNULL is SQLite-only: write COALESCE' },
  { test: scalarMinMax, why: 'the scalar MAX(a, b)/MIN(a, b) is SQLite-only: write CASE WHEN a > b THEN a ELSE b END' },
  { test: re(/\b(GREATEST|LEAST)\s*\(/i), why: 'GREATEST/LEAST are PostgreSQL-only: write CASE WHEN a > b THEN a ELSE b END' },
  {
    test: re(/\bjson(b)?_\w+\s*\(|->>?/i),
    why: 'no JSON functions or operators in SQL: JSON is stored as TEXT and parsed by the repository; give a field you filter on its own column',
  },
  {
    test: re(/\b(datetime|date|time|julianday|strftime|unixepoch|now)\s*\(|\bCURRENT_(TIMESTAMP|DATE|TIME)\b|\b(random|randomblob)\s*\(/i),
    why: 'no clock or randomness in SQL (the embedded engine replays statements): pass times and ids in as parameters',
  },
  {
    test: re(/\blast_insert_rowid\s*\(|\b(rowid|_rowid_)\b/i),
    why: 'rowid and last_insert_rowid() are SQLite-only: use INTEGER PRIMARY KEY AUTOINCREMENT and RETURNING',
  },
  {
    test: re(/\bGLOB\b|\bREGEXP\b|~\*?/i),
    why: 'GLOB, REGEXP and ~ are engine-specific: use LIKE (with LOWER() on both sides for case-insensitive matching)',
  },
  { test: re(/\b(PRAGMA|ATTACH|DETACH|VACUUM)\b|\bWITHOUT\s+ROWID\b/i), why: 'PRAGMA, ATTACH, VACUUM and WITHOUT ROWID are SQLite-only' },
  { test: re(/\bCAST\s*\([^()]*\bAS\s+INT(EGER)?\s*\)/i), why: 'CAST(… AS INTEGER) is 32-bit on PostgreSQL: write CAST(… AS BIGINT)' },
  { test: re(/\bLIMIT\s+-/i), why: 'a negative LIMIT is SQLite-only: leave LIMIT out' },
  {
    test: re(/\bAS\s+(?=\w*[a-z])(?=\w*[A-Z])[A-Za-z_]\w*/),
    why: 'a mixed-case alias comes back lower-cased from PostgreSQL: use lower-case aliases',
  },
  { test: re(/::/), why: ':: casts are PostgreSQL-only: write CAST(x AS type)' },
];

const checked = new Set<string>();
const CHECKED_MAX = 5000;

/** Throws a TypeError when `sql` is outside the shared dialect. */
export function checkPortable(sql: string): void {
  if (checked.has(sql)) return;
  const code = lex(sql)
    .filter((p) => p.code)
    .map((p) => p.text)
    .join(' ');
  for (const r of RULES) {
    if (r.test(code))
      throw new TypeError(`store: not in the shared SQL dialect: ${r.why} (docs/storage.md, "One dialect"): ${sql.trim().slice(0, 120)}`);
  }
  if (checked.size >= CHECKED_MAX) checked.clear();
  checked.add(sql);
}
