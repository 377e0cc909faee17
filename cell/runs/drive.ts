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
import type { JsonObject } from '../../core/journal/record.ts';
import type { RunsContext } from './context.ts';
import { registerDriver, type DriverHandle } from './control.ts';
import { TERMINAL_KIND, appendJournal, finishRun, getBlob, putRunBlob, storageRunError } from './journal.ts';
import { storageLimitOf } from './storage.ts';
import { recordsOfKinds } from './repository.ts';
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
  /** Maps a completed result's output to what the run row stores (default: the output as is); may read the journal (async). */
  finalOutput?(result: RunResult): unknown;
}

export interface DriveResult {
  state: RunState;
  result: RunResult | null;
}

/** Journal kinds whose records hold a step's recorded output. */
const RECORDED_KINDS = ['step', 'decision', 'run_started'] as const;

/** The recorded output of a completed step (kind step or decision), read from the journal. */
export async function recordedStep(ctx: RunsContext, runId: string, stepId: string): Promise<RecordedStep | undefined> {
  const recs = await recordsOfKinds(ctx.core.store, runId, RECORDED_KINDS);
  let rec: (typeof recs)[number] | undefined;
  for (const r of recs) if (r.step_id === stepId) rec = r;
  if (!rec) return undefined;
  const output = await getBlob(ctx, rec.output_hash);
  return { output: output === undefined ? null : output, ...(rec.data !== undefined ? { data: rec.data } : {}) };
}

/**
 * The recorded steps of a run for one drive: loaded once from the journal when
 * the drive starts (one query, not one scan per step), then kept current by
 * the drive's own appends. Answers exactly as recordedStep would (the latest
 * record of kind step, decision or run_started for the step id), since only
 * the run's driver appends records of those kinds.
 */
class RecordedIndex {
  readonly #byStep = new Map<string, { outputHash: string | null; output?: unknown; data?: JsonObject }>();
  private constructor(private readonly ctx: RunsContext) {}

  static async load(ctx: RunsContext, runId: string): Promise<RecordedIndex> {
    const idx = new RecordedIndex(ctx);
    for (const rec of await recordsOfKinds(ctx.core.store, runId, RECORDED_KINDS)) {
      idx.#byStep.set(rec.step_id, { outputHash: rec.output_hash, ...(rec.data !== undefined ? { data: rec.data } : {}) });
    }
    return idx;
  }

  noteAppend(kind: string, stepId: string, output: unknown, data: JsonObject | undefined): void {
    if (!(RECORDED_KINDS as readonly string[]).includes(kind)) return;
    // As stored: the blob is JSON (undefined members dropped), read back as null when absent.
    const out = output === undefined ? null : (JSON.parse(JSON.stringify(output)) as unknown);
    this.#byStep.set(stepId, { outputHash: null, output: out, ...(data !== undefined ? { data } : {}) });
  }

  async get(stepId: string): Promise<RecordedStep | undefined> {
    const e = this.#byStep.get(stepId);
    if (!e) return undefined;
    let output = e.output;
    if (e.outputHash !== null) {
      const b = await getBlob(this.ctx, e.outputHash);
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
 * never rejects for a run-level failure (that is recorded on the run). A
 * decision recorded while it drove (requestWake) makes it drive again rather
 * than leave the run waiting: it may have read the decisions before that one.
 */
export async function driveRun(
  ctx: RunsContext,
  runId: string,
  graph: Graph,
  ports: DrivePorts,
  input: unknown,
  opts: DriveOptions,
): Promise<DriveResult> {
  for (;;) {
    const handle = registerDriver(ctx, runId);
    let r: DriveResult;
    let wake: boolean;
    try {
      r = await driveOnce(ctx, handle, runId, graph, ports, input, opts);
    } finally {
      wake = handle.release();
    }
    if (r.state !== 'waiting' || !wake) return r;
  }
}

async function driveOnce(
  ctx: RunsContext,
  handle: DriverHandle,
  runId: string,
  graph: Graph,
  ports: DrivePorts,
  input: unknown,
  opts: DriveOptions,
): Promise<DriveResult> {
  const { clock, config, log } = ctx.core;
  const stateNow = async (): Promise<RunState> => (await getRun(ctx, runId))?.state ?? 'failed';
  const graphHash = opts.graphHash ?? contentHash(graph);
  const moved = await setRunState(ctx, runId, 'running', { graph_hash: graphHash, coordinator: config.cellId });
  if (!moved) return { state: await stateNow(), result: null };
  let engineFinal: JsonObject | undefined;
  const recorded = await RecordedIndex.load(ctx, runId);
  const enginePorts: EnginePorts = {
    ...ports,
    clock,
    isCancelled: () => handle.signal.aborted,
    recorded: async (stepId) => recorded.get(stepId),
    journal: {
      async append(fields, payload) {
        // The run's last record is written by finishRun together with the state change.
        if (fields.kind === TERMINAL_KIND) {
          engineFinal = fields.data ?? {};
          await putRunBlob(ctx, runId, payload.output);
          return;
        }
        await appendJournal(ctx, runId, { ...fields }, [payload.input, payload.output]);
        recorded.noteAppend(fields.kind, fields.step_id, payload.output, fields.data);
      },
    },
  };
  let result: RunResult;
  try {
    result = await runGraph(graph, input, enginePorts, {
      run_id: runId,
      graph_hash: graphHash,
      requester: opts.requester,
      ...(opts.context !== undefined ? { context: opts.context } : {}),
    });
  } catch (err) {
    log.error('run drive failed', { run_id: runId, error: err instanceof Error ? (err.stack ?? err.message) : String(err) });
    await finishRun(ctx, runId, 'failed', {
      error: { code: 'internal_error', message: 'the run failed unexpectedly', reason: 'engine_error' },
    });
    return { state: await stateNow(), result: null };
  }
  if (result.cause !== undefined && result.outcome === 'failed') {
    const c = result.cause;
    log.warn('run step failed', { run_id: runId, reason: result.reason, error: c instanceof Error ? c.message : String(c) });
  }
  const extra: JsonObject = { ...(engineFinal ?? {}), steps: result.steps };
  if (handle.signal.aborted && handle.cancelledBy() !== null) {
    await finishRun(ctx, runId, 'cancelled', {
      error: { code: 'cancelled', message: 'the run was cancelled', reason: 'cancelled' },
      data: { ...extra, reason: 'cancelled', by: handle.cancelledBy() },
    });
  } else if (result.outcome === 'completed') {
    await finishRun(ctx, runId, 'completed', { output: opts.finalOutput ? await opts.finalOutput(result) : result.output, data: extra });
  } else if (result.outcome === 'waiting') {
    await setRunState(ctx, runId, 'waiting');
  } else if (handle.signal.aborted) {
    // Stopped because the cell is shutting down: leave the run for recovery.
  } else if (result.outcome === 'failed' && storageLimitOf(result.cause) !== undefined) {
    // A payload was refused by a storage limit (nothing of it was written): that is the run's error.
    const error = storageRunError(storageLimitOf(result.cause)!);
    await finishRun(ctx, runId, 'failed', { error, data: { ...extra, reason: error.reason ?? null } });
  } else {
    const error = (opts.describeError ?? defaultError)(result);
    await finishRun(ctx, runId, result.outcome, { error, data: { ...extra, reason: error.reason ?? result.reason ?? null } });
  }
  return { state: await stateNow(), result };
}

/** True when a run's state allows driving it (not terminal). */
export async function drivable(ctx: RunsContext, runId: string): Promise<boolean> {
  const r = await getRun(ctx, runId);
  return r !== undefined && !isTerminal(r.state);
}
