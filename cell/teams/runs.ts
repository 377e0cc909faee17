/**
 * Crew runs: start (compile, placement, budget-ledger pre-check, then drive
 * on the engine through cell/runs), approvals, recovery by a peer cell, and
 * the investigate flag for runs still in flight after their budget.
 *
 * Refusals before the first step are runs too: the run row is created, a
 * `refusal` journal record names the reason, the run ends `refused`, and the
 * caller gets 409 conflict with `details.reason` and `details.run_id`
 * (`no_budget_ledger`, `placement_unmet`). A resumed run whose graph hash
 * differs from the one it started with is refused the same way
 * (`graph_changed`).
 */
import type { Graph } from '../../core/engine/types.ts';
import type { JsonObject } from '../../core/journal/record.ts';
import { ServiceError, notFound } from '../../core/errors.ts';
import type { Cell } from '../context.ts';
import { recordAuditTx } from '../iam/audit.ts';
import { assertStorageRoom, byteSize } from '../runs/storage.ts';
import { isDriven } from '../runs/control.ts';
import { driveRun } from '../runs/drive.ts';
import { RunClosedError, appendJournal, finishRun } from '../runs/journal.ts';
import { activeRuns, createRunTx, getRun, isTerminal, setRunFlags, type Run } from '../runs/runs.ts';
import { agentActive, getLedger, releaseOpenReservations } from './agents.ts';
import { compileFor } from './compile.ts';
import { getCrew, getFormation, type Crew } from './formations.ts';
import { checkPlacement } from './placement.ts';
import { crewPorts } from './ports.ts';
import { iso, parseBody } from './schema.ts';

/** Default time budget of a crew run before it is flagged for investigation, ms. */
export const DEFAULT_MAX_DURATION_MS = 10 * 60_000;

export interface CrewRunSpec {
  input: unknown;
  /** Time budget (ms): a run still in flight after it is flagged `investigate`. */
  max_duration_ms: number;
  /** Cost budget (tokens across all seats): a run still in flight beyond it is flagged too. */
  max_tokens: number | null;
  formation_id: string;
}

const inflight = new WeakMap<Cell, Map<string, Promise<unknown>>>();
function track(cell: Cell, runId: string, p: Promise<unknown>): void {
  let m = inflight.get(cell);
  if (!m) { m = new Map(); inflight.set(cell, m); }
  m.set(runId, p);
  void p.finally(() => { if (m!.get(runId) === p) m!.delete(runId); });
}
/** How often the cell looks for runs past their budget, ms. */
export const INVESTIGATE_SWEEP_MS = 5_000;

const sweeps = new WeakMap<Cell, ReturnType<typeof setInterval>>();
/**
 * Module start: waiting crew runs (approval or timer) are driven again so a due
 * timer or an elapsed approval timeout is acted on after a restart; runs left
 * `running` by a coordinator that died wait for an explicit recover. Then the
 * periodic investigate sweep starts; `stopSweep` ends it.
 */
export function startSweep(cell: Cell): void {
  if (sweeps.has(cell)) return;
  for (const r of activeRuns(cell, 'crew')) {
    if (r.state === 'waiting') void resumeRun(cell, r.run_id, 'restart').catch((e: unknown) => cell.log.warn('waiting run not resumed', { run_id: r.run_id, error: e instanceof Error ? e.message : String(e) }));
  }
  const t = setInterval(() => { void flagOverdue(cell).catch((e: unknown) => cell.log.warn('investigate sweep failed', { error: e instanceof Error ? e.message : String(e) })); }, INVESTIGATE_SWEEP_MS);
  t.unref();
  sweeps.set(cell, t);
}
export async function stopSweep(cell: Cell): Promise<void> {
  const t = sweeps.get(cell);
  if (t) clearInterval(t);
  sweeps.delete(cell);
  // In-flight drives are aborted by the runs module's stop (it runs after this one).
}

/** Resolves when this process is no longer driving the run (tests, shutdown). */
export async function settled(cell: Cell, runId: string): Promise<void> {
  await inflight.get(cell)?.get(runId);
}

export function loadCrew(cell: Cell, crewId: string): { crew: Crew; formation: NonNullable<ReturnType<typeof getFormation>> } {
  const crew = getCrew(cell, crewId);
  if (!crew) throw notFound('crew');
  const formation = getFormation(cell, crew.formation_id);
  if (!formation) throw notFound('formation');
  return { crew, formation };
}

