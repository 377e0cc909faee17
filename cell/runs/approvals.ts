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
import { getRun, isTerminal, type Run } from './runs.ts';

/** An approval the engine waits on, for a step that has not completed yet. */
export interface PendingApproval {
  step_id: string;
  kind: string;
  rule: string;
  approvers: string[];
  quorum: number;
  prompt: string | null;
  due: number | null;
  requested_at: number;
}

/** The engine's approvals port of one run: decisions read back, requests recorded (idempotent). */
export function approvalsPort(ctx: RunsContext, runId: string): ApprovalsPort {
  const { store, clock } = ctx.core;
  return {
    async decisions(stepId): Promise<ApprovalDecision[]> {
      const ds = (await repo.decisions(store, runId, stepId)).map((d) => ({ principal: d.principal, decision: d.decision, at: d.at }));
      if (ctx.core.traces.spans && ds.length > 0) await approvalSpan(ctx, runId, stepId, ds);
      return ds;
    },
    async request(stepId, ask) {
      if (await repo.hasApprovalRequest(store, runId, stepId)) return;
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
  if (!ask) return;
  const approvals = new Set(ds.filter((d) => d.decision === 'approve').map((d) => d.principal)).size;
  const rejected = ds.some((d) => d.decision === 'reject');
  const needed = ask.rule === 'two_person' ? 2 : Math.max(1, ask.quorum);
  if (!rejected && approvals < needed) return;
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

/** Decisions recorded so far for a step (times ISO 8601). */
export async function stepDecisions(
  ctx: RunsContext,
  runId: string,
  stepId: string,
): Promise<{ principal: string; decision: string; comment: string | null; at: string }[]> {
  return (await repo.decisions(ctx.core.store, runId, stepId)).map((d) => ({ ...d, at: isoTime(d.at) }));
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

/**
 * The approval rules shared by every run that waits on the engine's approvals
 * port (crew runs, agent job runs): the step must be pending, the run not
 * terminal; under `two_person` the requester is refused; named approvers only;
 * one decision per principal. Records the decision (audited as `action`) and an
 * `approval_received` journal record. True when the caller should wake the run
 * (it is waiting, and no drive of this process is under way); false when the run
 * ended meanwhile or is driven: a drive of this process under way then looks
 * again before it leaves the run waiting, so the decision is never missed.
 */
export async function recordApproval(
  ctx: RunsContext,
  actor: string,
  run: Run,
  stepId: string,
  decision: 'approve' | 'reject',
  comment: string | undefined,
  action: string,
): Promise<boolean> {
  const { iam } = ctx;
  const runId = run.run_id;
  const ask = (await pendingApprovals(ctx, runId)).find((p) => p.step_id === stepId);
  if (!ask) throw notFound('approval step');
  if (isTerminal(run.state))
    throw new ServiceError('conflict', `the run is ${run.state}`, { details: { reason: 'run_terminal', state: run.state } });
  const refuse = async (reason: Reason, message: string): Promise<never> => {
    await iam.auditNow({ actor, action, target: `${runId}:${stepId}`, outcome: 'refused', details: { reason } });
    throw new ServiceError('forbidden', message, { details: { reason } });
  };
  if (ask.rule === 'two_person' && actor === run.requester)
    await refuse('requester_cannot_approve', "the run's requester cannot approve under the two-person rule");
  if (ask.approvers.length > 0 && !ask.approvers.includes(actor))
    await refuse('not_an_approver', 'the caller is not a named approver of this step');
  const at = ctx.core.clock.now();
  await ctx.core.store.write(async (tx) => {
    if (await repo.hasDecided(tx, runId, stepId, actor)) {
      throw new ServiceError('conflict', 'the caller already decided this step', { details: { reason: 'already_decided' } });
    }
    await repo.insertDecision(tx, { runId, stepId, principal: actor, decision, comment: comment ?? null, at });
    await iam.audit(tx, { at, actor, action, target: `${runId}:${stepId}`, outcome: 'ok', details: { decision } });
  });
  try {
    await appendJournal(ctx, runId, { step_id: stepId, kind: 'approval_received', data: { by: actor, decision } });
  } catch (e) {
    if (!(e instanceof RunClosedError)) throw e;
    return false; // the run ended meanwhile; the decision stays recorded (audit)
  }
  if (requestWake(ctx, runId)) return false;
  return (await getRun(ctx, runId))?.state === 'waiting';
}
