/**
 * evalExpr: evaluate a compiled expression over JSON bindings, with the cost bound,
 * returning JSON. evalBool: the same, requiring a bool (conditions, gates, rules).
 */
import { isCelError, isCelList, isCelMap, isCelUint } from '@bufbuild/cel';
import { b64url } from '../canonical.ts';
import { EXPR_LIMITS, type ExprError, type ExprProgram } from './program.ts';

export type ExprResult<T = unknown> = { ok: true; value: T } | { ok: false; error: ExprError };

/** Size of a JSON value for the cost bound: entries of lists and maps, long strings by 64-char chunks. */
function elements(v: unknown, budget: number): number {
  let n = 0;
  const stack: unknown[] = [v];
  while (stack.length > 0 && n <= budget) {
    const x = stack.pop();
    if (typeof x === 'string') n += Math.floor(x.length / 64);
    else if (Array.isArray(x)) {
      n += x.length;
      for (const y of x) stack.push(y);
    } else if (x instanceof Uint8Array) n += Math.floor(x.length / 64);
    else if (typeof x === 'object' && x !== null) {
      const vals = Object.values(x);
      n += vals.length;
      for (const y of vals) stack.push(y);
    }
  }
  return n;
}

/** Raw evaluation (CEL values), after the cost bound. Used by evalExpr and the conformance tests. */
export function evalRaw(program: ExprProgram, bindings: Record<string, unknown>): ExprResult {
  for (const v of program.variables)
    if (!(v in bindings)) return { ok: false, error: { code: 'eval_error', message: `no value bound for ${v}` } };
  if (program.nesting > 0) {
    const e = elements(Object.values(bindings), EXPR_LIMITS.max_cost) + program.nodes;
    const cost = program.nodes * (1 + e) ** program.nesting;
    if (cost > EXPR_LIMITS.max_cost)
      return { ok: false, error: { code: 'cost_exceeded', message: `estimated cost ${Math.round(cost)} exceeds ${EXPR_LIMITS.max_cost}` } };
  }
  let out: unknown;
  try {
    out = program.run(bindings);
  } catch {
    return { ok: false, error: { code: 'eval_error', message: 'evaluation failed' } };
  }
  if (isCelError(out)) return { ok: false, error: { code: 'eval_error', message: out.message.slice(0, 200) } };
  return { ok: true, value: out };
}

function toJson(v: unknown, depth: number): unknown {
  if (depth > 64) throw new TypeError('too deep');
  if (v === null || typeof v === 'boolean' || typeof v === 'string') return v;
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new TypeError('non-finite number');
    return v;
  }
  if (typeof v === 'bigint') {
    if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < BigInt(Number.MIN_SAFE_INTEGER)) throw new TypeError('integer out of JSON range');
    return Number(v);
  }
  if (isCelUint(v)) return toJson(v.value, depth);
  if (v instanceof Uint8Array) return b64url(v);
  if (isCelList(v)) {
    const out: unknown[] = [];
    for (const x of v) out.push(toJson(x, depth + 1));
    return out;
  }
  if (isCelMap(v)) {
    const out: Record<string, unknown> = {};
    for (const [k, x] of v) out[typeof k === 'object' ? String(k.value) : String(k)] = toJson(x, depth + 1);
    return out;
  }
  if (Array.isArray(v)) return v.map((x) => toJson(x, depth + 1));
  if (typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v as object)) out[k] = toJson(x, depth + 1);
    return out;
  }
  throw new TypeError('not representable as JSON');
}

/**
 * Evaluates over JSON bindings (every declared variable must be bound) and returns the value as JSON.
 * Never throws: errors, cost overruns and non-JSON results are `{ ok: false }`.
 */
export function evalExpr(program: ExprProgram, bindings: Record<string, unknown>): ExprResult {
  const r = evalRaw(program, bindings);
  if (!r.ok) return r;
  try {
    return { ok: true, value: toJson(r.value, 0) };
  } catch {
    return { ok: false, error: { code: 'not_json', message: 'result is not representable as JSON' } };
  }
}

/** Evaluates a condition: the result must be a bool. */
export function evalBool(program: ExprProgram, bindings: Record<string, unknown>): ExprResult<boolean> {
  const r = evalRaw(program, bindings);
  if (!r.ok) return r;
  if (typeof r.value !== 'boolean') return { ok: false, error: { code: 'not_bool', message: 'expression did not evaluate to a bool' } };
  return { ok: true, value: r.value };
}
