/**
 * human_approval: holds the run until approvals arrive through the approvals
 * port. quorum: k distinct people from `approvers` (anyone when empty);
 * two_person: two distinct people, none of the requester's chain. Which
 * decisions count is core/engine/approval-rule.ts (each decision approves one
 * input digest and counts as its whole deciding chain). A rejection that
 * counts, or the timeout (from when the step was first reached, a recorded
 * time), fails closed as a refusal. Output: the input. The decision record
 * names the requester, every counted decision's chain and comment, so a fork
 * or rerun can tell whether the approval stands for it (approvalReusable).
 */
import { contentHash } from '../../canonical.ts';
import { tallyApproval, type ApprovalStep } from '../approval-rule.ts';
import type { HumanApprovalConfig } from '../types.ts';
import { decisionRecord, requesterRecord } from '../internal/approval.ts';
import { refuse, Stop } from '../internal/stop.ts';
import type { Executor } from '../internal/step.ts';

export const humanApproval: Executor = async (ctx, step, input) => {
  const cfg = step.config as HumanApprovalConfig;
  const approvals = ctx.ports.approvals;
  if (approvals === undefined) throw refuse('approval_unavailable', { step_id: step.id });
  const since = (await ctx.memo(`${step.id}/since`, 'step', null, null, async () => ({ output: ctx.ports.clock.now() }))).output as number;
  const due = since + cfg.timeout_ms;
  const named = cfg.approvers ?? [];
  const rule: ApprovalStep = {
    rule: cfg.rule,
    approvers: named,
    quorum: cfg.quorum ?? 1,
    input_hash: contentHash(input ?? null),
  };
  const t = tallyApproval(await approvals.decisions(step.id), rule, ctx.requester);
  if (t.rejected !== null) {
    const by = t.rejected;
    const decision = { decision: 'reject', rule: cfg.rule, by: by.principal, ...decisionRecord(by), ...requesterRecord(ctx) };
    await ctx.append('decision', step.id, input, null, decision);
    throw refuse('approval_rejected', {
      step_id: step.id,
      by: by.principal,
      chain: by.chain ?? [by.principal],
      comment: by.comment ?? null,
    });
  }
  const approvedBy = t.approvals.map((d) => d.principal);
  if (t.approved)
    return {
      output: input,
      decision: true,
      data: {
        decision: 'approve',
        rule: cfg.rule,
        approved_by: approvedBy,
        quorum: t.need,
        decisions: t.approvals.map(decisionRecord),
        ...requesterRecord(ctx),
      },
    };
  if (ctx.ports.clock.now() >= due) {
    const decision = { decision: 'timeout', rule: cfg.rule, approved_by: approvedBy, quorum: t.need, ...requesterRecord(ctx) };
    await ctx.append('decision', step.id, input, null, decision);
    throw refuse('approval_timeout', { step_id: step.id, approved: approvedBy.length, quorum: t.need });
  }
  await approvals.request?.(step.id, {
    kind: 'human_approval',
    rule: cfg.rule,
    approvers: named,
    quorum: t.need,
    prompt: cfg.prompt ?? null,
    due,
    input_hash: rule.input_hash,
  });
  throw new Stop(
    'waiting',
    'approval_pending',
    { step_id: step.id, approved: approvedBy.length, quorum: t.need },
    { step_id: step.id, for: 'approval', wake_at: due },
  );
};
