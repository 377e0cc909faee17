/**
 * loop: bounded iteration. Each iteration runs the body as memoized step
 * `<node>#<k>` on the previous iteration's output; it stops when `until` (CEL
 * over input, output, iteration) holds. After max_iterations without it: refuse
 * (loop_limit_exceeded, default) or complete with the last output (on_limit
 * complete). Output: the last iteration's output.
 */
import type { LoopConfig } from '../types.ts';
import { VARS } from '../internal/context.ts';
import { refuse } from '../internal/stop.ts';
import { leafExecutor, leafStep } from '../internal/leaf.ts';
import { executeStep, type Executor } from '../internal/step.ts';

export const loop: Executor = async (ctx, step, input) => {
  const cfg = step.config as LoopConfig;
  const exec = leafExecutor(cfg.body.kind);
  let current = input;
  for (let k = 0; k < cfg.max_iterations; k++) {
    const r = await executeStep(ctx, leafStep(cfg.body, `${step.id}#${k}`), exec, current, [{ from: step.id, output: current }]);
    const t = ctx.test(cfg.until, { input: current, output: r.output, iteration: k }, VARS.loop);
    if (!t.ok) throw refuse('expression_failed', { step_id: step.id, code: t.code });
    if (t.value) return { output: r.output, data: { iterations: k + 1, exhausted: false } };
    current = r.output;
  }
  if (cfg.on_limit === 'complete') return { output: current, data: { iterations: cfg.max_iterations, exhausted: true } };
  throw refuse('loop_limit_exceeded', { step_id: step.id, max_iterations: cfg.max_iterations });
};
