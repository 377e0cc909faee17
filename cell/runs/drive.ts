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
import type { EnginePorts, Graph, JournalAppend, RecordedStep, RunResult } from '../../core/engine/types.ts';
import type { JsonObject } from '../../core/journal/record.ts';
import type { RunsContext } from './context.ts';
import { driverSignal, registerDriver, type DriverHandle } from './control.ts';
import { publishDelta } from './events.ts';
import {
  TERMINAL_KIND,
  appendJournal,
  appendJournalBatch,
  commitStaged,
  completeRefusal,
  dropStaged,
  endRun,
  flushStaged,
  getBlob,
  readJournal,
  RunClosedError,
  stageRunBlob,
  stamped,
  storageRunError,
  type AppendEntry,
  type EndState,
  type FinishOptions,
} from './journal.ts';
import { claimRun, dropLease, LeaseLostError, releaseToWaiting, type Claim, type Fence } from './lease.ts';
import { verifyJournal, type JournalVerdict } from '../../core/journal/verify.ts';
import { storageLimitOf, storageRefusal } from './storage.ts';
import { decisionCount, recordsOfKinds } from './repository.ts';
import { getRun, isTerminal, setRunFlags, type RunError, type RunState } from './runs.ts';
import { isServiceError } from '../../core/errors.ts';
import { inRunSpan } from './trace.ts';
import { outcomesPort } from './outcomes.ts';

/** Backoff between attempts to drive a run again after a store outage, ms (doubling up to the last). */
export const OUTAGE_RETRY_MS = [250, 500, 1_000, 2_000, 5_000] as const;

/**
 * Waits before attempt `attempt + 1` of something a store outage stopped: the
 * attempt's OUTAGE_RETRY_MS step, jittered to half to whole of it so the
 * waiters of one outage do not come back at once. `unref`: the wait does not
 * keep the process alive (a background retry).
 */
export function outageWait(attempt: number, o: { unref?: boolean } = {}): Promise<void> {
  const base = OUTAGE_RETRY_MS[Math.min(attempt, OUTAGE_RETRY_MS.length - 1)]!;
  return new Promise((res) => {
    const t = setTimeout(res, base / 2 + Math.random() * (base / 2));
    if (o.unref) t.unref();
  });
}

/**
 * True when `err` (or what caused it) is the store being unreachable for a
 * moment: the connection was lost, a commit's outcome is unknown, or writes
 * kept conflicting. A drive stopped by one is not the run's failure: the run
 * stays as its journal says, and the drive starts again from the journal.
 */
export function isStoreOutage(err: unknown): boolean {
  for (let e = err, depth = 0; e !== undefined && e !== null && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if (isServiceError(e) && e.code === 'service_unavailable') {
      const reason = (e.details as { reason?: unknown } | undefined)?.reason;
      if (reason === 'connection_lost' || reason === 'commit_unknown' || reason === 'write_conflict') return true;
    }
  }
  return false;
}

/** Why a write was refused for a moment, when nothing of it was kept (so it may simply be written again). */
function retryableInPlace(err: unknown): boolean {
  for (let e = err, depth = 0; e !== undefined && e !== null && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if (isServiceError(e) && e.code === 'service_unavailable') {
      const reason = (e.details as { reason?: unknown } | undefined)?.reason;
      // commit_unknown is not: the record may be in the journal already (the re-drive reads it back).
      return reason === 'connection_lost' || reason === 'write_conflict';
    }
  }
  return false;
}

/**
 * Runs a driver's write until it is kept: a conflict that outlasted the
 * store's own retries, or a connection lost before the commit, is written
 * again here (with backoff) rather than stopping the drive, so what the drive
 * holds in memory (a model's answer) is kept and no call is issued again.
 * A lost lease, a closed run, an unknown commit outcome or the cell stopping
 * end it.
 */
async function keptWrite<T>(ctx: RunsContext, runId: string, write: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await write();
    } catch (err) {
      if (!retryableInPlace(err) || ctx.stopping) throw err;
      if (attempt === 0) ctx.core.log.warn('a run write was refused for now; writing it again', { run_id: runId, error: err });
      await outageWait(attempt);
      if (ctx.stopping) throw err;
    }
  }
}

/**
 * Runs `fn`, the part of a call made after its intent is journaled and before
 * its request leaves the process (the reads that resolve the agent, its
 * provider and secret), again while the store is unreachable, as long as this
 * process drives the run. Stopped by an outage there, the drive would be
 * driven again and find the intent without a result: the call would count as
 * in flight and be re-issued, though it never left. `fn` must not act outside
 * the process before its last store read (a model call qualifies: a
 * provider's failure is never a store outage).
 */
