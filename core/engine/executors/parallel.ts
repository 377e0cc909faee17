/**
 * parallel: fan-out. Its input goes unchanged to every successor; the branches are
 * independent and run in the graph's deterministic order.
 */
import type { Executor } from '../internal/step.ts';

export const parallel: Executor = async (_ctx, _step, input) => ({ output: input });