/** Ends a run refused before (or instead of) driving it, with a journal record; throws the 409. */
async function refuseRun(cell: Cell, runId: string, reason: string, message: string, details: JsonObject): Promise<never> {
  try {
    await appendJournal(cell, runId, { step_id: 'run', kind: 'refusal', data: { reason, ...details } });
    await finishRun(cell, runId, 'refused', { error: { code: 'refused', message, reason, details } });
  } catch (e) {
    if (!(e instanceof RunClosedError)) throw e; // already ended: the refusal still answers the caller
  }
  throw new ServiceError('conflict', message, { details: { reason, run_id: runId, ...details } });
}

function driveInBackground(cell: Cell, run: Run, graph: Graph, graphHash: string, crew: Crew): void {
  const spec = run.spec as CrewRunSpec;
  const p = driveRun(cell, run.run_id, graph, crewPorts(cell, run.run_id, run.workspace_id ?? crew.workspace_id), spec.input, {
    requester: run.requester, graphHash,
    context: { crew_id: crew.crew_id, workspace_id: run.workspace_id ?? crew.workspace_id },
  }).then((r) => { if (r.state === 'waiting') scheduleWake(cell, run.run_id, r.result?.waiting?.wake_at ?? null); })
    .catch((err: unknown) => cell.log.error('crew run drive failed', { run_id: run.run_id, error: err instanceof Error ? err.message : String(err) }));
  track(cell, run.run_id, p);
}

/** Re-drives a waiting run when its timer is due (system clock only; approvals re-drive at once). */
function scheduleWake(cell: Cell, runId: string, wakeAt: number | null): void {
  if (wakeAt === null) return;
  const delay = Math.min(Math.max(0, wakeAt - cell.clock.now()), 2 ** 31 - 1);
  const t = setTimeout(() => { void resumeRun(cell, runId, 'timer').catch(() => undefined); }, delay);
  t.unref();
}

/** Starts a crew run: compile, placement, ledgers, then drive in the background. */
export async function startCrewRun(cell: Cell, requester: string, crewId: string, body: { input?: unknown; workspace_id?: string | undefined; max_duration_ms?: number | undefined; max_tokens?: number | undefined }): Promise<Run> {
  const { crew, formation } = loadCrew(cell, crewId);
  const compiled = compileFor(cell, formation, crew);
  const spec: CrewRunSpec = {
    input: body.input ?? null, max_duration_ms: body.max_duration_ms ?? DEFAULT_MAX_DURATION_MS,
    max_tokens: body.max_tokens ?? null, formation_id: formation.formation_id,
  };
  const at = cell.clock.now();
  const workspaceId = body.workspace_id ?? crew.workspace_id;
  // No room for the run in its workspace (or the cell): refused before anything is written.
  assertStorageRoom(cell, workspaceId, byteSize(JSON.stringify(spec)));
  const runId = await cell.store.write((tx) => {
    const id = createRunTx(tx, {
      kind: 'crew', crew_id: crew.crew_id, workspace_id: workspaceId, requester, graph_hash: compiled.graphHash,
      spec, coordinator: cell.config.cellId, source: 'api', at,
    });
    recordAuditTx(tx, { at, actor: requester, action: 'crew.run', target: id, outcome: 'ok', details: { crew_id: crew.crew_id, graph_hash: compiled.graphHash } });
    return id;
  });
  await appendJournal(cell, runId, { step_id: 'run', kind: 'run_requested', data: { crew_id: crew.crew_id, formation_id: formation.formation_id, formation_hash: compiled.formationHash, requester } });

  const unmet = checkPlacement(compiled.graph.placement, cell.config);
  if (unmet.length) {
    await refuseRun(cell, runId, 'placement_unmet', `no cell meets the run's placement constraints: ${unmet.map((u) => u.constraint).join(', ')}`, { unmet: unmet as unknown as JsonObject[] } as JsonObject);
  }
  const inactive = [...new Set(Object.values(crew.assignments))].filter((a) => !agentActive(cell, a)).sort();
  if (inactive.length) {
    await refuseRun(cell, runId, 'agent_inactive', 'every agent of the crew must be an active principal', { agents: inactive });
  }
  const missing = [...new Set(Object.values(crew.assignments))].filter((a) => !getLedger(cell, a)).sort();
  if (missing.length) {
    await refuseRun(cell, runId, 'no_budget_ledger', 'a budget ledger must be registered for every agent of the run', { agents: missing });
  }
  const run = getRun(cell, runId)!;
  driveInBackground(cell, run, compiled.graph, compiled.graphHash, crew);
  return run;
}