export async function beforeItLeaves<T>(ctx: RunsContext, runId: string, fn: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      const signal = driverSignal(ctx, runId);
      if (!isStoreOutage(err) || ctx.stopping || signal === undefined || signal.aborted) throw err;
      if (attempt === 0) ctx.core.log.warn('a call of a run waits for the store before it leaves', { run_id: runId });
      await outageWait(attempt);
      if (ctx.stopping || signal.aborted) throw err;
    }
  }
}

function commitUnknown(err: unknown): boolean {
  return (
    isServiceError(err) &&
    err.code === 'service_unavailable' &&
    (err.details as { reason?: unknown } | undefined)?.reason === 'commit_unknown'
  );
}

/**
 * Runs a write of the driver; if its COMMIT's outcome is unknown (the connection was cut during it, and
 * the store could not ask afterwards), once the store answers `kept` says whether it was kept (only this
 * driver writes the run under its lease), and if not it is written again. So the answer the drive holds
 * (a model's) is kept, and a call is neither issued again nor counted as in flight, as it would be by
 * a re-drive from the journal. `kept` reads, for an append, the run's last record (appendKept); for
 * writes staged alone, what they wrote (StagedWrite.kept); null for a write that finds it out itself
 * (a run's end: endRun ends a run once, and answers null when it had ended).
 */
async function keptIfUnknown(
  ctx: RunsContext,
  runId: string,
  write: () => Promise<unknown>,
  kept: (() => Promise<boolean>) | null,
): Promise<void> {
  let err: unknown;
  try {
    await write();
    return;
  } catch (e) {
    if (!commitUnknown(e)) throw e;
    err = e;
  }
  for (let attempt = 0; attempt < 20 && !ctx.stopping; attempt++) {
    const base = OUTAGE_RETRY_MS[Math.min(attempt, OUTAGE_RETRY_MS.length - 1)]!;
    await new Promise((res) => setTimeout(res, base));
    try {
      if (kept !== null && (await kept())) {
        // Kept, with the writes staged for the run: the drive stages nothing while it waits here.
        dropStaged(ctx, runId);
        return;
      }
      await write();
      return;
    } catch (e) {
      if (e instanceof LeaseLostError || !(isStoreOutage(e) || commitUnknown(e))) throw e;
      err = e;
    }
  }
  throw err;
}

/** Whether an append ending with `fields` was kept: the run's last record is its last. */
function appendKept(ctx: RunsContext, runId: string, fields: { kind: string; step_id: string }): () => Promise<boolean> {
  return async () => {
    const last = (await readJournal(ctx, runId, 0, 10_000_000)).at(-1);
    return last?.kind === fields.kind && last.step_id === fields.step_id;
  };
}

/**
 * A driver's append of `entries` (held-back records, with the writes staged for the run): written
 * again while the store is unreachable before the COMMIT, and, when the COMMIT's outcome is unknown,
 * once the journal says whether it was kept.
 */
function appendHeld(ctx: RunsContext, runId: string, entries: AppendEntry[], fence: Fence): Promise<void> {
  const write = () => keptWrite(ctx, runId, () => appendJournalBatch(ctx, runId, entries, fence));
  return keptIfUnknown(ctx, runId, write, appendKept(ctx, runId, entries.at(-1)!.fields));
}

export type DrivePorts = Omit<EnginePorts, 'journal' | 'clock' | 'isCancelled' | 'recorded'>;

export interface DriveOptions {
  /** The principal that started the run (from the session). */
  requester: string;
  /** The actors of the token it started the run with (runs.ts requesterOf): two-person approvals exclude them too. */
  requesterActors?: readonly string[] | undefined;
  /** The compiler's graph hash; defaults to the content hash of the graph. */
  graphHash?: string;
  /** Extra CEL `context` values. */
  context?: JsonObject;
  /** Maps a failed/refused result to the run's error (default: code failed/refused, reason from the engine). */
  describeError?(result: RunResult): RunError;
  /** Maps a completed result's output to what the run row stores (default: the output as is); may read the journal (async). */
  finalOutput?(result: RunResult): unknown;
  /** Claim the run even from a holder whose heartbeat has not lapsed (an operator's recover; fencing keeps it safe). */
  forceClaim?: boolean;
  /** A fork's replacement input of the node it was forked at (core/engine RunOptions.replace). */
  replace?: { step_id: string; input: unknown };
  /** Called once this drive took the run over from a driver that stopped (its journal verified), before any step runs. */
  onTakeover?(previousOwner: string | null): Promise<void>;
  /** The name a crew run's span gives its agent (the crew's name: `invoke_agent {name}`, `gen_ai.agent.name`). */
  agentName?: string;
  /**
   * The run was recorded claimed by this cell with its first record only, in its creating transaction
   * (opening.ts recordDrivenRunTx): the first drive takes this as its claim and reads neither the journal
   * nor the decisions of a run that has none. A drive again (after a store outage) claims as any.
   */
  claimed?: Fence;
}

