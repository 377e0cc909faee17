/**
 * The sandboxed expression language of conditional, gate, transform, map,
 * loop and governing-contract rules: CEL (cel.dev) through @bufbuild/cel.
 *
 * Expressions are parsed, checked and planned once (compileExpr) and then
 * evaluated many times (evalExpr). There is no way to call code other than
 * CEL's standard functions: no extensions, no message construction, only the
 * declared variables (all of type dyn). Limits, all checked at compile time
 * except the cost, which is bounded before evaluation from the size of the
 * bindings:
 * - source length <= EXPR_LIMITS.max_source_chars;
 * - AST depth <= max_depth and node count <= max_nodes;
 * - comprehension (macro) nesting <= max_comprehension_nesting;
 * - estimated cost = nodes x (1 + elements)^nesting <= max_cost, where
 *   elements counts every list/map entry and string/bytes length / 64 in the
 *   bindings plus the literal nodes (refused before evaluation: cost_exceeded).
 * JSON numbers bind as CEL doubles (CEL's JSON convention): write `x + 1.0`.
 */
import type { CelEnv } from '@bufbuild/cel';

export const EXPR_LIMITS = {
  max_source_chars: 4096,
  max_depth: 32,
  max_nodes: 1000,
  max_comprehension_nesting: 2,
  max_cost: 2_000_000,
} as const;

/** Error codes of compileExpr / evalExpr. */
export type ExprErrorCode =
  | 'too_long'
  | 'syntax'
  | 'too_deep'
  | 'too_many_nodes'
  | 'nesting'
  | 'undeclared'
  | 'unknown_function'
  | 'not_allowed'
  | 'cost_exceeded'
  | 'eval_error'
  | 'not_json'
  | 'not_bool';

export interface ExprError {
  code: ExprErrorCode;
  message: string;
}

/** A checked, planned expression; opaque to callers. */
export interface ExprProgram {
  readonly src: string;
  readonly variables: readonly string[];
  readonly nodes: number;
  readonly nesting: number;
  /** @internal */
  readonly run: (bindings: Record<string, unknown>) => unknown;
  /** @internal */
  readonly env: CelEnv;
}
