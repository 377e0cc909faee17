/**
 * Approvals of waiting runs, shared by every run that waits on the engine's
 * approvals port (crew runs, agent job runs): what the engine asked for
 * (approval requests), the decisions recorded so far, and the rules a new
 * decision must pass (recordApproval). The caller (crew route, jobs route)
 * checks the run is of its kind and wakes it when told to.
 */
import { ServiceError, notFound } from '../../core/errors.ts';
import type { ApprovalDecision, ApprovalsPort } from '../../core/engine/types.ts';
import { isoTime, isoTimeOrNull } from '../../core/iso-time.ts';
import type { Reason } from '../../core/reasons.ts';
import type { PendingApprovalView } from './api.ts';
import type { RunsContext } from './context.ts';
import { RunClosedError, appendJournal } from './journal.ts';
import * as repo from './repository.ts';
import { requestWake } from './control.ts';
import { getRun, isTerminal, requesterOf, type Run } from './runs.ts';
import { alreadyDecided, chainOf, decisionCounts, tallyApproval } from '../../core/engine/approval-rule.ts';

/** An approval the engine waits on, for a step that has not completed yet. */
export interface PendingApproval {
  step_id: string;
  kind: string;
  rule: string;
  approvers: string[];
  quorum: number;
  prompt: string | null;
  due: number | null;
  /** The digest of the step input a decision approves (null: a request from before digests). */
  input_hash: string | null;
  requested_at: number;
}

/** The engine's approvals port of one run: decisions read back, requests recorded (idempotent). */
export function approvalsPort(ctx: RunsContext, runId: string): ApprovalsPort {
  const { store, clock } = ctx.core;
  return {
    async decisions(stepId): Promise<ApprovalDecision[]> {
      const ds = (await repo.decisions(store, runId, stepId)).map((d) => ({
        principal: d.principal,
        chain: d.chain,
        decision: d.decision,
        input_hash: d.input_hash,
        comment: d.comment,
        at: d.at,
      }));
      if (ctx.core.traces.spans && ds.length > 0) await approvalSpan(ctx, runId, stepId, ds);
      return ds;
    },
    async request(stepId, ask) {
      // Written once per step, and again only for a request from before digests (it gains the step's digest).
      if ((await repo.approvalRequestDigest(store, runId, stepId)) === ask.input_hash) return;
      const at = clock.now();
      await store.write((tx) => repo.insertApprovalRequest(tx, runId, stepId, { ...ask }, at));
    },
  };
}

/**
 * The span of an approval the run waited on, recorded once the decisions
 * settle it (a rejection, or as many approvals as its quorum): from the
 * request to the deciding decision, in the drive that reads it. Who decided
 * is counted, not named.
 */
async function approvalSpan(ctx: RunsContext, runId: string, stepId: string, ds: ApprovalDecision[]): Promise<void> {
  const ask = (await repo.approvalRequests(ctx.core.store, runId)).find((r) => r.step_id === stepId);
  const run = await getRun(ctx, runId);
  if (!ask || !run) return;
  const t = tallyApproval(ds, { ...ask, input_hash: ask.input_hash ?? '' }, requesterOf(run));
  const approvals = t.approvals.length;
  const rejected = t.rejected !== null;
  if (!rejected && !t.approved) return;
  ctx.core.traces.record(`approval ${stepId}`, {
    startTime: ask.at,
    endTime: Math.max(...ds.map((d) => d.at)),
    attributes: {
      'agent_cell.step.id': stepId,
      'agent_cell.approval.kind': ask.kind,
      'agent_cell.approval.rule': ask.rule,
      'agent_cell.approval.decision': rejected ? 'reject' : 'approve',
      'agent_cell.approval.approvals': approvals,
    },
  });
}

/** Approval requests of a run whose step has not completed yet (no step or decision record). */
export async function pendingApprovals(ctx: RunsContext, runId: string): Promise<PendingApproval[]> {
  const requests = await repo.approvalRequests(ctx.core.store, runId);
  if (requests.length === 0) return [];
  const done = new Set((await repo.recordsOfKinds(ctx.core.store, runId, ['step', 'decision'])).map((r) => r.step_id));
  return requests.filter((r) => !done.has(r.step_id)).map(({ at, ...r }) => ({ ...r, requested_at: at }));
}

/** A decision as run views show it: who decided (and through which chain), what, why, when, and the input it approved. */
export interface DecisionView {
  principal: string;
  chain: string[];
  decision: string;
  comment: string | null;
  input_hash: string | null;
  at: string;
}

function decisionView(d: repo.DecisionRow): DecisionView {
  return {
    principal: d.principal,
    chain: d.chain,
    decision: d.decision,
    comment: d.comment,
    input_hash: d.input_hash,
    at: isoTime(d.at),
  };
}

/** Decisions recorded so far for a step (times ISO 8601). */
export async function stepDecisions(ctx: RunsContext, runId: string, stepId: string): Promise<DecisionView[]> {
  return (await repo.decisions(ctx.core.store, runId, stepId)).map(decisionView);
}

