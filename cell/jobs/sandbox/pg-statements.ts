/**
 * Which statements a SQL job may send on the PostgreSQL engine
 * (pg-workspace.ts): the first keyword, read as PostgreSQL reads it, must be
 * in an allow-list. This is not what keeps a job inside its workspace (the
 * workspace's own database and its role's privileges do); it keeps the job
 * inside its own transaction and session, so its effect record commits with
 * it, and it keeps code the cell never sees out of the workspace: no
 * function, procedure or language is created, so nothing a job runs can
 * execute statements of its own (a plpgsql function could change its role's
 * password, or run at COMMIT as a deferred trigger, after the cell's last
 * check).
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
 * `CREATE [OR REPLACE] <what>` a job may not run: anything that holds code of its own (functions,
 * procedures, languages, extensions, transforms, event triggers). Triggers, rules, aggregates, operators
 * and casts stay: they can only name functions that exist, and a workspace has none of its own.
 */
const REFUSED_CREATE: ReadonlySet<string> = new Set([
  'FUNCTION',
  'PROCEDURE',
  'LANGUAGE',
  'TRUSTED',
  'PROCEDURAL',
  'EXTENSION',
  'TRANSFORM',
  'EVENT',
]);

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
  const words = leadingWords(sql, 4);
  const [kind, what] = words;
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
  if (kind === 'CREATE') {
    const object = what === 'OR' && words[2] === 'REPLACE' ? words[3] : what;
    if (object !== undefined && REFUSED_CREATE.has(object)) {
      return {
        refused: `CREATE ${object}`,
        message: `CREATE ${object} is not allowed: a job's workspace holds data and schema objects, no code of its own`,
      };
    }
  }
  return null;
}