export interface DriveResult {
  state: RunState;
  result: RunResult | null;
}

/** Journal kinds whose records hold a step's recorded output. */
const RECORDED_KINDS = ['step', 'decision', 'run_started'] as const;

/** Journal kind of the record written right before a model or tool call (core/engine beginCall). */
const INTENT_KIND = 'intent';

/** Journal kind of the end of one attempt of a call under a retry policy (closes its intent; core/engine internal/attempts.ts). */
const ATTEMPT_KIND = 'attempt';

/** The recorded output of a completed step (kind step or decision), read from the journal. */
export async function recordedStep(ctx: RunsContext, runId: string, stepId: string): Promise<RecordedStep | undefined> {
  const recs = await recordsOfKinds(ctx.core.store, runId, RECORDED_KINDS);
  let rec: (typeof recs)[number] | undefined;
  for (const r of recs) if (r.step_id === stepId) rec = r;
  if (!rec) return undefined;
  const output = await getBlob(ctx, rec.output_hash);
  return {
    output: output === undefined ? null : output,
    input_hash: rec.input_hash,
    ...(rec.data !== undefined ? { data: rec.data } : {}),
  };
}

/**
 * The recorded steps of a run for one drive: loaded once from the journal when
 * the drive starts (one query, not one scan per step), then kept current by
 * the drive's own appends. Answers exactly as recordedStep would (the latest
 * record of kind step, decision or run_started for the step id), since only
 * the run's driver appends records of those kinds.
 */
class RecordedIndex {
  readonly #byStep = new Map<string, { outputHash: string | null; inputHash: string; output?: unknown; data?: JsonObject }>();
  /** Calls started (an `intent` record) and not finished (no recorded output after it), per step id. */
  readonly #open = new Map<string, number>();
  /** Attempts recorded per call step id, and the due time of the next one. */
  readonly #attempts = new Map<string, { count: number; retry_at: number | null }>();
  private constructor(private readonly ctx: RunsContext) {}

  /** The index of a run whose journal holds none of the kinds it follows. */
  static empty(ctx: RunsContext): RecordedIndex {
    return new RecordedIndex(ctx);
  }

