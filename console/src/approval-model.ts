/**
 * The rules of a step waiting for human approval, as the cell applies them
 * (core/engine/executors/human_approval.ts counts, cell/teams/crew-runs/runs.ts
 * recordApproval refuses), so the console shows who approved, who is still
 * needed, and whether the signed-in principal may decide. Pure; tested in
 * test/console/approval-model.test.ts. The cell decides in the end.
 */

export interface Decision {
  principal: string;
  /** The principal, then the actors of the token it decided with (older cells do not send it). */
  chain?: string[];
  decision: string;
  /** The decider's comment, if any (older cells do not send it). */
  comment?: string | null;
  at: string;
}
export interface PendingApproval {
  step_id: string;
  kind: string;
  rule: string;
  approvers: string[];
  quorum: number;
  prompt: string | null;
  due: string | null;
  requested_at: string;
  decisions: Decision[];
}
export interface ApprovalRun {
  run_id: string;
  kind: string;
  crew_id: string | null;
  requester: string;
}

export interface ApprovalStatus {
  need: number;
  approvedBy: string[];
  rejectedBy: string[];
  stillNeeded: number;
  /** Named approvers who have not decided yet (null: anyone eligible may approve). */
  waitingOn: string[] | null;
}

/** The quorum arithmetic of a pending step, as the engine counts it. */
export function approvalStatus(a: PendingApproval, requester: string): ApprovalStatus {
  const twoPerson = a.rule === 'two_person';
  const need = twoPerson ? 2 : Math.max(1, a.quorum);
  const named = a.approvers;
  const eligible = (p: string) => (named.length === 0 || named.includes(p)) && (!twoPerson || p !== requester);
  const decided = new Set(a.decisions.map((d) => d.principal));
  const approvedBy = [...new Set(a.decisions.filter((d) => d.decision === 'approve' && eligible(d.principal)).map((d) => d.principal))];
  const rejectedBy = [...new Set(a.decisions.filter((d) => d.decision === 'reject' && eligible(d.principal)).map((d) => d.principal))];
  return {
    need,
    approvedBy,
    rejectedBy,
    stillNeeded: Math.max(0, need - approvedBy.length),
    waitingOn: named.length > 0 ? named.filter((p) => !decided.has(p) && eligible(p)) : null,
  };
}

/** Why the session may not decide this step, or null when it may (or the console cannot tell). */
export function whyNot(
  a: PendingApproval,
  run: ApprovalRun,
  me: string | null,
  mayApprove: boolean,
  permissionsKnown: boolean,
): string | null {
  if (permissionsKnown && !mayApprove) return 'Your credential lacks the permission agent_teams.approve.';
  if (me === null) return null;
  if (a.decisions.some((d) => d.principal === me)) return 'You have decided this step.';
  if (a.approvers.length > 0 && !a.approvers.includes(me)) return 'You are not a named approver of this step.';
  if (a.rule === 'two_person' && me === run.requester) return 'You requested this run: the two-person rule needs two other people.';
  return null;
}
