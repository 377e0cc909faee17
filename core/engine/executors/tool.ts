/**
 * tool: one governed tool call. Arguments: `args`, or `args_expr` (CEL over
 * input, context), or an object input. Output: the tool's result.
 */
import type { JsonObject } from '../../journal/record.ts';
import type { ToolConfig } from '../types.ts';
import { refuse } from '../internal/stop.ts';
import { governedToolCall } from '../internal/tool.ts';
import { asArgs, type Executor } from '../internal/step.ts';

export const tool: Executor = async (ctx, step, input) => {
  const cfg = step.config as ToolConfig;
  let args: JsonObject;
  if (cfg.args_expr !== undefined) {
    const v = ctx.value(cfg.args_expr, { input });
    if (typeof v !== 'object' || v === null || Array.isArray(v))
      throw refuse('expression_failed', { problem: 'args_expr must produce a map' });
    args = v as JsonObject;
  } else args = cfg.args ?? asArgs(input);
  const out = await governedToolCall(ctx, step.seat ?? null, `${step.id}/call`, cfg.tool, args, cfg);
  return { output: out, data: { tool: cfg.tool } };
};