  static async load(ctx: RunsContext, runId: string): Promise<RecordedIndex> {
    const idx = new RecordedIndex(ctx);
    for (const rec of await recordsOfKinds(ctx.core.store, runId, [...RECORDED_KINDS, INTENT_KIND, ATTEMPT_KIND])) {
      if (rec.kind === INTENT_KIND) {
        idx.#open.set(rec.step_id, (idx.#open.get(rec.step_id) ?? 0) + 1);
        continue;
      }
      if (rec.kind === ATTEMPT_KIND) {
        idx.#noteAttempt(rec.step_id, rec.data);
        continue;
      }
      idx.#open.delete(rec.step_id);
      idx.#byStep.set(rec.step_id, {
        outputHash: rec.output_hash,
        inputHash: rec.input_hash,
        ...(rec.data !== undefined ? { data: rec.data } : {}),
      });
    }
    return idx;
  }

  /** The engine's intents port: calls of the step that were in flight when earlier drives stopped. */
  intents(stepId: string): number {
    return this.#open.get(stepId) ?? 0;
  }

  /** The engine's attempts port. */
  attempts(stepId: string): { count: number; retry_at: number | null } {
    return this.#attempts.get(stepId) ?? { count: 0, retry_at: null };
  }

  #noteAttempt(stepId: string, data: JsonObject | undefined): void {
    this.#open.delete(stepId);
    const at = data?.['retry_at'];
    this.#attempts.set(stepId, { count: this.attempts(stepId).count + 1, retry_at: typeof at === 'number' ? at : null });
  }

  noteAppend(kind: string, stepId: string, inputHash: string, output: unknown, data: JsonObject | undefined): void {
    if (kind === ATTEMPT_KIND) {
      this.#noteAttempt(stepId, data);
      return;
    }
    if (kind === INTENT_KIND) {
      this.#open.set(stepId, (this.#open.get(stepId) ?? 0) + 1);
      return;
    }
    if (!(RECORDED_KINDS as readonly string[]).includes(kind)) return;
    this.#open.delete(stepId);
    // As stored: the blob is JSON (undefined members dropped), read back as null when absent.
    const out = output === undefined ? null : (JSON.parse(JSON.stringify(output)) as unknown);
    this.#byStep.set(stepId, { outputHash: null, inputHash, output: out, ...(data !== undefined ? { data } : {}) });
  }

  async get(stepId: string): Promise<RecordedStep | undefined> {
    const e = this.#byStep.get(stepId);
    if (!e) return undefined;
    let output = e.output;
    if (e.outputHash !== null) {
      const b = await getBlob(this.ctx, e.outputHash);
      output = b === undefined ? null : b;
    }
    return { output: output ?? null, input_hash: e.inputHash, ...(e.data !== undefined ? { data: e.data } : {}) };
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
  try {
    let outages = 0;
    let claimed = opts.claimed;
    for (;;) {
      const handle = registerDriver(ctx, runId);
      let r: DriveResult;
      let decisions: number;
      const fresh = claimed;
      claimed = undefined;
      try {
        // A decision recorded on another cell while this one drives cannot wake this drive
        // (requestWake is per process): a count that grew meanwhile makes it look again.
        decisions = fresh ? 0 : await decisionCount(ctx.core.store, runId);
        r = await driveOnce({ ctx, handle, runId, graph, ports, input, opts, fresh });
      } catch (err) {
        handle.release();
        // The store went away under the drive (a database restart, a network cut): the run is left as
        // its journal says, under this cell's lease, and driven again from the journal once the store
        // answers; no finished step runs again. A peer may take it over meanwhile: then the claim fails.
        if (!isStoreOutage(err) || ctx.stopping) throw err;
        const wait = OUTAGE_RETRY_MS[Math.min(outages++, OUTAGE_RETRY_MS.length - 1)]!;
        ctx.core.log.warn('store unreachable during a run; driving it again from its journal', { run_id: runId, retry_ms: wait });
        await new Promise((res) => setTimeout(res, wait));
        if (ctx.stopping) throw err;
        continue;
      }
      const wake = handle.release();
      if (r.state !== 'waiting') return r;
      if (!wake && (await decisionCount(ctx.core.store, runId)) === decisions) return r;
    }
  } finally {
    // The lease is kept from one drive to the next of this loop (an outage's re-drive is no takeover).
    dropLease(ctx, runId);
    await flushStaged(ctx, runId).catch((e: unknown) =>
      ctx.core.log.warn('writes staged for a run were not kept', { run_id: runId, error: e }),
    );
  }
}

/** One drive of driveRun's loop: what driveOnce and driveClaimed drive, and with what. */
interface Drive {
  ctx: RunsContext;
  handle: DriverHandle;
  runId: string;
  graph: Graph;
  ports: DrivePorts;
  input: unknown;
  opts: DriveOptions;
  /** The claim the run was recorded with, for the first drive of a run recorded claimed (DriveOptions.claimed). */
  fresh: Fence | undefined;
}

async function driveOnce(d: Drive): Promise<DriveResult> {
  const { ctx, runId, graph, ports, opts } = d;
  const { log } = ctx.core;
  const stateNow = async (): Promise<RunState> => (await getRun(ctx, runId))?.state ?? 'failed';
  const graphHash = opts.graphHash ?? contentHash(graph);
  const claim: Claim = d.fresh
    ? { ok: true, fence: d.fresh, takeover: false, previousOwner: null }
    : await claimRun(ctx, runId, graphHash, opts.forceClaim === true);
  // A run recorded refused at its start is never driven: it ends as its start decided.
  if (!claim.ok && claim.reason === 'refused_at_start') await completeRefusal(ctx, runId);
  if (!claim.ok) return { state: await stateNow(), result: null };
  const fence = claim.fence;
  try {
    // With spans exported, the drive runs in the run's span (runs/trace.ts) and the engine opens one per step.
    if (ctx.core.traces.spans)
      return await inRunSpan(ctx, runId, graph, claim.takeover, opts.agentName, (tracer) =>
        driveClaimed({ ...d, ports: { ...ports, tracer } }, graphHash, claim),
      );
    return await driveClaimed(d, graphHash, claim);
  } catch (err) {
    if (err instanceof RunClosedError) {
      // Ended elsewhere (cancelled on another cell, or finished by a driver that took it over): nothing more to write.
      log.info('run ended elsewhere; this cell stops driving it', { run_id: runId, state: err.state });
      ctx.claimedHere.delete(runId);
      return { state: await stateNow(), result: null };
    }
    if (!(err instanceof LeaseLostError)) throw err;
    // Another cell took the run over while this one was paused: nothing more is written here.
    log.warn('run lease lost; this cell stops driving the run', { run_id: runId, epoch: fence.epoch, owner: err.owner });
    ctx.claimedHere.delete(runId);
    return { state: await stateNow(), result: null };
  }
}

