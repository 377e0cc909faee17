/**
 * The shared SQL dialect rendered for PostgreSQL: `?` placeholders become
 * `$1, $2, …` (outside string literals, quoted identifiers and comments), a
 * migration script is split into its statements, and DDL column types written
 * as SQLite spells them are mapped (INTEGER → BIGINT, INTEGER PRIMARY KEY
 * AUTOINCREMENT → BIGSERIAL PRIMARY KEY, BLOB → BYTEA, REAL → DOUBLE
 * PRECISION). Rules of the dialect: docs/storage.md, "One dialect".
 */
import { lex } from './lex.ts';
import { describeStatement, type StatementInfo } from './tables.ts';

const CACHE_MAX = 2000;

/** A statement of the shared dialect as PostgreSQL runs it: numbered (toNumbered) and what its text does (describeStatement). */
export interface PgStatement {
  readonly text: string;
  readonly count: number;
  readonly info: StatementInfo;
}

const statementCache = new Map<string, PgStatement>();

/**
 * The statement's numbered text and its facts, read once per text: a step sends the same few texts
 * again and again, and reading each with regular expressions every time was ~3 % of a lone run's CPU.
 * Bounded (texts built from data, a list of n placeholders, come and go): cleared past CACHE_MAX texts.
 */
export function pgStatement(sql: string): PgStatement {
  const hit = statementCache.get(sql);
  if (hit) return hit;
  const out: PgStatement = { ...toNumbered(sql), info: describeStatement(sql) };
  if (statementCache.size >= CACHE_MAX) statementCache.clear();
  statementCache.set(sql, out);
  return out;
}

/** `?` → `$n` outside literals and comments; the number of placeholders is returned too (pgStatement caches it by text). */
export function toNumbered(sql: string): { text: string; count: number } {
  let n = 0;
  let text: string;
  if (!sql.includes('?')) {
    text = sql;
  } else {
    text = lex(sql)
      .map((p) => (p.code ? p.text.replace(/\?/g, () => `$${++n}`) : p.text))
      .join('');
  }
  return { text, count: n };
}

/** How many statement texts get a name (a server-side prepared statement on each connection that runs them). */
export const NAMED_STATEMENTS_MAX = 1000;

/**
 * The names under which numbered statements are prepared on the server. A
 * statement with parameters (which the extended protocol carries, one
 * statement only) is named, so each connection parses it once and may keep
 * its plan (PostgreSQL's plan cache); one without runs unnamed. A name is
 * never reused for another text (a connection keeps what it prepared); past
 * `max` texts, new ones run unnamed, so texts built from data (a list of n
 * placeholders) cannot grow what every connection holds without bound. The
 * store's statements name their columns (no `SELECT *`, no `RETURNING *`): a
 * prepared statement whose result columns a migration changed would fail.
 */
export class StatementNames {
  readonly #names = new Map<string, string>();
  constructor(private readonly max: number = NAMED_STATEMENTS_MAX) {}

  /** The statement's name, or undefined for one run unnamed. */
  of(numbered: { text: string; count: number }): string | undefined {
    if (numbered.count === 0) return undefined;
    const known = this.#names.get(numbered.text);
    if (known !== undefined || this.#names.size >= this.max) return known;
    const name = `cs${this.#names.size + 1}`;
    this.#names.set(numbered.text, name);
    return name;
  }
}

/** The statements of a script, split at `;` outside literals and comments; empty ones dropped. */
export function splitStatements(script: string): string[] {
  const stmts: string[] = [];
  let cur = '';
  for (const p of lex(script)) {
    if (!p.code) {
      cur += p.text;
      continue;
    }
    const parts = p.text.split(';');
    for (let k = 0; k < parts.length; k++) {
      if (k > 0) {
        stmts.push(cur);
        cur = '';
      }
      cur += parts[k]!;
    }
  }
  stmts.push(cur);
  return stmts.map((s) => s.trim()).filter((s) => s !== '' && !/^(--[^\n]*\n?\s*|\/\*[\s\S]*?\*\/\s*)+$/.test(s));
}

const DDL_HEAD = /^\s*(CREATE\s+(TEMP\s+|TEMPORARY\s+)?TABLE|ALTER\s+TABLE)\b/i;

/** Column types of a DDL statement mapped to PostgreSQL; other statements are returned unchanged. */
export function renderDdl(stmt: string): string {
  if (!DDL_HEAD.test(stmt)) return stmt;
  if (/\bWITHOUT\s+ROWID\b/i.test(stmt)) {
    throw new TypeError('store: WITHOUT ROWID is SQLite-only; leave it out (docs/storage.md, "One dialect")');
  }
  return lex(stmt)
    .map((p) => {
      if (!p.code) return p.text;
      return p.text
        .replace(/\bINTEGER\s+PRIMARY\s+KEY\s+AUTOINCREMENT\b/gi, 'BIGSERIAL PRIMARY KEY')
        .replace(/\bINTEGER\b/gi, 'BIGINT')
        .replace(/\bBLOB\b/gi, 'BYTEA')
        .replace(/\bREAL\b/gi, 'DOUBLE PRECISION');
    })
    .join('');
}

/** A migration script as PostgreSQL statements. */
export function renderMigration(script: string): string[] {
  return splitStatements(script).map(renderDdl);
}
