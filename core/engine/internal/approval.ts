/**
 * How approvals are written into the journal (human_approval's decision
 * records, a tool call's step record under `ask`): each counted decision with
 * its deciding chain and comment, and the requester it was given for, so that
 * a fork or rerun can tell whether the approval stands for it
 * (core/engine/approval-rule.ts approvalReusable).
 */
import type { JsonObject } from '../../journal/record.ts';
import type { ApprovalDecision } from '../types.ts';
import type { RunContext } from './context.ts';

/** A counted decision as the journal keeps it: who, through which chain, what, when, and why. */
export function decisionRecord(d: ApprovalDecision): JsonObject {
  return {
    principal: d.principal,
    chain: d.chain ?? [d.principal],
    decision: d.decision,
    comment: d.comment ?? null,
    at: d.at,
  };
}

/** The requester an approval was given for: the principal and, when it requested through an exchanged token, its actors. */
export function requesterRecord(ctx: RunContext): JsonObject {
  const actors = ctx.requester.actors ?? [];
  return { requester: ctx.requester.id, ...(actors.length > 0 ? { requester_actors: [...actors] } : {}) };
}