async function driveClaimed(d: Drive, graphHash: string, claim: Extract<Claim, { ok: true }>): Promise<DriveResult> {
  const { ctx, handle, runId, graph, ports, input, opts } = d;
  const fence = claim.fence;
  // The records the engine held back when it ended are written with the run's end (DriveEnd).
  const end = new DriveEnd(ctx, runId, fence);
  // The state this drive's finish left the run in; read only when no finish of its own ended it.
  const stateNow = async (): Promise<RunState> => end.ended ?? (await getRun(ctx, runId))?.state ?? 'failed';
  if (!(await takeClaim(ctx, runId, claim, opts, end))) return { state: await stateNow(), result: null };
  const writer = new StepWriter(ctx, runId, fence);
  ctx.writers.set(runId, writer.flush);
  try {
    // A run recorded claimed has only its opening record: nothing recorded to load.
    const recorded = d.fresh ? RecordedIndex.empty(ctx) : await RecordedIndex.load(ctx, runId);
    let result: RunResult;
    try {
      result = await runGraph(graph, input, writer.enginePorts(ports, handle, recorded), {
        run_id: runId,
        graph_hash: graphHash,
        requester: opts.requester,
        ...(opts.requesterActors?.length ? { requester_actors: [...opts.requesterActors] } : {}),
        ...(opts.context !== undefined ? { context: opts.context } : {}),
        ...(opts.replace !== undefined ? { replace: opts.replace } : {}),
      });
    } catch (err) {
      if (writer.lost) throw writer.lost;
      // Not the run's failure: driven again (driveRun), from a journal that holds every answer already had.
      if (isStoreOutage(err)) throw await keptBeforeRedrive(writer.flush, err);
      // What the engine recorded before it broke is kept.
      await writer.flush().catch(() => undefined);
      ctx.core.log.error('run drive failed', { run_id: runId, error: err });
      await end.finish('failed', { error: { code: 'internal_error', message: 'the run failed unexpectedly', reason: 'engine_error' } });
      return { state: await stateNow(), result: null };
    }
    if (writer.lost) throw writer.lost;
    if (result.cause !== undefined && result.outcome === 'failed') {
      const c = result.cause;
      ctx.core.log.warn('run step failed', { run_id: runId, reason: result.reason, error: c });
    }
    // A step or record refused by a store outage: not the run's failure (driveRun drives it again).
    if (result.outcome === 'failed' && isStoreOutage(result.cause)) throw await keptBeforeRedrive(writer.flush, result.cause);
    // Every path of endDrive ends the drive: what the engine held back is written with the run's end
    // (finish), or before the run is left waiting or for recovery.
    end.last = writer.takeDeferred();
    await endDrive(ctx, runId, handle, result, opts, end, { ...(writer.engineFinal ?? {}), steps: result.steps });
    return { state: await stateNow(), result };
  } finally {
    if (ctx.writers.get(runId) === writer.flush) ctx.writers.delete(runId);
  }
}

/**
 * How a drive ends the run: `finish` writes the run's last record and state (endRun), with the
 * records the engine held back (`last`, set once the engine has returned) in the same transaction,
 * and keeps the state it left the run in (`ended`: a terminal state is final, so the drive answers
 * it without reading the run back).
 */
class DriveEnd {
  last: AppendEntry[] = [];
  ended: EndState | null = null;
  constructor(
    private readonly ctx: RunsContext,
    private readonly runId: string,
    readonly fence: Fence,
  ) {}

