/**
 * conditional: a CEL predicate over input and context routes the run: true takes
 * the edges marked `then` (or unmarked), false those marked `else`. A predicate
 * that errors or is not a bool refuses (never guesses). Output: the input.
 */
import type { ConditionalConfig } from '../types.ts';
import { refuse } from '../internal/stop.ts';
import type { Executor } from '../internal/step.ts';

export const conditional: Executor = async (ctx, step, input) => {
  const cfg = step.config as ConditionalConfig;
  const t = ctx.test(cfg.expr, { input });
  if (!t.ok) throw refuse('expression_failed', { step_id: step.id, code: t.code });
  return { output: input, route: t.value ? 'then' : 'else' };
};
