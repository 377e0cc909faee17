/**
 * compileExpr: parse, check and plan a CEL expression once (see program.ts for the limits).
 */
import { celEnv, CelScalar, parse, plan } from '@bufbuild/cel';
import type { Expr } from '@bufbuild/cel-spec/cel/expr/syntax_pb.js';
import { EXPR_LIMITS, type ExprError, type ExprProgram } from './program.ts';

// Functions the planner implements itself (not in the function resolver).
const PLANNER_FUNCTIONS = new Set([
  '_&&_',
  '_||_',
  '_?_:_',
  '@not_strictly_false',
  '@in',
  '_[_]',
  '_[?_]',
  'or',
  'orValue',
  'optional.of',
  'optional.none',
  'optional.ofNonZeroValue',
  'hasValue',
  'value',
]);

const envCache = new Map<string, ReturnType<typeof celEnv>>();
function envFor(variables: readonly string[]) {
  const key = [...variables].sort().join(',');
  let env = envCache.get(key);
  if (env === undefined) {
    const decl: Record<string, typeof CelScalar.DYN> = {};
    for (const v of variables) decl[v] = CelScalar.DYN;
    env = celEnv({ variables: decl });
    if (envCache.size > 256) envCache.clear();
    envCache.set(key, env);
  }
  return env;
}

interface Walk {
  nodes: number;
  maxNesting: number;
  error: ExprError | null;
}

function walk(
  e: Expr | undefined,
  depth: number,
  nesting: number,
  scope: readonly string[],
  env: ReturnType<typeof celEnv>,
  w: Walk,
): void {
  if (w.error !== null || e === undefined) return;
  w.nodes++;
  if (w.nodes > EXPR_LIMITS.max_nodes) {
    w.error = { code: 'too_many_nodes', message: `more than ${EXPR_LIMITS.max_nodes} nodes` };
    return;
  }
  if (depth > EXPR_LIMITS.max_depth) {
    w.error = { code: 'too_deep', message: `nesting deeper than ${EXPR_LIMITS.max_depth}` };
    return;
  }
  const k = e.exprKind;
  switch (k.case) {
    case 'constExpr':
      return;
    case 'identExpr':
      if (!scope.includes(k.value.name)) w.error = { code: 'undeclared', message: `undeclared variable ${k.value.name}` };
      return;
    case 'selectExpr':
      walk(k.value.operand, depth + 1, nesting, scope, env, w);
      return;
    case 'callExpr': {
      const fn = k.value.function;
      if (!PLANNER_FUNCTIONS.has(fn) && env.funcs.find(fn) === undefined) {
        w.error = { code: 'unknown_function', message: `unknown function ${fn}` };
        return;
      }
      walk(k.value.target, depth + 1, nesting, scope, env, w);
      for (const a of k.value.args) walk(a, depth + 1, nesting, scope, env, w);
      return;
    }
    case 'listExpr':
      for (const el of k.value.elements) walk(el, depth + 1, nesting, scope, env, w);
      return;
    case 'structExpr':
      if (k.value.messageName !== '') {
        w.error = { code: 'not_allowed', message: 'message construction is not allowed' };
        return;
      }
      for (const en of k.value.entries) {
        if (en.keyKind.case === 'mapKey') walk(en.keyKind.value, depth + 1, nesting, scope, env, w);
        walk(en.value, depth + 1, nesting, scope, env, w);
      }
      return;
    case 'comprehensionExpr': {
      const c = k.value;
      const n = nesting + 1;
      if (n > EXPR_LIMITS.max_comprehension_nesting) {
        w.error = { code: 'nesting', message: `macros nested deeper than ${EXPR_LIMITS.max_comprehension_nesting}` };
        return;
      }
      w.maxNesting = Math.max(w.maxNesting, n);
      walk(c.iterRange, depth + 1, nesting, scope, env, w);
      walk(c.accuInit, depth + 1, nesting, scope, env, w);
      const inner = [...scope, c.iterVar, c.accuVar, ...(c.iterVar2 ? [c.iterVar2] : [])];
      walk(c.loopCondition, depth + 1, n, inner, env, w);
      walk(c.loopStep, depth + 1, n, inner, env, w);
      walk(c.result, depth + 1, n, [...scope, c.accuVar], env, w);
      return;
    }
    default:
      w.error = { code: 'syntax', message: 'empty expression' };
  }
}

/**
 * Parses, checks (declared variables, known functions, limits) and plans `src`.
 * Never throws on hostile input.
 * @example compileExpr('input.score > 0.5', { variables: ['input', 'context'] })
 */
export function compileExpr(
  src: string,
  opts: { variables: readonly string[] },
): { ok: true; program: ExprProgram } | { ok: false; error: ExprError } {
  if (typeof src !== 'string' || src.length === 0) return { ok: false, error: { code: 'syntax', message: 'empty expression' } };
  if (src.length > EXPR_LIMITS.max_source_chars)
    return { ok: false, error: { code: 'too_long', message: `longer than ${EXPR_LIMITS.max_source_chars} characters` } };
  const env = envFor(opts.variables);
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(src);
  } catch (e) {
    const msg = e instanceof Error ? e.message.split('\n')[0]!.slice(0, 200) : 'parse error';
    return { ok: false, error: { code: 'syntax', message: msg } };
  }
  const w: Walk = { nodes: 0, maxNesting: 0, error: null };
  try {
    walk(parsed.expr, 0, 0, opts.variables, env, w);
  } catch {
    return { ok: false, error: { code: 'too_deep', message: 'expression too deeply nested' } };
  }
  if (w.error !== null) return { ok: false, error: w.error };
  let run: (b: Record<string, unknown>) => unknown;
  try {
    const planned = plan(env, parsed) as (b: Record<string, unknown>) => unknown;
    run = planned;
  } catch (e) {
    const msg = e instanceof Error ? e.message.slice(0, 200) : 'plan error';
    return { ok: false, error: { code: 'syntax', message: msg } };
  }
  return { ok: true, program: { src, variables: [...opts.variables], nodes: w.nodes, nesting: w.maxNesting, run, env } };
}
