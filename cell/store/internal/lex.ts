/**
 * SQL text split into code and the parts a rewrite or a check must not
 * touch: single-quoted strings, double-quoted identifiers, `--` and
 * block comments.
 */

/** A piece of SQL text: code (to rewrite) or a literal, quoted identifier or comment (left alone). */
export interface Piece {
  code: boolean;
  text: string;
}

/** Splits SQL into code and non-code pieces (single-quoted strings, "identifiers", -- and /* comments). */
export function lex(sql: string): Piece[] {
  const out: Piece[] = [];
  let start = 0;
  let i = 0;
  const push = (code: boolean, end: number) => {
    if (end > start) out.push({ code, text: sql.slice(start, end) });
    start = end;
  };
  while (i < sql.length) {
    const c = sql[i]!;
    if (c === "'" || c === '"') {
      push(true, i);
      let j = i + 1;
      for (;;) {
        if (j >= sql.length) break;
        if (sql[j] === c) {
          if (sql[j + 1] === c) {
            j += 2;
            continue;
          } // '' or "" escape
          j++;
          break;
        }
        j++;
      }
      i = j;
      push(false, i);
    } else if (c === '-' && sql[i + 1] === '-') {
      push(true, i);
      const nl = sql.indexOf('\n', i);
      i = nl === -1 ? sql.length : nl;
      push(false, i);
    } else if (c === '/' && sql[i + 1] === '*') {
      push(true, i);
      const end = sql.indexOf('*/', i + 2);
      i = end === -1 ? sql.length : end + 2;
      push(false, i);
    } else {
      i++;
    }
  }
  push(true, sql.length);
  return out;
}
