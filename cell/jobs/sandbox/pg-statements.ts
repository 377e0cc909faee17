/**
 * Which statements a SQL job may send on the PostgreSQL engine
 * (pg-workspace.ts): the first keyword, read as PostgreSQL reads it, must be
 * in an allow-list. This is not what keeps a job inside its schema (the
 * workspace role's privileges do); it keeps the job inside its own
 * transaction and session, so its effect record commits with it.
 */
/** First keywords a job statement may start with (anything else is refused). */
const ALLOWED_KINDS: ReadonlySet<string> = new Set([
  'SELECT',
  'INSERT',
  'UPDATE',
  'DELETE',
  'MERGE',
  'WITH',
  'VALUES',
  'TABLE',
  'CREATE',
  'ALTER',
  'DROP',
  'TRUNCATE',
  'COMMENT',
  'EXPLAIN',
]);
/** `ALTER <what>` a job may not run: roles (its own password, its settings), the database, the server. */
const REFUSED_ALTER: ReadonlySet<string> = new Set(['ROLE', 'USER', 'GROUP', 'DATABASE', 'SYSTEM', 'DEFAULT']);

/**
 * The leading words of a statement as PostgreSQL reads them: whitespace
 * (PostgreSQL's six characters only), `--` and nested `/* *\/` comments and
 * opening parentheses skipped. Upper-cased.
 */
export function leadingWords(sql: string, n: number): string[] {
  const words: string[] = [];
  let i = 0;
  while (i < sql.length && words.length < n) {
    const c = sql[i]!;
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\f' || c === '\v' || c === '(') {
      i++;
    } else if (c === '-' && sql[i + 1] === '-') {
      while (i < sql.length && sql[i] !== '\n' && sql[i] !== '\r') i++;
    } else if (c === '/' && sql[i + 1] === '*') {
      let depth = 1;
      i += 2;
      while (i < sql.length && depth > 0) {
        if (sql[i] === '/' && sql[i + 1] === '*') {
          depth++;
          i += 2;
        } else if (sql[i] === '*' && sql[i + 1] === '/') {
          depth--;
          i += 2;
        } else i++;
      }
    } else {
      const m = /^[A-Za-z_]+/.exec(sql.slice(i));
      if (!m) break;
      words.push(m[0].toUpperCase());
      i += m[0].length;
    }
  }
  return words;
}

/** Why an entry is refused before it runs, or null. */
export function refusal(sql: string): { refused: string; message: string } | null {
  const [kind, what] = leadingWords(sql, 2);
  if (kind === undefined) return { refused: 'empty_statement', message: 'the statement is empty: only whitespace or comments' };
  if (!ALLOWED_KINDS.has(kind)) {
    return {
      refused: kind,
      message: `${kind} is not allowed: a job runs data and schema statements only (each job is one transaction in its workspace's schema)`,
    };
  }
  if (kind === 'ALTER' && what !== undefined && REFUSED_ALTER.has(what)) {
    return { refused: `ALTER ${what}`, message: `ALTER ${what} is not allowed: a job changes its own schema's objects only` };
  }
  return null;
}
