/**
 * consensus: reconciles the answers of its live predecessors. majority: strictly
 * more than half agree; unanimity: all agree. A tie, no majority or dissent is a
 * refusal (with a decision record), never a guess. Output: the agreed answer.
 */
import { canonicalJson } from '../../canonical.ts';
import type { Reason } from '../../reasons.ts';
import type { ConsensusConfig } from '../types.ts';
import { refuse } from '../internal/stop.ts';
import type { Executor } from '../internal/step.ts';

function key(v: unknown, compare: 'normalized' | 'exact'): string {
  if (typeof v === 'string') return compare === 'exact' ? v : v.trim().toLowerCase().replace(/\s+/g, ' ');
  return canonicalJson(v ?? null);
}

export const consensus: Executor = async (ctx, step, _input, inbound) => {
  const cfg = step.config as ConsensusConfig;
  const compare = cfg.compare ?? 'normalized';
  const groups = new Map<string, { count: number; first: unknown; from: string[] }>();
  for (const i of inbound) {
    const k = key(i.output, compare);
    const g = groups.get(k);
    if (g === undefined) groups.set(k, { count: 1, first: i.output, from: [i.from] });
    else {
      g.count++;
      g.from.push(i.from);
    }
  }
  const n = inbound.length;
  const ranked = [...groups.values()].sort((a, b) => b.count - a.count);
  const votes = ranked.map((g) => ({ count: g.count, from: g.from }));
  const top = ranked[0];
  let reason: Reason | null = null;
  if (top === undefined) reason = 'no_answers';
  else if (cfg.mode === 'unanimity') {
    if (ranked.length !== 1) reason = 'no_unanimity';
  } else if (!(top.count * 2 > n)) reason = ranked[1] !== undefined && ranked[1].count === top.count ? 'consensus_tie' : 'no_majority';
  if (reason !== null) {
    const decision = { decision: 'refuse', mode: cfg.mode, reason, votes };
    await ctx.append('decision', step.id, inbound, null, decision);
    throw refuse(reason, { step_id: step.id, mode: cfg.mode, answers: n });
  }
  return { output: top!.first, decision: true, data: { decision: 'agree', mode: cfg.mode, votes } };
};
