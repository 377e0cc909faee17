/**
 * driveRun: runs a graph on the engine (core/engine runGraph) for a run of the
 * `runs` table, with the engine's journal port bound to this cell's durable,
 * signed journal (appendJournal) and event stream, cancellation bound to the
 * run's control (requestCancel), and recorded step outputs read back from the
 * journal so a re-drive (recovery, a waiting run woken up) never re-executes a
 * completed step.
 *
 * The caller supplies the other ports (model, tools, approvals, budget,
 * contracts). The outcome is recorded on the run: completed / failed / refused
 * / cancelled end it with a `run_finished` record (finishRun); `waiting` moves
 * it to state waiting and returns, and the caller drives it again later.
 */
import { contentHash } from '../../core/canonical.ts';
import { runGraph } from '../../core/engine/run.ts';
import type { EnginePorts, Graph, RecordedStep, RunResult } from '../../core/engine/types.ts';
import type { JournalRecord, JsonObject } from '../../core/journal/record.ts';
import type { Cell } from '../context.ts';
import { registerDriver } from './control.ts';
import { TERMINAL_KIND, appendJournal, finishRun, getBlob, putRunBlob, storageRunError } from './journal.ts';
import { storageLimitOf } from './storage.ts';
import { getRun, isTerminal, setRunState, type RunError, type RunState } from './runs.ts';

export type DrivePorts = Omit<EnginePorts, 'journal' | 'clock' | 'isCancelled' | 'recorded'>;

export interface DriveOptions {
  /** The principal that started the run (from the session). */
  requester: string;
  /** The compiler's graph hash; defaults to the content hash of the graph. */
  graphHash?: string;
  /** Extra CEL `context` values. */
  context?: JsonObject;
  /** Maps a failed/refused result to the run's error (default: code failed/refused, reason from the engine). */
  describeError?(result: RunResult): RunError;
  /** Maps a completed result's output to what the run row stores (default: the output as is). */
  finalOutput?(result: RunResult): unknown;
}

export interface DriveResult {
  state: RunState;
  result: RunResult | null;
}

/** The recorded output of a completed step (kind step or decision), read from the journal. */
export function recordedStep(cell: Cell, runId: string, stepId: string): RecordedStep | undefined {
  const row = cell.store.get<{ record: string }>(
    "SELECT record FROM journal WHERE run_id = ? AND kind IN ('step', 'decision', 'run_started') AND json_extract(record, '$.step_id') = ? ORDER BY seq DESC LIMIT 1",
    [runId, stepId]);
  if (!row) return undefined;
  const rec = JSON.parse(row.record) as JournalRecord;
  const output = getBlob(cell, rec.output_hash);
  return { output: output === undefined ? null : output, ...(rec.data !== undefined ? { data: rec.data } : {}) };
}

const RECORDED_KINDS = new Set(['step', 'decision', 'run_started']);

/**
 * The recorded steps of a run for one drive: loaded once from the journal when
 * the drive starts (one query, not one scan per step), then kept current by
 * the drive's own appends. Answers exactly as recordedStep would (the latest
 * record of kind step, decision or run_started for the step id), since only
 * the run's driver appends records of those kinds.
 */
class RecordedIndex {
  readonly #byStep = new Map<string, { outputHash: string | null; output?: unknown; data?: JsonObject }>();
  constructor(private readonly cell: Cell, runId: string) {
    const rows = cell.store.all<{ record: string }>(
      "SELECT record FROM journal WHERE run_id = ? AND kind IN ('step', 'decision', 'run_started') ORDER BY seq", [runId]);
    for (const row of rows) {
      const rec = JSON.parse(row.record) as JournalRecord;
      this.#byStep.set(rec.step_id, { outputHash: rec.output_hash, ...(rec.data !== undefined ? { data: rec.data } : {}) });
    }
  }
  noteAppend(kind: string, stepId: string, output: unknown, data: JsonObject | undefined): void {
    if (!RECORDED_KINDS.has(kind)) return;
    // As stored: the blob is JSON (undefined members dropped), read back as null when absent.
    const out = output === undefined ? null : JSON.parse(JSON.stringify(output)) as unknown;
    this.#byStep.set(stepId, { outputHash: null, output: out, ...(data !== undefined ? { data } : {}) });
  }
  get(stepId: string): RecordedStep | undefined {
    const e = this.#byStep.get(stepId);
    if (!e) return undefined;
    let output = e.output;
    if (e.outputHash !== null) {
      const b = getBlob(this.cell, e.outputHash);
      output = b === undefined ? null : b;
    }
    return { output: output ?? null, ...(e.data !== undefined ? { data: e.data } : {}) };
  }
}

