/**
 * Human approvals on the device (docs/edge.md, "Approvals on the device"): the engine's approvals port
 * of an offline run, the run view's `pending_approvals` and `decisions` in the cell's shape, and the
 * decision a caller records, judged by core's one rule (core/engine/approval-rule.ts) exactly as the
 * cell's approval route judges it (cell/runs/approvals.ts recordApproval):
 *   DATA/runs/RUN_ID/approvals.json  the approvals the engine asked for, by step id (rewritten durably);
 *   the run's journal                 each decision, an `approval_received` record as at the cell
 *                                     (`by`, `chain`, `decision`, `comment`, `input_hash`), plus the
 *                                     version of the key bundle the device judged the approver with
 *                                     (`key_bundle`), so the cell re-judges it on import.
 * Pure file and journal work: the routes (edge/offline.ts) serialise it with the run's drives.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ServiceError, invalid, notFound } from '../core/errors.ts';
import { contentHash } from '../core/canonical.ts';
import { isoTime, isoTimeOrNull } from '../core/iso-time.ts';
import type { Reason } from '../core/reasons.ts';
import type { ApprovalDecision, ApprovalsPort } from '../core/engine/types.ts';
import { alreadyDecided, chainOf, decisionCounts } from '../core/engine/approval-rule.ts';
import type { JournalRecord, JsonObject } from '../core/journal/record.ts';
import { writeFileDurable } from './files.ts';
import { runDir, type JournalFile, type RunFile } from './runs.ts';

/** The journal record kind of a decision (the cell's, cell/runs/approvals.ts). */
export const APPROVAL_RECORD = 'approval_received';

/** What the engine asks for when a step waits on an approval (core's port). */
type ApprovalAsk = Parameters<NonNullable<ApprovalsPort['request']>>[1];

/** An approval the engine asked for, as kept (the cell's `PendingApproval`, times in ms). */
export type ApprovalRequest = ApprovalAsk & { step_id: string; requested_at: number };

/** Who decides: the principal and the actors of its token (current first). */
export interface EdgeDecider {
  principal: string;
  actors?: readonly string[] | undefined;
}

const file = (dir: string, runId: string) => join(runDir(dir, runId), 'approvals.json');

/** The approval requests of a run, by step id (none when it never waited on one). */
export function readApprovalRequests(dir: string, runId: string): Record<string, ApprovalRequest> {
  const f = file(dir, runId);
  return existsSync(f) ? (JSON.parse(readFileSync(f, 'utf8')) as Record<string, ApprovalRequest>) : {};
}

/** The decisions of a run's journal, oldest first (of one step when given), as the engine's port reads them. */
export function journalDecisions(records: readonly JournalRecord[], stepId?: string): (ApprovalDecision & { step_id: string })[] {
  const out: (ApprovalDecision & { step_id: string })[] = [];
  for (const r of records) {
    if (r.kind !== APPROVAL_RECORD || (stepId !== undefined && r.step_id !== stepId)) continue;
    const d = r.data ?? {};
    const chain = Array.isArray(d['chain']) ? (d['chain'] as string[]) : [String(d['by'])];
    out.push({
      step_id: r.step_id,
      principal: String(d['by']),
      chain,
      decision: d['decision'] === 'approve' ? 'approve' : 'reject',
      input_hash: typeof d['input_hash'] === 'string' ? d['input_hash'] : null,
      comment: typeof d['comment'] === 'string' ? d['comment'] : null,
      at: r.at,
    });
  }
  return out;
}

/**
 * The engine's approvals port of one run: decisions read from its journal (the live one the drive
 * appends to), requests written once per step (again only when the step's input digest changed).
 */
export function deviceApprovalsPort(dir: string, runId: string, records: () => readonly JournalRecord[], now: () => number): ApprovalsPort {
  return {
    async decisions(stepId) {
      return journalDecisions(records(), stepId).map(({ step_id: _s, ...d }) => d);
    },
    async request(stepId, ask) {
      const all = readApprovalRequests(dir, runId);
      if (all[stepId]?.input_hash === ask.input_hash) return;
      all[stepId] = { step_id: stepId, ...ask, requested_at: now() };
      writeFileDurable(file(dir, runId), JSON.stringify(all) + '\n');
    },
  };
}

/** Requests of a run whose step has not completed yet (no `step` or `decision` record), oldest first. */
export function pendingRequests(dir: string, runId: string, journal: JournalFile): ApprovalRequest[] {
  const done = new Set(journal.records.filter((r) => r.kind === 'step' || r.kind === 'decision').map((r) => r.step_id));
  return Object.values(readApprovalRequests(dir, runId))
    .filter((r) => !done.has(r.step_id))
    .sort((a, b) => a.requested_at - b.requested_at);
}