/** Every decision of a run, decided steps included, oldest first: the run's `decisions`. */
export async function runDecisions(ctx: RunsContext, runId: string): Promise<(DecisionView & { step_id: string })[]> {
  return (await repo.runDecisions(ctx.core.store, runId)).map((d) => ({ step_id: d.step_id, ...decisionView(d) }));
}

/** The run's pending approvals as its view shows them; none for a terminal run. */
export async function pendingApprovalsView(ctx: RunsContext, run: Run): Promise<PendingApprovalView[]> {
  if (isTerminal(run.state)) return [];
  const out: PendingApprovalView[] = [];
  for (const p of await pendingApprovals(ctx, run.run_id)) {
    out.push({
      ...p,
      due: isoTimeOrNull(p.due),
      requested_at: isoTime(p.requested_at),
      decisions: await stepDecisions(ctx, run.run_id, p.step_id),
    });
  }
  return out;
}

/** Who decides: the principal, and the actors of the token it decides with (RFC 8693 `act`, current first). */
export interface Decider {
  principal: string;
  actors?: readonly string[] | undefined;
}

/**
 * The approval route of every run that waits on the engine's approvals port
 * (crew runs, agent job runs): the step must be pending, the run not terminal,
 * and the decision must count (core/engine/approval-rule.ts decisionCounts,
 * the one rule: under `two_person` no principal of the requester's chain
 * decides, through any token; named approvers only); one voice per person (a
 * principal of the decider's chain already decided: 409 already_decided).
 * Records the decision with its chain, comment and the digest of the input it
 * approves (audited as `action`, naming all three) and an `approval_received`
 * journal record naming the same. True when the caller should wake the run (it
 * is waiting, and no drive of this process is under way); false when the run
 * ended meanwhile or is driven: a drive of this process under way then looks
 * again before it leaves the run waiting, so the decision is never missed.
 */
export async function recordApproval(
  ctx: RunsContext,
  decider: Decider,
  run: Run,
  stepId: string,
  decision: 'approve' | 'reject',
  comment: string | undefined,
  action: string,
): Promise<boolean> {
  const { iam } = ctx;
  const runId = run.run_id;
  const actor = decider.principal;
  const chain = chainOf({ principal: actor, chain: [actor, ...(decider.actors ?? [])] });
  const ask = (await pendingApprovals(ctx, runId)).find((p) => p.step_id === stepId);
  if (!ask) throw notFound('approval step');
  if (isTerminal(run.state))
    throw new ServiceError('conflict', `the run is ${run.state}`, { details: { reason: 'run_terminal', state: run.state } });
  const inputHash = ask.input_hash ?? '';
  const refuse = async (reason: Reason, message: string): Promise<never> => {
    await iam.auditNow({ actor, action, target: `${runId}:${stepId}`, outcome: 'refused', details: { reason, chain } });
    throw new ServiceError('forbidden', message, { details: { reason } });
  };
  const verdict = decisionCounts(
    { principal: actor, chain, decision, input_hash: inputHash },
    { rule: ask.rule, approvers: ask.approvers, quorum: ask.quorum, input_hash: inputHash },
    requesterOf(run),
  );
  if (!verdict.counts) {
    if (verdict.reason === 'requester_cannot_approve')
      await refuse(
        verdict.reason,
        "under the two-person rule no principal of the requester's chain approves (the requester, or an actor of its token), through any token",
      );
    if (verdict.reason === 'not_an_approver') await refuse(verdict.reason, 'the caller is not a named approver of this step');
    await refuse(verdict.reason, 'the decision does not count for this step');
  }
  const at = ctx.core.clock.now();
  const kept = comment ?? null;
  await ctx.core.store.write(async (tx) => {
    // One voice per person: a decision on the same input by any principal of the chain counts already.
    const prior = await repo.decisions(tx, runId, stepId);
    if (
      alreadyDecided(
        chain,
        prior.filter((d) => d.input_hash === ask.input_hash),
      )
    ) {
      throw new ServiceError('conflict', 'the caller (or a principal of its delegation chain) already decided this step', {
        details: { reason: 'already_decided' },
      });
    }
    // A decision the caller made on another input (a request from before digests) is replaced.
    if (prior.some((d) => d.principal === actor)) await repo.deleteDecision(tx, runId, stepId, actor);
    await repo.insertDecision(tx, { runId, stepId, principal: actor, chain, decision, comment: kept, inputHash, at });
    await iam.audit(tx, {
      at,
      actor,
      action,
      target: `${runId}:${stepId}`,
      outcome: 'ok',
      details: { decision, chain, comment: kept, input_hash: inputHash },
    });
  });
  try {
    await appendJournal(ctx, runId, {
      step_id: stepId,
      kind: 'approval_received',
      data: { by: actor, chain, decision, comment: kept, input_hash: inputHash },
    });
  } catch (e) {
    if (!(e instanceof RunClosedError)) throw e;
    return false; // the run ended meanwhile; the decision stays recorded (audit)
  }
  if (requestWake(ctx, runId)) return false;
  return (await getRun(ctx, runId))?.state === 'waiting';
}
