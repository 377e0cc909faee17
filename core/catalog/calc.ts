/**
 * The `calc` tool's evaluator: arithmetic over numbers with + - * / % ^,
 * unary minus and parentheses, by a small recursive-descent parser. Never
 * `eval`; input length and nesting depth are capped, and a result that is not
 * a finite number is refused.
 */
import { invalid } from '../errors.ts';

const MAX_LEN = 256;
const MAX_DEPTH = 32;

/** Evaluates an arithmetic expression; throws invalid_request on anything else. */
export function evaluateArithmetic(expr: string): number {
  if (typeof expr !== 'string' || expr.length === 0 || expr.length > MAX_LEN) {
    throw invalid(`expression must be 1 to ${MAX_LEN} characters`, { reason: 'calc_invalid' });
  }
  let i = 0;
  let depth = 0;
  const src = expr;
  const err = (what: string) => invalid(`calc: ${what} at position ${i}`, { reason: 'calc_invalid', position: i });
  const ws = () => {
    while (i < src.length && /\s/.test(src[i]!)) i++;
  };
  const peek = () => {
    ws();
    return src[i];
  };

  function primary(): number {
    const ch = peek();
    if (ch === '(') {
      if (++depth > MAX_DEPTH) throw err('nesting too deep');
      i++;
      const v = sum();
      if (peek() !== ')') throw err("expected ')'");
      i++;
      depth--;
      return v;
    }
    if (ch === '-' || ch === '+') {
      if (++depth > MAX_DEPTH) throw err('nesting too deep');
      i++;
      const v = power();
      depth--;
      return ch === '-' ? -v : v;
    }
    const m = /^(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?/.exec(src.slice(i));
    if (!m) throw err('expected a number');
    i += m[0].length;
    return Number(m[0]);
  }
  function power(): number {
    const base = primary();
    if (peek() === '^') {
      i++;
      if (++depth > MAX_DEPTH) throw err('nesting too deep');
      const e = power();
      depth--;
      return base ** e;
    }
    return base;
  }
  function product(): number {
    let v = power();
    for (;;) {
      const op = peek();
      if (op !== '*' && op !== '/' && op !== '%') return v;
      i++;
      const r = power();
      if ((op === '/' || op === '%') && r === 0) throw err('division by zero');
      v = op === '*' ? v * r : op === '/' ? v / r : v % r;
    }
  }
  function sum(): number {
    let v = product();
    for (;;) {
      const op = peek();
      if (op !== '+' && op !== '-') return v;
      i++;
      const r = product();
      v = op === '+' ? v + r : v - r;
    }
  }
  const v = sum();
  ws();
  if (i !== src.length) throw err('unexpected character');
  if (!Number.isFinite(v)) throw invalid('calc: result is not a finite number', { reason: 'calc_invalid' });
  return v;
}
