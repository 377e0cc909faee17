/**
 * timer: a durable wait. The due time is recorded the first time the step is
 * reached; until the clock passes it the run is `waiting` (wake_at = due), and a
 * later drive (or a recovered run) continues. Output: the input.
 */
import type { TimerConfig } from '../types.ts';
import { Stop } from '../internal/stop.ts';
import type { Executor } from '../internal/step.ts';

export const timer: Executor = async (ctx, step, input) => {
  const cfg = step.config as TimerConfig;
  const due = (
    await ctx.memo(`${step.id}/due`, 'step', null, { delay_ms: cfg.delay_ms }, async () => ({
      output: ctx.ports.clock.now() + cfg.delay_ms,
    }))
  ).output as number;
  if (ctx.ports.clock.now() < due)
    throw new Stop('waiting', 'timer_pending', { step_id: step.id, due }, { step_id: step.id, for: 'timer', wake_at: due });
  return { output: input, data: { due } };
};
