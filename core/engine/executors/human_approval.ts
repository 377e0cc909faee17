/**
 * human_approval: holds the run until approvals arrive through the approvals
 * port. quorum: k distinct principals from `approvers` (anyone when empty);
 * two_person: two distinct principals, neither the run's requester. A rejection
 * by an eligible principal, or the timeout (from when the step was first
 * reached, a recorded time), fails closed as a refusal. Output: the input.
 */
import type { HumanApprovalConfig } from '../types.ts';
import { refuse, Stop } from '../internal/stop.ts';
import type { Executor } from '../internal/step.ts';

export const humanApproval: Executor = async (ctx, step, input) => {
  const cfg = step.config as HumanApprovalConfig;
  const approvals = ctx.ports.approvals;
  if (approvals === undefined) throw refuse('approval_unavailable', { step_id: step.id });
  const since = (await ctx.memo(`${step.id}/since`, 'step', null, null, async () => ({ output: ctx.ports.clock.now() }))).output as number;
  const due = since + cfg.timeout_ms;
  const named = cfg.approvers ?? [];
  const twoPerson = cfg.rule === 'two_person';
  const need = twoPerson ? 2 : Math.max(1, cfg.quorum ?? 1);
  const eligible = (p: string) =>
    twoPerson ? p !== ctx.opts.requester && (named.length === 0 || named.includes(p)) : named.length === 0 || named.includes(p);
  const ds = (await approvals.decisions(step.id)).filter((d) => eligible(d.principal));
  const rejectedBy = ds.find((d) => d.decision === 'reject');
  if (rejectedBy !== undefined) {
    const decision = { decision: 'reject', rule: cfg.rule, by: rejectedBy.principal };
    await ctx.append('decision', step.id, input, null, decision);
    throw refuse('approval_rejected', { step_id: step.id, by: rejectedBy.principal });
  }
  const approvers = [...new Set(ds.filter((d) => d.decision === 'approve').map((d) => d.principal))].sort();
  if (approvers.length >= need)
    return { output: input, decision: true, data: { decision: 'approve', rule: cfg.rule, approved_by: approvers, quorum: need } };
  if (ctx.ports.clock.now() >= due) {
    const decision = { decision: 'timeout', rule: cfg.rule, approved_by: approvers, quorum: need };
    await ctx.append('decision', step.id, input, null, decision);
    throw refuse('approval_timeout', { step_id: step.id, approved: approvers.length, quorum: need });
  }
  await approvals.request?.(step.id, {
    kind: 'human_approval',
    rule: cfg.rule,
    approvers: named,
    quorum: need,
    prompt: cfg.prompt ?? null,
    due,
  });
  throw new Stop(
    'waiting',
    'approval_pending',
    { step_id: step.id, approved: approvers.length, quorum: need },
    { step_id: step.id, for: 'approval', wake_at: due },
  );
};
