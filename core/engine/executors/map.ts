/**
 * map: bounded fan-out over a list (CEL `over`). Each item runs the body as its
 * own memoized step `<node>[<i>]`, in order. A list longer than max_items is
 * refused, never truncated. Output: the list of results.
 */
import type { MapConfig } from '../types.ts';
import { refuse } from '../internal/stop.ts';
import { leafExecutor, leafStep } from '../internal/leaf.ts';
import { executeStep, type Executor } from '../internal/step.ts';

export const map: Executor = async (ctx, step, input) => {
  const cfg = step.config as MapConfig;
  const items = ctx.value(cfg.over, { input });
  if (!Array.isArray(items)) throw refuse('expression_failed', { step_id: step.id, problem: 'over must produce a list' });
  if (items.length > cfg.max_items) throw refuse('map_too_large', { step_id: step.id, items: items.length, max_items: cfg.max_items });
  const exec = leafExecutor(cfg.body.kind);
  const out: unknown[] = [];
  for (let i = 0; i < items.length; i++) {
    const r = await executeStep(ctx, leafStep(cfg.body, `${step.id}[${i}]`), exec, items[i], [{ from: step.id, output: items[i] }]);
    out.push(r.output);
  }
  return { output: out, data: { items: items.length } };
};
