/**
 * Re-judging the approvals of a journal carried back from a device (issue 39, section 4), on import:
 * the device signs whatever it writes, so each `approval_received` record (edge/approvals.ts) is believed
 * only as far as the cell can check it against what it gave that device:
 *   - it names the key bundle the device judged the approver with (`data.key_bundle`), one this cell
 *     issued to this device, and the approver (`data.by`) is a principal that bundle carried active with
 *     agent_teams.approve (the deciding permission);
 *   - the digest it approved (`data.input_hash`) is the input digest of the step it decided (the step's
 *     `step` or `decision` record), as the device asked for it;
 *   - the step's outcome follows from the recorded decisions by core's rule, for the run's requester (its
 *     `run_started` record's, which the approval must name too) (core/engine/approval-rule.ts,
 *     the rule the device and the cell decide with): a human_approval step approved only when its
 *     decisions reach its quorum under its rule (two-person: never the requester; named approvers; one
 *     voice per person), approved by exactly those principals; a tool call under `ask` likewise (quorum 1).
 * The first record that fails is named (its `seq`) in a 403 `approval_not_entitled`.
 */
import type { Reason } from '../../core/reasons.ts';
import type { Graph, HumanApprovalConfig } from '../../core/engine/types.ts';
import { recordedRequester, tallyApproval, type DecisionFacts } from '../../core/engine/approval-rule.ts';
import type { JournalRecord } from '../../core/journal/record.ts';
import type { EdgeContext } from './context.ts';
import { OUTCOME_RESOLVED } from '../../core/engine/outcome-resolution.ts';
import { keyBundleApprovers, keyBundleResolvers } from './repository.ts';

/**
 * Refuses (403 `approval_not_entitled`, naming the record's seq and step) a journal with an approval
 * the device was not entitled to record; `graph` finds the run's graph when it holds approvals.
 */
export async function checkApprovals(
  ctx: EdgeContext,
  deviceId: string,
  p: { run: { run_id: string }; records: readonly JournalRecord[] },
  graph: () => Promise<Graph | undefined>,
  refuse: (reason: Reason, message: string, code: 'forbidden', extra?: Record<string, unknown>) => Promise<never>,
): Promise<void> {
  if (!p.records.some((r) => r.kind === 'approval_received' || Array.isArray(r.data?.['approved_by']))) return;
  const problem = await approvalsProblem(ctx, deviceId, await graph(), p.records);
  if (problem === null) return;
  await refuse(
    'approval_not_entitled',
    `the approval at seq ${problem.seq} (step ${problem.step_id}) does not hold: ${problem.problem}`,
    'forbidden',
    {
      run_id: p.run.run_id,
      seq: problem.seq,
      step_id: problem.step_id,
    },
  );
}

export interface ApprovalProblem {
  seq: number;
  step_id: string;
  problem: string;
}

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const requesterKey = (r: { id: string; actors?: readonly string[] | undefined }) => [r.id, ...(r.actors ?? [])].join('\u0000');

/** The decisions recorded for a step before `seq`, as core's rule reads them. */
function decisionsBefore(records: readonly JournalRecord[], stepId: string, seq: number): DecisionFacts[] {
  return records
    .filter((r) => r.kind === 'approval_received' && r.step_id === stepId && r.seq < seq)
    .map((r) => ({
      principal: String(r.data?.['by']),
      chain: Array.isArray(r.data?.['chain']) ? (r.data['chain'] as string[]) : null,
      decision: r.data?.['decision'] === 'approve' ? 'approve' : 'reject',
      input_hash: str(r.data?.['input_hash']),
    }));
}