  async finish(outcome: EndState, o: Omit<FinishOptions, 'fence' | 'before'>): Promise<void> {
    const { ctx, runId } = this;
    const write = async () => {
      this.ended = await keptWrite(ctx, runId, () => endRun(ctx, runId, outcome, { ...o, fence: this.fence, before: this.last }));
    };
    // A COMMIT whose outcome is unknown: written again once the store answers. Not kept, the run ends
    // with its held-back records (lost, a re-drive would issue the last call again); kept, the second
    // write finds the run ended and changes nothing (`ended` null: the drive reads the state back).
    await keptIfUnknown(ctx, runId, write, null);
  }
}

/**
 * The claim's first steps: counts a takeover (and names the one of a run this process drives
 * itself, which must not happen), and, for a run taken over from a driver that stopped, verifies
 * its whole journal against the group's published keys before anything is built on it, then records
 * the takeover. False when the run was ended instead (its journal does not verify).
 */
async function takeClaim(
  ctx: RunsContext,
  runId: string,
  claim: Extract<Claim, { ok: true }>,
  opts: DriveOptions,
  end: DriveEnd,
): Promise<boolean> {
  const { config, log } = ctx.core;
  const fence = claim.fence;
  if (claim.takeover) {
    const previous = claim.previousOwner !== config.cellId ? 'peer' : ctx.claimedHere.has(runId) ? 'self' : 'restart';
    ctx.metrics.runTakeovers.inc({ previous });
    if (previous === 'self') log.error('this process took over a run it drives itself', { run_id: runId, epoch: fence.epoch });
  }
  ctx.claimedHere.set(runId, fence.epoch);
  if (!claim.takeover) return true;
  const verdict = await verifyRunJournal(ctx, runId);
  if (!verdict.ok) {
    log.error('journal of a taken-over run does not verify', { run_id: runId, seq: verdict.seq, reason: verdict.reason });
    await end.finish('failed', {
      error: {
        code: 'failed',
        message: 'the run cannot be resumed: its journal does not verify',
        reason: 'journal_invalid',
        details: { seq: verdict.seq, problem: verdict.reason },
      },
    });
    return false;
  }
  await appendJournal(
    ctx,
    runId,
    { step_id: 'run', kind: 'taken_over', data: { cell_id: config.cellId, epoch: fence.epoch, previous_owner: claim.previousOwner } },
    [],
    fence,
  );
  await opts.onTakeover?.(claim.previousOwner);
  return true;
}

/**
 * The engine's journal port for one drive. Records of the drive not written yet (a step's result)
 * are held back (`deferred`) and ride in the transaction of the next record that must be durable
 * before something leaves the process, so a step is one commit. A lost lease is kept (`lost`): the
 * engine then sees the run as cancelled and the drive stops writing.
 */
class StepWriter {
  lost: LeaseLostError | null = null;
  /** The data of the engine's terminal record: written by finishRun, with the run's state. */
  engineFinal: JsonObject | undefined;
  private readonly deferred: AppendEntry[] = [];

  constructor(
    private readonly ctx: RunsContext,
    private readonly runId: string,
    private readonly fence: Fence,
  ) {}

  /** Writes the held-back records (and `then`) in one transaction. */
  flush = async (then?: AppendEntry): Promise<void> => {
    const { ctx, runId, fence } = this;
    const entries = this.deferred.splice(0);
    if (then) entries.push(then);
    if (entries.length > 0) return this.fenced(() => appendHeld(ctx, runId, entries, fence));
    // Nothing held back: the writes staged for the run (a reservation: writeWithDriver) alone, fenced. A
    // COMMIT cut off mid-way: a write that can tell whether it was kept (StagedWrite.kept) says so.
    const staged = ctx.staged.get(runId);
    if (staged === undefined) return;
    const probe = staged.find((w) => w.kept !== undefined)?.kept;
    const write = () => keptWrite(ctx, runId, () => commitStaged(ctx, runId, fence));
    await this.fenced(() => (probe === undefined ? write() : keptIfUnknown(ctx, runId, write, () => probe(ctx.core.store))));
  };

  /** Runs a write of the driver, keeping a lost lease (`lost`). */
  private async fenced(write: () => Promise<unknown>): Promise<void> {
    try {
      await write();
    } catch (e) {
      if (e instanceof LeaseLostError) this.lost = e;
      throw e;
    }
  }

  /** The records still held back, taken out of the writer (the run's end writes them). */
  takeDeferred(): AppendEntry[] {
    return this.deferred.splice(0);
  }

