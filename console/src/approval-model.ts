/**
 * The rules of a step waiting for human approval, as the cell applies them
 * (core/engine/approval-rule.ts, the one rule the engine and the approval
 * routes run), so the console shows who approved, who is still needed, and
 * whether the signed-in principal may decide. Pure; tested in
 * test/console/approval-model.test.ts. The cell decides in the end.
 */
import { contentHash } from '../../core/canonical.ts';
import { chainOf, decisionCounts, tallyApproval } from '../../core/engine/approval-rule.ts';

export interface Decision {
  principal: string;
  /** The principal, then the actors of the token it decided with (older cells do not send it). */
  chain?: string[];
  decision: string;
  /** The decider's comment, if any (older cells do not send it). */
  comment?: string | null;
  /** The digest of the input it approved (older cells do not send it). */
  input_hash?: string | null;
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
  /** The digest of the step input a decision approves (older cells do not send it). */
  input_hash?: string | null;
  decisions: Decision[];
}
export interface ApprovalRun {
  run_id: string;
  kind: string;
  crew_id: string | null;
  requester: string;
  /** A crew run's input (crew run views), or a job run's spec (an agent job's input is `spec.input`). */
  input?: unknown;
  spec?: unknown;
  /** `flags.requester_actors`: the actors of the token the run was requested with. */
  flags?: Record<string, unknown>;
}

/** The actors of the token a run was requested with (its `flags.requester_actors`). */
export function requesterActors(run: ApprovalRun): string[] {
  const a = run.flags?.['requester_actors'];
  return Array.isArray(a) ? a.filter((x): x is string => typeof x === 'string') : [];
}

export interface ApprovalStatus {
  need: number;
  approvedBy: string[];
  rejectedBy: string[];
  stillNeeded: number;
  /** Named approvers who have not decided yet (null: anyone eligible may approve). */
  waitingOn: string[] | null;
}

/**
 * The quorum arithmetic of a pending step, as the engine counts it: core's one rule
 * (core/engine/approval-rule.ts). A decision from a cell that sends no digest is taken as one on the
 * step's input; `actors`: those of the token the run was requested with (`flags.requester_actors`).
 */
export function approvalStatus(a: PendingApproval, requester: string, actors: readonly string[] = []): ApprovalStatus {
  const step = { rule: a.rule, approvers: a.approvers, quorum: a.quorum, input_hash: a.input_hash ?? '' };
  const who = { id: requester, actors };
  const facts = a.decisions.map((d) => ({
    principal: d.principal,
    chain: d.chain,
    decision: d.decision === 'reject' ? ('reject' as const) : ('approve' as const),
    input_hash: d.input_hash ?? step.input_hash,
  }));
  const t = tallyApproval(facts, step, who);
  const decided = new Set(facts.flatMap((d) => chainOf(d)));
  const eligible = (p: string) => decisionCounts({ principal: p, decision: 'approve', input_hash: step.input_hash }, step, who).counts;
  return {
    need: t.need,
    approvedBy: t.approvals.map((d) => d.principal),
    rejectedBy: t.rejected ? [t.rejected.principal] : [],
    stillNeeded: Math.max(0, t.need - t.approvals.length),
    waitingOn: a.approvers.length > 0 ? a.approvers.filter((p) => !decided.has(p) && eligible(p)) : null,
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
  if (a.decisions.some((d) => d.principal === me || (d.chain ?? []).includes(me))) return 'You have decided this step.';
  if (a.approvers.length > 0 && !a.approvers.includes(me)) return 'You are not a named approver of this step.';
  if (a.rule === 'two_person' && me === run.requester) return 'You requested this run: the two-person rule needs two other people.';
  if (a.rule === 'two_person' && requesterActors(run).includes(me))
    return 'You acted in the request of this run: the two-person rule needs two people outside its chain.';
  return null;
}

/**
 * The model call that asked for a tool call waiting under `ask` (the agent executor's step ids:
 * `<node>/tool/<round>.<i>` is call `i` of the answer of `<node>/model/<round>`), or null.
 */
export function toolCallOrigin(stepId: string): { modelStep: string; index: number } | null {
  const m = /^(.*)\/tool\/(\d+)\.(\d+)$/.exec(stepId);
  return m ? { modelStep: `${m[1]}/model/${m[2]}`, index: Number(m[3]) } : null;
}

/**
 * The tool call a `tool_call` approval approves, from the model's answer that asked for it: its tool and
 * exact arguments, and whether they are what the approval's digest commits to (`contentHash({ tool, args })`,
 * core/engine/internal/tool.ts), so the card never shows another call than the one a decision approves.
 */
export function approvedToolCall(
  answer: unknown,
  index: number,
  inputHash: string | null | undefined,
): { tool: string; args: unknown; matches: boolean } | null {
  const calls = (answer as { tool_calls?: unknown } | null)?.tool_calls;
  if (!Array.isArray(calls)) return null;
  const c = calls[index] as { name?: unknown; arguments?: unknown } | undefined;
  if (typeof c?.name !== 'string') return null;
  let matches = false;
  try {
    matches = typeof inputHash === 'string' && contentHash({ tool: c.name, args: c.arguments ?? {} }) === inputHash;
  } catch {
    matches = false;
  }
  return { tool: c.name, args: c.arguments ?? {}, matches };
}
