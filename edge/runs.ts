/**
 * Offline runs on the device: one directory per run under DATA/runs/RUN_ID,
 *   run.json      the run record (state, outcome, output, reason)
 *   journal.json  the device-signed journal records and the step values by hash
 * both rewritten durably after every journal append, so an acknowledged step
 * survives a crash. Budgets: DATA/budgets.json holds what each agent spent
 * against the ceiling the crew bundle carries.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { JournalRecord } from '../core/journal/record.ts';
import type { BudgetPort } from '../core/engine/types.ts';
import type { WireReason } from '../core/reasons.ts';
import { grantTokens } from '../core/engine/budget.ts';
import { RUN_ID_PATTERN } from '../core/run-id.ts';
import { paths, writeFileDurable } from './files.ts';

export interface RunFile {
  run_id: string;
  /** The nonce the run id is derived from with the device id (bundles/run-id.ts); absent on runs of older releases. */
  run_nonce?: string;
  crew_id: string;
  graph_hash: string;
  requester: string;
  /** The actors of the token the run was requested with (RFC 8693 `act`, current first): two-person approvals exclude them too. */
  requester_actors?: string[];
  /** The run's input, kept so a run interrupted by a crash is driven again from its journal. */
  input: unknown;
  state: 'running' | 'completed' | 'failed' | 'refused' | 'cancelled' | 'waiting';
  output: unknown;
  reason: WireReason | null;
  steps: number;
  created_at: number;
  updated_at: number;
  /** Who asked to cancel the run (its requester): the engine stops before its next call, and the run ends cancelled. */
  cancel_requested_by?: string;
}

export interface JournalFile {
  records: JournalRecord[];
  values: Record<string, unknown>;
}

export const runDir = (dir: string, runId: string) => join(paths(dir).runs, runId);

export function writeRun(dir: string, run: RunFile): void {
  writeFileDurable(join(runDir(dir, run.run_id), 'run.json'), JSON.stringify(run, null, 1) + '\n');
}

export function writeJournal(dir: string, runId: string, j: JournalFile): void {
  writeFileDurable(join(runDir(dir, runId), 'journal.json'), JSON.stringify(j) + '\n');
}

/** Every run on the device, oldest first (the run list route, and the runs a start continues). */
export function deviceRuns(dir: string): { run: RunFile; journal: JournalFile }[] {
  const root = paths(dir).runs;
  if (!existsSync(root)) return [];
  return readdirSync(root)
    .filter((id) => RUN_ID_PATTERN.test(id))
    .map((id) => readRun(dir, id))
    .filter((r): r is NonNullable<typeof r> => r !== null)
    .sort((a, b) => a.run.created_at - b.run.created_at || (a.run.run_id < b.run.run_id ? -1 : 1));
}

/** Ids of runs still marked running (interrupted by a crash or a stop) or waiting (a backoff, a timer), oldest first. */
export function interruptedRuns(dir: string): string[] {
  return deviceRuns(dir)
    .filter((r) => r.run.state === 'running' || r.run.state === 'waiting')
    .map((r) => r.run.run_id);
}

export function readRun(dir: string, runId: string): { run: RunFile; journal: JournalFile } | null {
  if (!RUN_ID_PATTERN.test(runId)) return null;
  const d = runDir(dir, runId);
  if (!existsSync(join(d, 'run.json'))) return null;
  const run = JSON.parse(readFileSync(join(d, 'run.json'), 'utf8')) as RunFile;
  const journal = existsSync(join(d, 'journal.json'))
    ? (JSON.parse(readFileSync(join(d, 'journal.json'), 'utf8')) as JournalFile)
    : { records: [], values: {} };
  return { run, journal };
}

/** What each agent has spent on the device: read, and added to durably (edge/offline.ts keeps it in the sealed state). */
export interface SpentBook {
  of(agentId: string): number;
  /** Adds `tokens` to what the agent has spent; durable when it returns. */
  add(agentId: string, tokens: number): void;
}

/** The device's budget ledgers: ceilings from the crew bundle, spending in `book`. */
export function deviceBudget(ceilings: Record<string, number>, book: SpentBook): BudgetPort {
  const open = new Map<string, { agent: string; amount: number }>();
  let n = 0;
  const reservedFor = (agent: string) => [...open.values()].filter((r) => r.agent === agent).reduce((a, r) => a + r.amount, 0);
  return {
    async hasLedger(agentId) {
      return Object.hasOwn(ceilings, agentId);
    },
    async reserve(agentId, amount, _ref, minimum = amount) {
      const ceiling = ceilings[agentId];
      if (ceiling === undefined) return { ok: false, reason: 'no_budget_ledger' };
      // As the cell's ledger: max_tokens, or what is left down to the floor (core/engine/budget.ts).
      const granted = grantTokens(amount, ceiling - book.of(agentId) - reservedFor(agentId), minimum);
      if (granted === null) return { ok: false, reason: 'budget_exceeded' };
      const id = `res_${++n}`;
      open.set(id, { agent: agentId, amount: granted });
      return { ok: true, reservation_id: id, amount: granted };
    },
    async commit(reservationId, actual) {
      const r = open.get(reservationId);
      if (!r) return;
      open.delete(reservationId);
      book.add(r.agent, actual);
    },
  };
}
