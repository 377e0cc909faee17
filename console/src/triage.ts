/**
 * Why a run ended badly, for every way it can (issue 43 §2), from the run's
 * error and its journal alone (pure; tested in test/console/triage.test.ts):
 * which step, which seat, what kind of failure, and the facts an operator
 * needs for that kind:
 *
 * - a model call: what the provider answered, and how many attempts the
 *   step's retry policy made (its `attempt` records), beside how many times
 *   the provider was asked for the last one (`upstream.attempts`);
 * - a budget or policy refusal (budget ceilings and ledgers, gates and
 *   contracts, grants, modes, posture): the refusing step, from the error or
 *   else the journal's `refusal` record, and the rule or limit it names;
 * - a job step: the failing SQL statement (its index and text, from the run's
 *   spec) or notebook cell, and what the sandbox said;
 * - a step timeout: the deadline (the call's start plus `timeout_ms`);
 * - an approval rejected (who, through which chain, when, why) or timed out
 *   (its deadline, the quorum and how many approved);
 * - a cancel: who cancelled it.
 *
 * The reason's sentence is the one registry's (core/reasons.ts).
 */
import { REASONS, isReason } from '../../core/reasons.ts';
import { failingStep, finishedRecord, type RecordLike } from './run-model.ts';

export type TriageKind =
  | 'model'
  | 'budget'
  | 'policy'
  | 'job'
  | 'timeout'
  | 'approval_rejected'
  | 'approval_timeout'
  | 'cancelled'
  | 'storage'
  | 'outcome'
  | 'other';

export interface Triage {
  kind: TriageKind;
  code: string;
  reason: string | null;
  message: string;
  /** The registry's sentence for the reason, when it is one. */
  sentence: string | null;
  /** The step that failed or refused (a record's step id: a node id, or a call under it). */
  step_id: string | null;
  /** The seat (billet id) the step ran for, when the error or the step's records name one. */
  seat: string | null;
  /** The error's details, as the run keeps them. */
  details: Record<string, unknown>;
  upstream: { code?: string; message?: string; reason?: string; provider_status?: number; attempts?: number } | null;
  /** Attempts of the failing step under its retry policy (`attempt` records), and their reasons. */
  attempts: { n: number; failed: number; reasons: string[] } | null;
  /** A step timeout: its limit, when the call started and its deadline (ms since the epoch), when it was stopped. */
  deadline: { timeout_ms: number; started_at: number | null; due_at: number | null; stopped_at: number | null } | null;
  /** A rejected approval: who, through which chain, when, why. */
  rejected: { by: string; chain: string[]; comment: string | null; at: number | null } | null;
  /** A timed-out approval: its deadline, since when it waited, how many approved of the quorum. */
  timedOut: { due: number | null; since: number | null; at: number | null; approved: number | null; quorum: number | null } | null;
  /** A failing SQL statement (index from 0) and its text, from the run's spec. */
  statement: { index: number; sql: string | null } | null;
  /** A failing notebook cell (index from 0), its type and source. */
  cell: { index: number; type: string; source: string | null } | null;
  /** Who asked for the cancel. */
  cancelledBy: string | null;
  /** A lost outcome an operator failed: who. */
  resolvedBy: string | null;
  /** Limits a refusal names (ceiling, spent, requested, left, rule, contract, tool, mode…), as label and value. */
  facts: { label: string; value: string }[];
}

type ErrorLike = { code?: unknown; message?: unknown; reason?: unknown; details?: unknown } | null | undefined;

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const obj = (v: unknown): Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};

const BUDGET = new Set(['budget_ceiling_exceeded', 'budget_exceeded', 'no_budget_ledger']);
const STORAGE = new Set(['run_storage_cap', 'workspace_quota', 'cell_storage_quota']);
const JOB = new Set([
  'sql_error',
  'statement_refused',
  'row_limit',
  'script_error',
  'time_limit',
  'memory_limit',
  'output_limit',
  'sandbox_crashed',
  'invalid_spec',
  'tool_error',
  'requester_inactive',
]);