/** The first approval of `records` the device was not entitled to record, or null when every one holds. */
export async function approvalsProblem(
  ctx: EdgeContext,
  deviceId: string,
  graph: Graph | undefined,
  records: readonly JournalRecord[],
): Promise<ApprovalProblem | null> {
  const bundles = new Map<number, Set<string> | null>();
  const approversOf = async (version: number) => {
    if (!bundles.has(version)) {
      const a = await keyBundleApprovers(ctx.core.store, deviceId, version);
      bundles.set(version, a === undefined ? null : new Set(a));
    }
    return bundles.get(version)!;
  };
  // The run's requester, as its first record names it: the two-person rule is replayed against it.
  const started = records.find((r) => r.kind === 'run_started');
  const runRequester = recordedRequester(started?.data);
  /** The input digest the step was decided on: its completing record's. */
  const decidedOn = (stepId: string) =>
    records.find((r) => (r.kind === 'step' || r.kind === 'decision') && r.step_id === stepId)?.input_hash;
  for (const r of records) {
    if (r.kind === 'approval_received') {
      const d = r.data ?? {};
      const by = str(d['by']);
      const version = d['key_bundle'];
      const fail = (problem: string) => ({ seq: r.seq, step_id: r.step_id, problem });
      if (by === null) return fail('it names no approver');
      if (typeof version !== 'number' || !Number.isInteger(version)) return fail('it names no key bundle the approver was judged with');
      const approvers = await approversOf(version);
      if (approvers === null) return fail(`this cell issued no key bundle version ${version} to the device`);
      if (!approvers.has(by)) return fail(`${by} is not a principal key bundle ${version} carried with the permission to decide approvals`);
      const on = decidedOn(r.step_id);
      if (on !== undefined && str(d['input_hash']) !== on) return fail('the digest it approved is not the input of the step it decided');
      continue;
    }
    const approved = r.kind === 'decision' && r.data?.['decision'] === 'approve' && Array.isArray(r.data?.['approved_by']);
    const toolApproved = r.kind === 'step' && Array.isArray(r.data?.['approved_by']);
    if (!approved && !toolApproved) continue;
    const fail = (problem: string) => ({ seq: r.seq, step_id: r.step_id, problem });
    const requester = recordedRequester(r.data);
    if (requester === null || runRequester === null) return fail('the approval names no requester');
    if (requesterKey(requester) !== requesterKey(runRequester)) return fail('the approval names another requester than the run');
    let rule: { rule: string; approvers: string[]; quorum: number };
    if (approved) {
      const node = graph?.nodes.find((n) => n.id === r.step_id);
      if (node?.kind !== 'human_approval') return fail("the approved step is not a human_approval step of the run's graph");
      const cfg = node.config as HumanApprovalConfig;
      rule = { rule: cfg.rule, approvers: cfg.approvers ?? [], quorum: cfg.quorum ?? 1 };
    } else rule = { rule: 'quorum', approvers: [], quorum: 1 };
    const t = tallyApproval(decisionsBefore(records, r.step_id, r.seq), { ...rule, input_hash: r.input_hash }, requester);
    const claimed = [...(r.data!['approved_by'] as string[])].sort();
    const counted = t.approvals.map((a) => a.principal).sort();
    if (!t.approved || claimed.join('\u0000') !== counted.join('\u0000'))
      return fail(`its recorded decisions do not approve it under its rule (${rule.rule}): ${counted.length} of ${t.need} count`);
  }
  return null;
}

/**
 * Refuses (403 `resolution_not_entitled`, naming the record's seq and step) a journal whose resolution of a
 * lost outcome (an `outcome_resolved` record, core/engine/outcome-resolution.ts) names an operator the key
 * bundle it names did not carry with agent_teams.write (the resolving permission, as at the cell), or whose
 * call followed a resolution (`data.resolution` of its step) no such record holds.
 */
export async function checkResolutions(
  ctx: EdgeContext,
  deviceId: string,
  p: { run: { run_id: string }; records: readonly JournalRecord[] },
  refuse: (reason: Reason, message: string, code: 'forbidden', extra?: Record<string, unknown>) => Promise<never>,
): Promise<void> {
  const problem = await resolutionsProblem(ctx, deviceId, p.records);
  if (problem === null) return;
  await refuse(
    'resolution_not_entitled',
    `the resolution at seq ${problem.seq} (step ${problem.step_id}) does not hold: ${problem.problem}`,
    'forbidden',
    {
      run_id: p.run.run_id,
      seq: problem.seq,
      step_id: problem.step_id,
    },
  );
}

async function resolutionsProblem(ctx: EdgeContext, deviceId: string, records: readonly JournalRecord[]): Promise<ApprovalProblem | null> {
  const held = new Set<string>();
  for (const r of records) {
    const fail = (problem: string) => ({ seq: r.seq, step_id: r.step_id, problem });
    if (r.kind === OUTCOME_RESOLVED) {
      const by = str(r.data?.['by']);
      const version = r.data?.['key_bundle'];
      if (by === null) return fail('it names no operator');
      if (typeof version !== 'number' || !Number.isInteger(version)) return fail('it names no key bundle the operator was judged with');
      const resolvers = await keyBundleResolvers(ctx.core.store, deviceId, version);
      if (resolvers === undefined) return fail(`this cell issued no key bundle version ${version} to the device`);
      if (!resolvers.includes(by)) return fail(`${by} is not a principal key bundle ${version} carried with agent_teams.write`);
      held.add(`${r.step_id}\u0000${by}\u0000${String(r.data?.['attempt'])}`);
      continue;
    }
    const res = r.data?.['resolution'];
    if (r.kind !== 'step' || typeof res !== 'object' || res === null) continue;
    const x = res as Record<string, unknown>;
    if (!held.has(`${r.step_id}\u0000${String(x['by'])}\u0000${String(x['attempt'])}`))
      return fail('the call followed a resolution no outcome_resolved record before it holds');
  }
  return null;
}