function defaultError(r: RunResult): RunError {
  const reason = r.reason ?? r.outcome;
  return {
    code: r.outcome === 'refused' ? 'refused' : r.outcome === 'cancelled' ? 'cancelled' : 'failed',
    message: r.outcome === 'refused' ? `the run was refused: ${reason}` : `the run failed: ${reason}`,
    reason,
    ...(r.details !== undefined ? { details: r.details } : {}),
  };
}

/**
 * Drives `runId` until it ends or waits. Resolves with the state it reached;
 * never rejects for a run-level failure (that is recorded on the run).
 */
export async function driveRun(cell: Cell, runId: string, graph: Graph, ports: DrivePorts, input: unknown, opts: DriveOptions): Promise<DriveResult> {
  const handle = registerDriver(cell, runId);
  try {
    const graphHash = opts.graphHash ?? contentHash(graph);
    const moved = await setRunState(cell, runId, 'running', { graph_hash: graphHash, coordinator: cell.config.cellId });
    if (!moved) return { state: getRun(cell, runId)?.state ?? 'failed', result: null };
    let engineFinal: JsonObject | undefined;
    const recorded = new RecordedIndex(cell, runId);
    const enginePorts: EnginePorts = {
      ...ports,
      clock: cell.clock,
      isCancelled: () => handle.signal.aborted,
      recorded: async (stepId) => recorded.get(stepId),
      journal: {
        async append(fields, payload) {
          // The run's last record is written by finishRun together with the state change.
          if (fields.kind === TERMINAL_KIND) { engineFinal = fields.data ?? {}; await putRunBlob(cell, runId, payload.output); return; }
          await appendJournal(cell, runId, { ...fields }, [payload.input, payload.output]);
          recorded.noteAppend(fields.kind, fields.step_id, payload.output, fields.data);
        },
      },
    };
    let result: RunResult;
    try {
      result = await runGraph(graph, input, enginePorts, {
        run_id: runId, graph_hash: graphHash, requester: opts.requester,
        ...(opts.context !== undefined ? { context: opts.context } : {}),
      });
    } catch (err) {
      cell.log.error('run drive failed', { run_id: runId, error: err instanceof Error ? (err.stack ?? err.message) : String(err) });
      await finishRun(cell, runId, 'failed', { error: { code: 'internal_error', message: 'the run failed unexpectedly', reason: 'engine_error' } });
      return { state: getRun(cell, runId)?.state ?? 'failed', result: null };
    }
    if (result.cause !== undefined && result.outcome === 'failed') {
      const c = result.cause;
      cell.log.warn('run step failed', { run_id: runId, reason: result.reason, error: c instanceof Error ? c.message : String(c) });
    }
    const extra: JsonObject = { ...(engineFinal ?? {}), steps: result.steps };
    if (handle.signal.aborted && handle.cancelledBy() !== null) {
      await finishRun(cell, runId, 'cancelled', { error: { code: 'cancelled', message: 'the run was cancelled', reason: 'cancelled' }, data: { ...extra, reason: 'cancelled', by: handle.cancelledBy() } });
    } else if (result.outcome === 'completed') {
      await finishRun(cell, runId, 'completed', { output: opts.finalOutput ? opts.finalOutput(result) : result.output, data: extra });
    } else if (result.outcome === 'waiting') {
      await setRunState(cell, runId, 'waiting');
    } else if (handle.signal.aborted) {
      // Stopped because the cell is shutting down: leave the run for recovery.
    } else if (result.outcome === 'failed' && storageLimitOf(result.cause) !== undefined) {
      // A payload was refused by a storage limit (nothing of it was written): that is the run's error.
      const error = storageRunError(storageLimitOf(result.cause)!);
      await finishRun(cell, runId, 'failed', { error, data: { ...extra, reason: error.reason ?? null } });
    } else {
      const error = (opts.describeError ?? defaultError)(result);
      await finishRun(cell, runId, result.outcome, { error, data: { ...extra, reason: error.reason ?? result.reason ?? null } });
    }
    const state = getRun(cell, runId)?.state ?? 'failed';
    return { state, result };
  } finally {
    handle.release();
  }
}

/** True when a run's state allows driving it (not terminal). */
export function drivable(cell: Cell, runId: string): boolean {
  const r = getRun(cell, runId);
  return r !== undefined && !isTerminal(r.state);
}