function decisionView(d: ApprovalDecision) {
  return {
    principal: d.principal,
    chain: [...(d.chain ?? [d.principal])],
    decision: d.decision,
    comment: d.comment ?? null,
    input_hash: d.input_hash ?? null,
    at: isoTime(d.at),
  };
}

const TERMINAL: readonly RunFile['state'][] = ['completed', 'failed', 'refused', 'cancelled'];

/** The run view's `pending_approvals` and `decisions`, in the cell's shape (cell/runs/api.ts PendingApprovalSchema). */
export function approvalsView(dir: string, run: RunFile, journal: JournalFile) {
  const pending = TERMINAL.includes(run.state)
    ? []
    : pendingRequests(dir, run.run_id, journal).map((p) => ({
        ...p,
        due: isoTimeOrNull(p.due),
        requested_at: isoTime(p.requested_at),
        decisions: journalDecisions(journal.records, p.step_id).map(decisionView),
      }));
  const decisions = journalDecisions(journal.records).map((d) => ({ step_id: d.step_id, ...decisionView(d) }));
  return { pending_approvals: pending, decisions };
}

/**
 * Judges a decision on a run's waiting step as the cell's route does (recordApproval): the step must be
 * pending, the run not terminal, the decision must count (core's rule: under `two_person` no principal of
 * the requester's chain, named approvers only), one voice per person. Returns the journal record's fields
 * to append (the caller appends it to the run's journal); throws the cell's refusal otherwise.
 */
export function judgeDecision(
  dir: string,
  run: RunFile,
  journal: JournalFile,
  stepId: string,
  decider: EdgeDecider,
  decision: 'approve' | 'reject',
  comment: string | undefined,
  keyBundleVersion: number | null,
): { step_id: string; kind: string; graph_hash: string; input_hash: string; output_hash: string; data: JsonObject } {
  const actor = decider.principal;
  const chain = chainOf({ principal: actor, chain: [actor, ...(decider.actors ?? [])] });
  const ask = pendingRequests(dir, run.run_id, journal).find((p) => p.step_id === stepId);
  if (!ask) throw notFound('approval step');
  if (TERMINAL.includes(run.state))
    throw new ServiceError('conflict', `the run is ${run.state}`, { details: { reason: 'run_terminal', state: run.state } });
  const inputHash = ask.input_hash;
  const refuse = (reason: Reason, message: string) => new ServiceError('forbidden', message, { details: { reason } });
  const verdict = decisionCounts(
    { principal: actor, chain, decision, input_hash: inputHash },
    { rule: ask.rule, approvers: ask.approvers, quorum: ask.quorum, input_hash: inputHash },
    { id: run.requester, actors: run.requester_actors ?? [] },
  );
  if (!verdict.counts) {
    if (verdict.reason === 'requester_cannot_approve')
      throw refuse(
        verdict.reason,
        "under the two-person rule no principal of the requester's chain approves (the requester, or an actor of its token), through any token",
      );
    if (verdict.reason === 'not_an_approver') throw refuse(verdict.reason, 'the caller is not a named approver of this step');
    throw refuse(verdict.reason, 'the decision does not count for this step');
  }
  const prior = journalDecisions(journal.records, stepId).filter((d) => d.input_hash === ask.input_hash);
  if (alreadyDecided(chain, prior))
    throw new ServiceError('conflict', 'the caller (or a principal of its delegation chain) already decided this step', {
      details: { reason: 'already_decided' },
    });
  const none = contentHash(null);
  return {
    step_id: stepId,
    kind: APPROVAL_RECORD,
    graph_hash: run.graph_hash,
    input_hash: none,
    output_hash: none,
    data: {
      by: actor,
      chain,
      decision,
      comment: comment ?? null,
      input_hash: inputHash,
      ...(keyBundleVersion !== null ? { key_bundle: keyBundleVersion } : {}),
    },
  };
}

/** A decision's body as the cell's route takes it (`ApprovalDecision`: decision, comment of at most 2000; nothing else). */
export function decisionBody(body: unknown): { decision: 'approve' | 'reject'; comment: string | undefined } {
  const bad = (message: string) => invalid(message);
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw bad('the body must be an object');
  const b = body as Record<string, unknown>;
  for (const k of Object.keys(b)) if (k !== 'decision' && k !== 'comment') throw bad(`unknown field ${k}`);
  if (b['decision'] !== 'approve' && b['decision'] !== 'reject') throw bad("decision must be 'approve' or 'reject'");
  if (b['comment'] !== undefined && (typeof b['comment'] !== 'string' || b['comment'].length > 2000))
    throw bad('comment must be a string of at most 2000 characters');
  return { decision: b['decision'], comment: b['comment'] as string | undefined };
}
