/**
 * gate: a decision boundary. Every rule (the gate's own and its governing
 * contract's) must evaluate to true over input and context; a false rule or an
 * evaluation error refuses (fail closed). Each decision, allow or refuse, is a
 * `decision` journal record naming the rule and the contract. Output: the input.
 */
import type { GateConfig, GateRule } from '../types.ts';
import { refuse } from '../internal/stop.ts';
import type { Executor } from '../internal/step.ts';

export const gate: Executor = async (ctx, step, input) => {
  const cfg = step.config as GateConfig;
  const contractId = cfg.contract_id ?? null;
  const rules: GateRule[] = [...cfg.rules];
  if (contractId !== null) rules.push(...(await ctx.contract(contractId)).rules);
  for (const rule of rules) {
    const t = ctx.test(rule.expr, { input });
    if (!t.ok || !t.value) {
      const reason = t.ok ? `rule ${rule.name} evaluated false` : `rule ${rule.name} failed (${t.code})`;
      const decision = { decision: 'refuse', contract: contractId, rule: rule.name, reason };
      await ctx.append('decision', step.id, input, null, decision);
      throw refuse('gate_declined', { step_id: step.id, contract: contractId, rule: rule.name });
    }
  }
  return {
    output: input,
    decision: true,
    data: { decision: 'allow', contract: contractId, rules: rules.map((r) => r.name), reason: 'all rules hold' },
  };
};