/** The top-level node of a step id (the part before `/`, `[` or `#`): a notebook cell, a job's step. */
function topOf(stepId: string): string {
  return stepId.split(/[/[#]/)[0]!;
}

function kindOf(code: string, reason: string | null): TriageKind {
  if (code === 'cancelled' || reason === 'cancelled') return 'cancelled';
  if (reason === 'approval_rejected') return 'approval_rejected';
  if (reason === 'approval_timeout') return 'approval_timeout';
  if (reason === 'step_timeout') return 'timeout';
  if (reason === 'outcome_unknown') return 'outcome';
  if (reason === 'model_error' || reason === 'model_unavailable') return 'model';
  if (reason !== null && BUDGET.has(reason)) return 'budget';
  if (reason !== null && STORAGE.has(reason)) return 'storage';
  if (reason !== null && JOB.has(reason)) return 'job';
  if (code === 'refused') return 'policy';
  return 'other';
}

/** The limits and rules a refusal names, in words (budget ceilings and ledgers, gate rules, tools, modes). */
function factsOf(d: Record<string, unknown>): { label: string; value: string }[] {
  const out: { label: string; value: string }[] = [];
  const add = (label: string, v: unknown) => {
    if (typeof v === 'string' || typeof v === 'number') out.push({ label, value: String(v) });
  };
  add('Effect key', d['effect_key']);
  add('Source', d['source']);
  add('Pinned definition', d['pinned']);
  if ('live' in d) add('Live definition', d['live'] ?? 'none: the server no longer lists the tool');
  add('Rule', d['rule']);
  add('Contract', d['contract']);
  add('Tool', d['tool']);
  add('Mode', d['mode']);
  add('Ceiling', d['ceiling']);
  add('Spent', d['spent']);
  add('Requested', d['requested']);
  add('Left', d['left']);
  add('Least a call needs', d['minimum']);
  add('Ledger', d['ledger']);
  add('Agent', d['agent_id']);
  add('Limit', d['limit']);
  add('Problem', d['problem']);
  return out;
}

/**
 * The triage of an ended run (failed, refused or cancelled); null for a run that completed or has not
 * ended. `run.error` is the API's (else the journal's end record's); `spec` the run's (job runs: the
 * statement or cell that failed).
 */
export function triage(
  run: { state: string; error?: ErrorLike; spec?: unknown; job_type?: string | null },
  records: readonly RecordLike[],
): Triage | null {
  const end = finishedRecord(records);
  const e: ErrorLike = run.error ?? (end?.data?.['error'] as ErrorLike);
  const outcome = str(end?.data?.['outcome']) ?? run.state;
  if (outcome === 'completed' || !['failed', 'refused', 'cancelled'].includes(outcome)) {
    if (!e) return null;
  }
  const details = obj(e?.details);
  const code = str(e?.code) ?? outcome;
  const reason = str(e?.reason) ?? str(end?.data?.['reason']) ?? (outcome === 'cancelled' ? 'cancelled' : null);
  const kind = kindOf(code, reason);
  const stepId = failingStep(records, details);
  const mine = stepId === null ? [] : records.filter((r) => r.step_id === stepId);
  const seat = str(details['seat']) ?? str(mine.find((r) => typeof r.data?.['seat'] === 'string')?.data?.['seat']);
  const up = obj(details['upstream']);

  const tries = mine.filter((r) => r.kind === 'attempt');
  const attempts = tries.length
    ? {
        n: Math.max(...tries.map((r) => num(r.data?.['attempt']) ?? 0), tries.length),
        failed: tries.filter((r) => r.data?.['outcome'] !== 'ok').length,
        reasons: [...new Set(tries.map((r) => str(r.data?.['reason'])).filter((x): x is string => x !== null))],
      }
    : null;

  let deadline: Triage['deadline'] = null;
  const timeoutMs = num(details['timeout_ms']);
  if (kind === 'timeout' && timeoutMs !== null) {
    // The call's start: the failure names it (a model call writes no intent); an older journal's intent record.
    const started = num(details['started_at']) ?? [...mine].reverse().find((r) => r.kind === 'intent')?.at ?? null;
    deadline = {
      timeout_ms: timeoutMs,
      started_at: started,
      due_at: started === null ? null : started + timeoutMs,
      stopped_at: end?.at ?? null,
    };
  }

  let rejected: Triage['rejected'] = null;
  if (kind === 'approval_rejected') {
    const by = str(details['by']) ?? '';
    const received = [...records]
      .reverse()
      .find(
        (r) =>
          r.kind === 'approval_received' && r.step_id === stepId && r.data?.['decision'] === 'reject' && (!by || r.data?.['by'] === by),
      );
    const chain = Array.isArray(details['chain']) ? details['chain'].filter((x): x is string => typeof x === 'string') : by ? [by] : [];
    rejected = { by, chain, comment: str(details['comment']) ?? str(received?.data?.['comment']), at: received?.at ?? null };
  }

  let timedOut: Triage['timedOut'] = null;
  if (kind === 'approval_timeout') {
    const waiting = mine.find((r) => r.kind === 'waiting');
    const decided = mine.find((r) => r.kind === 'decision' && r.data?.['decision'] === 'timeout');
    timedOut = {
      due: num(waiting?.data?.['wake_at']),
      since: waiting?.at ?? null,
      at: decided?.at ?? end?.at ?? null,
      approved: num(details['approved']),
      quorum: num(details['quorum']),
    };
  }

  const spec = obj(run.spec);
  let cell: Triage['cell'] = null;
  let sqlOf: Record<string, unknown> = spec;
  const cellMatch = stepId === null ? null : /^cell-(\d+)$/.exec(topOf(stepId));
  if (cellMatch && Array.isArray(spec['cells'])) {
    const index = Number(cellMatch[1]);
    const c = obj((spec['cells'] as unknown[])[index]);
    cell = { index, type: str(c['type']) ?? 'cell', source: str(c['code']) ?? str(c['sql']) ?? str(c['source']) };
    sqlOf = c;
  }
  // The statement of a SQL job (or of a notebook's SQL cell) that failed: `details.statement` indexes it.
  let statement: Triage['statement'] = null;
  const stIndex = num(details['statement']);
  if (stIndex !== null) {
    const list = Array.isArray(sqlOf['statements']) ? (sqlOf['statements'] as unknown[]) : null;
    statement = { index: stIndex, sql: list ? str(obj(list[stIndex])['sql']) : stIndex === 0 ? str(sqlOf['sql']) : null };
  }

  const cancel = [...records].reverse().find((r) => r.kind === 'cancel_requested');
  return {
    kind,
    code,
    reason,
    message: str(e?.message) ?? '',
    sentence: reason !== null && isReason(reason) ? REASONS[reason].sentence : null,
    step_id: stepId,
    seat,
    details,
    upstream: Object.keys(up).length ? (up as Triage['upstream']) : null,
    attempts,
    deadline,
    rejected,
    timedOut,
    statement,
    cell,
    cancelledBy: str(cancel?.data?.['by']),
    resolvedBy: str(details['resolved_by']),
    facts: kind === 'budget' || kind === 'policy' || kind === 'storage' || kind === 'outcome' ? factsOf(details) : [],
  };
}