/** Drives a non-terminal run again (approval arrived, timer due, recovery). */
export async function resumeRun(cell: Cell, runId: string, why: string): Promise<Run> {
  const run = getRun(cell, runId);
  if (!run || run.kind !== 'crew') throw notFound('run');
  if (isTerminal(run.state) || isDriven(cell, runId)) return run;
  const { crew, formation } = loadCrew(cell, run.crew_id!);
  let compiled;
  try {
    compiled = compileFor(cell, formation, crew);
  } catch (e) {
    return refuseRun(cell, runId, 'graph_changed', 'the formation no longer compiles; the run cannot resume', { why, detail: e instanceof ServiceError ? String(e.details?.['reason']) : 'compile_failed' });
  }
  if (compiled.graphHash !== run.graph_hash) {
    return refuseRun(cell, runId, 'graph_changed', 'the formation changed since the run started; it cannot resume', {
      expected_graph_hash: run.graph_hash, actual_graph_hash: compiled.graphHash, why,
    });
  }
  driveInBackground(cell, run, compiled.graph, compiled.graphHash, crew);
  return getRun(cell, runId)!;
}

/** Recovery by a peer (or restarted) cell: resume a run whose coordinator died. */
export async function recoverRun(cell: Cell, actor: string, crewId: string, runId: string): Promise<Run> {
  const run = getRun(cell, runId);
  if (!run || run.kind !== 'crew' || run.crew_id !== crewId) throw notFound('run');
  if (isTerminal(run.state)) throw new ServiceError('conflict', `the run is ${run.state}; there is nothing to recover`, { details: { reason: 'run_terminal', state: run.state } });
  if (isDriven(cell, runId)) throw new ServiceError('conflict', 'this cell is driving the run now', { details: { reason: 'run_in_progress' } });
  try {
    await appendJournal(cell, runId, { step_id: 'run', kind: 'recovered', data: { by: actor, cell_id: cell.config.cellId, previous_coordinator: run.coordinator } });
  } catch (e) {
    if (!(e instanceof RunClosedError)) throw e;
    throw new ServiceError('conflict', 'the run ended meanwhile; there is nothing to recover', { details: { reason: 'run_terminal', state: e.state } });
  }
  await cell.store.write((tx) => recordAuditTx(tx, { at: cell.clock.now(), actor, action: 'crew.run.recover', target: runId, outcome: 'ok', details: { previous_coordinator: run.coordinator } }));
  await releaseOpenReservations(cell, runId);
  return resumeRun(cell, runId, 'recover');
}

export interface PendingApproval { step_id: string; kind: string; rule: string; approvers: string[]; quorum: number; prompt: string | null; due: number | null; requested_at: number }

/** Approval requests of a run whose step has not completed yet (no step or decision record). */
export function pendingApprovals(cell: Cell, runId: string): PendingApproval[] {
  return cell.store.all<{ step_id: string; body: string; at: number }>(
    `SELECT r.step_id, r.body, r.at FROM team_approval_requests r WHERE r.run_id = ?
       AND NOT EXISTS (SELECT 1 FROM journal j WHERE j.run_id = r.run_id AND j.kind IN ('step', 'decision') AND json_extract(j.record, '$.step_id') = r.step_id)
     ORDER BY r.at, r.step_id`, [runId])
    .map((r) => ({ step_id: r.step_id, ...parseBody<Omit<PendingApproval, 'step_id' | 'requested_at'>>(r.body), requested_at: r.at }));
}

/** Decisions recorded so far for a step. */
export function stepDecisions(cell: Cell, runId: string, stepId: string): { principal: string; decision: string; at: string }[] {
  return cell.store.all<{ principal: string; decision: string; at: number }>('SELECT principal, decision, at FROM team_approvals WHERE run_id = ? AND step_id = ? ORDER BY at, principal', [runId, stepId])
    .map((d) => ({ ...d, at: iso(d.at) }));
}

/** Records an approval or rejection of a waiting step of a crew run, then wakes the run. */
export async function decideApproval(cell: Cell, actor: string, crewId: string, runId: string, stepId: string, decision: 'approve' | 'reject', comment: string | undefined): Promise<Run> {
  const run = getRun(cell, runId);
  if (!run || run.kind !== 'crew' || run.crew_id !== crewId) throw notFound('run');
  const wake = await recordApproval(cell, actor, run, stepId, decision, comment, 'crew.run.approval');
  if (wake) return resumeRun(cell, runId, 'approval');
  return getRun(cell, runId)!;
}

/**
 * The approval rules shared by every run that waits on the engine's approvals
 * port (crew runs, agent job runs): the step must be pending, the run not
 * terminal; under `two_person` the requester is refused; named approvers only;
 * one decision per principal. Records the decision (audited as `action`) and an
 * `approval_received` journal record. True when the caller should wake the run
 * (it was waiting); false when the run ended meanwhile or is still running.
 */
