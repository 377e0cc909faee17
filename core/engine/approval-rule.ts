/**
 * Whether a human decision counts (docs/security.md, "An approval is consent
 * to exactly what was approved"): the one rule every place that takes or
 * counts a decision runs: the cell's approval routes (cell/runs/approvals.ts),
 * the engine's human_approval and tool-call approvals, and whatever else
 * answers an approval later (an MCP elicitation, the edge), so they agree.
 *
 * - A decision is made by a *chain*: the principal it speaks for, then every
 *   actor of the `act` chain of the token it was made with (RFC 8693; the
 *   current actor first). A decision made through an exchanged token counts as
 *   the whole chain.
 * - It approves exactly one step input: its `input_hash` (the canonical
 *   SHA-256 the journal records for the step's input). A decision for another
 *   input never counts.
 * - Under `two_person`, no principal of the requester's chain (the requester
 *   and every actor of the token the run was requested with) counts, through
 *   any token.
 * - Named approvers: the decision's principal must be named.
 * - One person, one voice: decisions whose chains share a principal count once
 *   (the first); a quorum of k needs k decisions with disjoint chains.
 *
 * Pure, no I/O: the same answers on the cell, the edge and in the console.
 */
import type { Reason } from '../reasons.ts';

/** A decision as recorded. */
export interface DecisionFacts {
  /** The principal the decision speaks for (the subject of the deciding credential). */
  principal: string;
  /** The deciding chain: `principal`, then the actors of its token (current first). Absent: the principal alone. */
  chain?: readonly string[] | null | undefined;
  decision: 'approve' | 'reject';
  /** The digest of the step input the decision approved; absent (decisions from before digests): it approves nothing. */
  input_hash?: string | null | undefined;
}

/** The step a decision is for: its rule and the digest of its input now. */
export interface ApprovalStep {
  /** `two_person`, or `quorum` (anything else is read as quorum). */
  rule: string;
  /** Named approvers; empty: anyone with the permission. */
  approvers: readonly string[];
  /** Approvals needed under `quorum` (at least 1); `two_person` needs 2. */
  quorum: number;
  /** The digest of the step's input now (the journal's input hash for the step). */
  input_hash: string;
}

/** Who requested the run: the principal, and the actors of the token it requested it with (current first). */
export interface RunRequester {
  id: string;
  actors?: readonly string[] | undefined;
}

export type DecisionVerdict = { counts: true } | { counts: false; reason: Reason };

/** The deciding chain of a decision: its principal, then its actors, without repeats. */
export function chainOf(d: Pick<DecisionFacts, 'principal' | 'chain'>): string[] {
  return [...new Set([d.principal, ...(d.chain ?? [])])];
}

/** The requester's chain: the requester, then the actors of the token it requested the run with. */
export function requesterChain(r: RunRequester): string[] {
  return [...new Set([r.id, ...(r.actors ?? [])])];
}

/** Approvals a step needs. */
export function approvalsNeeded(step: Pick<ApprovalStep, 'rule' | 'quorum'>): number {
  return step.rule === 'two_person' ? 2 : Math.max(1, step.quorum);
}

/**
 * THE rule: whether one decision counts for a step of a run requested by `requester`.
 * Reasons: `approval_input_changed` (it approved another input), `requester_cannot_approve`
 * (two-person, and the deciding chain meets the requester's), `not_an_approver`.
 */
export function decisionCounts(d: DecisionFacts, step: ApprovalStep, requester: RunRequester): DecisionVerdict {
  if (d.input_hash !== step.input_hash) return { counts: false, reason: 'approval_input_changed' };
  if (step.rule === 'two_person') {
    const theirs = new Set(requesterChain(requester));
    if (chainOf(d).some((p) => theirs.has(p))) return { counts: false, reason: 'requester_cannot_approve' };
  }
  if (step.approvers.length > 0 && !step.approvers.includes(d.principal)) return { counts: false, reason: 'not_an_approver' };
  return { counts: true };
}

/** True when a new decision by `chain` would be a second voice of someone who already decided (a shared principal). */
export function alreadyDecided(chain: readonly string[], recorded: readonly Pick<DecisionFacts, 'principal' | 'chain'>[]): boolean {
  const decided = new Set(recorded.flatMap((d) => chainOf(d)));
  return chain.some((p) => decided.has(p));
}

/** What a step's decisions add up to. */
export interface ApprovalTally<D extends DecisionFacts = DecisionFacts> {
  /** The first counting rejection, if any: the step is refused. */
  rejected: D | null;
  /** The counting approvals, one per person (disjoint chains), oldest first. */
  approvals: D[];
  /** Approvals needed. */
  need: number;
  /** True when enough approvals count and none rejected. */
  approved: boolean;
}

/** Adds up a step's decisions (oldest first) under decisionCounts and one voice per person. */
export function tallyApproval<D extends DecisionFacts>(
  decisions: readonly D[],
  step: ApprovalStep,
  requester: RunRequester,
): ApprovalTally<D> {
  const need = approvalsNeeded(step);
  const voiced = new Set<string>();
  const approvals: D[] = [];
  let rejected: D | null = null;
  for (const d of decisions) {
    if (!decisionCounts(d, step, requester).counts) continue;
    const chain = chainOf(d);
    if (chain.some((p) => voiced.has(p))) continue;
    for (const p of chain) voiced.add(p);
    if (d.decision === 'reject') {
      rejected ??= d;
      continue;
    }
    approvals.push(d);
  }
  return { rejected, approvals, need, approved: rejected === null && approvals.length >= need };
}

/**
 * Whether an approval recorded for another run (a fork's or a rerun's copy of
 * its parent's record) may stand for this run: only when it approved the same
 * input (its record's input hash is this step's input digest), was given for
 * the same requester through the same chain, and the run does not replace the
 * input of a step the approval leads to (`replacedAfter`: what was approved
 * would no longer be what flows on). Otherwise the step asks again.
 */
export function approvalReusable(
  recorded: { input_hash: string | undefined; requester: RunRequester | null },
  now: { input_hash: string; requester: RunRequester; replacedAfter: boolean },
): boolean {
  if (now.replacedAfter || recorded.requester === null || recorded.input_hash !== now.input_hash) return false;
  const a = requesterChain(recorded.requester);
  const b = requesterChain(now.requester);
  return a.length === b.length && a.every((p, i) => p === b[i]);
}

/** The requester an approval record names (`requester`, `requester_actors` of its data), or null when it names none. */
export function recordedRequester(data: Readonly<Record<string, unknown>> | undefined): RunRequester | null {
  const id = data?.['requester'];
  const actors = data?.['requester_actors'] ?? [];
  if (typeof id !== 'string' || !Array.isArray(actors) || !actors.every((a) => typeof a === 'string')) return null;
  return { id, actors: actors as string[] };
}

/** True when `to` is reached from `from` along the graph's edges: an approval at `from` covers what flows to `to`. */
export function leadsTo(edges: readonly { from: string; to: string }[], from: string, to: string): boolean {
  const seen = new Set<string>([from]);
  const todo = [from];
  while (todo.length > 0) {
    const at = todo.pop()!;
    for (const e of edges) {
      if (e.from !== at || seen.has(e.to)) continue;
      if (e.to === to) return true;
      seen.add(e.to);
      todo.push(e.to);
    }
  }
  return false;
}
