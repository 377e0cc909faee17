/**
 * transform: reshape data with a CEL expression over input and context.
 */
import type { TransformConfig } from '../types.ts';
import type { Executor } from '../internal/step.ts';

export const transform: Executor = async (ctx, step, input) => {
  const cfg = step.config as TransformConfig;
  return { output: ctx.value(cfg.expr, { input }) };
};
