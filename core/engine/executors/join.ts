/**
 * join: collects the outputs of its live predecessors: `{ [node id]: output }`
 * (mode object, default) or a list in predecessor order (mode list).
 */
import type { JoinConfig } from '../types.ts';
import type { Executor } from '../internal/step.ts';

export const join: Executor = async (_ctx, step, _input, inbound) => {
  const cfg = step.config as JoinConfig;
  if (cfg.mode === 'list') return { output: inbound.map((i) => i.output) };
  const out: Record<string, unknown> = {};
  for (const i of inbound) out[i.from] = i.output;
  return { output: out };
};