  /** The engine's ports: the caller's, each flushing the held-back records first where needed, and the journal. */
  enginePorts(ports: DrivePorts, handle: DriverHandle, recorded: RecordedIndex): EnginePorts {
    const { ctx, runId } = this;
    return {
      ...ports,
      ...flushedFirst(ports, this.flush),
      clock: ctx.core.clock,
      isCancelled: () => handle.signal.aborted || this.lost !== null,
      recorded: async (stepId) => recorded.get(stepId),
      delta: (d) => publishDelta(ctx, runId, d),
      intents: async (stepId) => recorded.intents(stepId),
      attempts: async (stepId) => recorded.attempts(stepId),
      outcomes: outcomesPort(ctx, runId),
      journal: { append: (fields, payload) => this.append(fields, payload, recorded) },
    };
  }

  private async append(fields: JournalAppend, payload: { input: unknown; output: unknown }, recorded: RecordedIndex): Promise<void> {
    const { ctx, runId } = this;
    if (this.lost) throw this.lost;
    // The run's last record is written by finishRun together with the state change.
    if (fields.kind === TERMINAL_KIND) {
      this.engineFinal = fields.data ?? {};
      // The held-back records ride in finishRun's transaction. A completed run's are judged there, with
      // its output, against the storage in use read in that transaction (finishRun: they do not fit, the
      // run ends failed without them, as a refused step's would). Another end's are judged here: they do
      // not fit, they are written now, and the refusal ends the run as for any step.
      if (fields.data?.['outcome'] !== 'completed' && (await heldBackRefused(ctx, runId, this.deferred))) await this.flush();
      // Rides in finishRun's transaction (unless a held-back record stores it already: counted once).
      const out = contentHash(payload.output ?? null);
      if (!this.deferred.some((e) => e.blobs.some((b, i) => (e.blobHashes?.[i] ?? contentHash(b ?? null)) === out)))
        await stageRunBlob(ctx, runId, payload.output);
      return;
    }
    // The engine hashed these very values for the record (JournalPort): they are stored under those hashes.
    const entry: AppendEntry = {
      fields: { ...fields },
      blobs: [payload.input, payload.output],
      blobHashes: [fields.input_hash, fields.output_hash],
    };
    if (DEFERRED_KINDS.has(fields.kind)) this.deferred.push({ ...entry, fields: stamped(ctx, entry.fields) });
    else await this.flush(entry);
    recorded.noteAppend(fields.kind, fields.step_id, fields.input_hash, payload.output, fields.data);
    if (fields.data?.['reissued'] === true) await flagReissue(ctx, runId, fields.step_id, fields.kind, fields.data);
  }
}

/** The run's end as the engine's result says: finished (cancelled, completed, failed), left waiting, or left for recovery. */
async function endDrive(
  ctx: RunsContext,
  runId: string,
  handle: DriverHandle,
  result: RunResult,
  opts: DriveOptions,
  end: DriveEnd,
  extra: JsonObject,
): Promise<void> {
  if (handle.signal.aborted && handle.cancelledBy() !== null) {
    await end.finish('cancelled', {
      error: { code: 'cancelled', message: 'the run was cancelled', reason: 'cancelled' },
      data: { ...extra, reason: 'cancelled', by: handle.cancelledBy() },
    });
  } else if (result.outcome === 'completed') {
    await end.finish('completed', { output: opts.finalOutput ? await opts.finalOutput(result) : result.output, data: extra });
  } else if (result.outcome === 'waiting') {
    await writeLast(ctx, runId, end.last, end.fence);
    // A call whose outcome was lost waits on an operator, in a state of its own (no timer, nothing to take over).
    const state = result.waiting?.for === 'outcome' ? 'outcome_unknown' : 'waiting';
    await keptWrite(ctx, runId, () => releaseToWaiting(ctx, runId, end.fence, state));
  } else if (handle.signal.aborted) {
    // Stopped because the cell is shutting down: leave the run for recovery, its steps recorded.
    await writeLast(ctx, runId, end.last, end.fence);
  } else if (result.outcome === 'failed' && storageLimitOf(result.cause) !== undefined) {
    // A payload was refused by a storage limit (nothing of it was written): that is the run's error.
    const error = storageRunError(storageLimitOf(result.cause)!);
    await end.finish('failed', { error, data: { ...extra, reason: error.reason ?? null } });
  } else {
    const error = (opts.describeError ?? defaultError)(result);
    await end.finish(result.outcome, { error, data: { ...extra, reason: error.reason ?? result.reason ?? null } });
  }
}