export async function recordApproval(cell: Cell, actor: string, run: Run, stepId: string, decision: 'approve' | 'reject', comment: string | undefined, action: string): Promise<boolean> {
  const runId = run.run_id;
  const ask = pendingApprovals(cell, runId).find((p) => p.step_id === stepId);
  if (!ask) throw notFound('approval step');
  if (isTerminal(run.state)) throw new ServiceError('conflict', `the run is ${run.state}`, { details: { reason: 'run_terminal', state: run.state } });
  const refuse = async (reason: string, message: string) => {
    await cell.store.write((tx) => recordAuditTx(tx, { at: cell.clock.now(), actor, action, target: `${runId}:${stepId}`, outcome: 'refused', details: { reason } }));
    throw new ServiceError('forbidden', message, { details: { reason } });
  };
  if (ask.rule === 'two_person' && actor === run.requester) await refuse('requester_cannot_approve', "the run's requester cannot approve under the two-person rule");
  if (ask.approvers.length > 0 && !ask.approvers.includes(actor)) await refuse('not_an_approver', 'the caller is not a named approver of this step');
  const at = cell.clock.now();
  await cell.store.write((tx) => {
    if (tx.get('SELECT 1 AS x FROM team_approvals WHERE run_id = ? AND step_id = ? AND principal = ?', [runId, stepId, actor])) {
      throw new ServiceError('conflict', 'the caller already decided this step', { details: { reason: 'already_decided' } });
    }
    tx.run('INSERT INTO team_approvals (run_id, step_id, principal, decision, comment, at) VALUES (?, ?, ?, ?, ?, ?)', [runId, stepId, actor, decision, comment ?? null, at]);
    recordAuditTx(tx, { at, actor, action, target: `${runId}:${stepId}`, outcome: 'ok', details: { decision } });
  });
  try {
    await appendJournal(cell, runId, { step_id: stepId, kind: 'approval_received', data: { by: actor, decision } });
  } catch (e) {
    if (!(e instanceof RunClosedError)) throw e;
    return false; // the run ended meanwhile; the decision stays recorded (audit)
  }
  return run.state === 'waiting';
}

const sweeping = new WeakMap<Cell, Promise<void>>();

/** Flags runs still in flight after their time or cost budget (idempotent, one sweep at a time); an event records it. */
export function flagOverdue(cell: Cell): Promise<void> {
  const running = sweeping.get(cell);
  if (running) return running;
  const p = flagOverdueOnce(cell).finally(() => sweeping.delete(cell));
  sweeping.set(cell, p);
  return p;
}

async function flagOverdueOnce(cell: Cell): Promise<void> {
  const now = cell.clock.now();
  for (const run of activeRuns(cell, 'crew')) {
    if (run.flags['investigate']) continue;
    const spec = run.spec as CrewRunSpec;
    const spent = runTokens(cell, run.run_id);
    let reason: string | null = null;
    if (now - run.created_at > (spec.max_duration_ms ?? DEFAULT_MAX_DURATION_MS)) reason = 'time_budget';
    else if (spec.max_tokens !== null && spec.max_tokens !== undefined && spent > spec.max_tokens) reason = 'cost_budget';
    if (!reason) continue;
    await setRunFlags(cell, run.run_id, { investigate: { reason, at: now } });
    try {
      await appendJournal(cell, run.run_id, { step_id: 'run', kind: 'investigate', data: { reason, elapsed_ms: now - run.created_at, tokens: spent } });
    } catch { /* the run ended meanwhile: the flag stays as a record */ }
  }
}

export function runTokens(cell: Cell, runId: string): number {
  return cell.store.get<{ n: number | null }>('SELECT SUM(actual) AS n FROM team_reservations WHERE run_id = ?', [runId])?.n ?? 0;
}

export function runView(cell: Cell, r: Run) {
  const spec = r.spec as CrewRunSpec;
  return {
    run_id: r.run_id, kind: r.kind, crew_id: r.crew_id, formation_id: spec?.formation_id ?? null, workspace_id: r.workspace_id,
    requester: r.requester, state: r.state, graph_hash: r.graph_hash, input: spec?.input ?? null, output: r.output, error: r.error,
    investigate: (r.flags['investigate'] ?? null) as unknown, flags: r.flags, coordinator: r.coordinator, checked_cell_id: cell.config.cellId,
    max_duration_ms: spec?.max_duration_ms ?? DEFAULT_MAX_DURATION_MS, max_tokens: spec?.max_tokens ?? null, tokens_used: runTokens(cell, r.run_id),
    pending_approvals: isTerminal(r.state) ? [] : pendingApprovals(cell, r.run_id).map((p) => ({
      ...p, due: p.due === null ? null : iso(p.due), requested_at: iso(p.requested_at), decisions: stepDecisions(cell, r.run_id, p.step_id),
    })),
    created_at: iso(r.created_at), updated_at: iso(r.updated_at), finished_at: r.finished_at === null ? null : iso(r.finished_at),
  };
}