/**
 * Before a drive stopped by a store outage is driven again from the journal:
 * the records it held back (a model's answer, a tool's result) are written
 * first, once the store answers. Lost, the re-drive would find the call's
 * intent without its result and issue the call again. Returns `cause`, or
 * what ended the write (a lost lease, the cell stopping) for the caller to throw.
 */
async function keptBeforeRedrive(flush: () => Promise<void>, cause: unknown): Promise<unknown> {
  try {
    await flush();
    return cause;
  } catch (e) {
    return e;
  }
}

/** Writes the records a drive held back, when it ends without ending the run. */
async function writeLast(ctx: RunsContext, runId: string, entries: AppendEntry[], fence: Fence): Promise<void> {
  if (entries.length > 0) await appendHeld(ctx, runId, entries, fence);
}

/** Whether storing the held-back records would pass a storage limit (reads only; their record bytes estimated). */
async function heldBackRefused(ctx: RunsContext, runId: string, entries: readonly AppendEntry[]): Promise<boolean> {
  const values = entries.flatMap((e) => e.blobs.map((b) => ({ hash: contentHash(b ?? null), body: JSON.stringify(b ?? null) })));
  if (!values.some((v) => v.body !== 'null')) return false;
  return (await storageRefusal(ctx, runId, entries.length * HELD_RECORD_BYTES, values)) !== null;
}

/** What a held-back record is counted as before it is sealed (a sealed record is about 650 bytes). */
const HELD_RECORD_BYTES = 2048;

/**
 * Journal kinds the driver may hold back (a step's recorded result, the run's
 * start): written with the next write that must be durable at once (a model
 * call's budget reservation: writeWithDriver; the intent before a tool call,
 * a wait, a refusal) or with the run's end, in that write's transaction. Nothing leaves the process in between:
 * every port that acts outside it writes them first (flushedFirst).
 */
const DEFERRED_KINDS: ReadonlySet<string> = new Set(['step', 'decision', 'run_started']);

/**
 * The ports through which a step acts outside the process (a model or tool
 * call, an approval request), each writing the drive's held-back records
 * before it acts: what a later drive would find is never behind what was done.
 */
function flushedFirst(ports: DrivePorts, flush: () => Promise<void>): Partial<EnginePorts> {
  const out: Partial<EnginePorts> = {};
  const model = ports.model;
  if (model) {
    const m = Object.create(model) as typeof model;
    m.complete = async (req, opts) => {
      await flush();
      return model.complete(req, opts);
    };
    out.model = m;
  }
  const tools = ports.tools;
  if (tools) {
    const t = Object.create(tools) as typeof tools;
    t.call = async (name, args, call) => {
      await flush();
      return tools.call(name, args, call);
    };
    out.tools = t;
  }
  const approvals = ports.approvals;
  const request = approvals?.request;
  if (approvals && request) {
    const a = Object.create(approvals) as typeof approvals;
    a.request = async (stepId, ask) => {
      await flush();
      return request.call(approvals, stepId, ask);
    };
    out.approvals = a;
  }
  return out;
}

/**
 * Records on the run a call that was re-issued because it was in flight when
 * an earlier driver stopped (`flags.reissued`: step, call kind, and its cost
 * in tokens when it was a model call). The journal holds the same fact on the
 * step's record (`data.reissued`).
 */
async function flagReissue(ctx: RunsContext, runId: string, stepId: string, kind: string, data: JsonObject): Promise<void> {
  const run = await getRun(ctx, runId);
  const prior = Array.isArray(run?.flags['reissued']) ? (run.flags['reissued'] as unknown[]) : [];
  const usage = typeof data['usage'] === 'number' ? data['usage'] : null;
  await setRunFlags(ctx, runId, {
    reissued: [...prior, { step_id: stepId, kind, cost_tokens: usage, attempt: data['attempt'] ?? 2, at: ctx.core.clock.now() }],
  });
}

/** Verifies a run's whole journal (chain, epochs, every signature) against the identity keys of every cell of the group. */
export async function verifyRunJournal(ctx: RunsContext, runId: string): Promise<JournalVerdict> {
  const keys = new Map((await ctx.iam.groupIdentityKeys()).map((k) => [k.kid, k.jwk]));
  const records = await readJournal(ctx, runId, 0, 10_000_000);
  return verifyJournal(records, (kid) => keys.get(kid));
}

/** True when a run's state allows driving it (not terminal). */
export async function drivable(ctx: RunsContext, runId: string): Promise<boolean> {
  const r = await getRun(ctx, runId);
  return r !== undefined && !isTerminal(r.state);
}
