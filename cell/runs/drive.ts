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
import { TERMINAL_KIND, appendJournal, finishRun, flushStaged, getBlob, readJournal, stageRunBlob, storageRunError } from './journal.ts';
import { claimRun, dropLease, LeaseLostError, releaseToWaiting, type Claim } from './lease.ts';
import { verifyJournal, type JournalVerdict } from '../../core/journal/verify.ts';
import { storageLimitOf } from './storage.ts';
import { decisionCount, recordsOfKinds } from './repository.ts';
import { getRun, isTerminal, setRunFlags, type RunError, type RunState } from './runs.ts';
import { isServiceError } from '../../core/errors.ts';

/** Backoff between attempts to drive a run again after a store outage, ms (doubling up to the last). */
export const OUTAGE_RETRY_MS = [250, 500, 1_000, 2_000, 5_000] as const;

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
      const base = OUTAGE_RETRY_MS[Math.min(attempt, OUTAGE_RETRY_MS.length - 1)]!;
      const wait = base / 2 + Math.random() * (base / 2);
      if (attempt === 0)
        ctx.core.log.warn('a run write was refused for now; writing it again', { run_id: runId, error: (err as Error).message });
      await new Promise((res) => setTimeout(res, wait));
      if (ctx.stopping) throw err;
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
 * An append whose COMMIT's outcome is unknown (the connection was cut during
 * it): once the store answers, the run's last record says whether it was
 * kept (only this driver appends to the run under its lease); if not, it is
 * written again. So the answer the drive holds (a model's) is kept, and the
 * call is not issued again as it would be by a re-drive from the journal.
 */
async function keptIfUnknown(
  ctx: RunsContext,
  runId: string,
  fields: { kind: string; step_id: string },
  write: () => Promise<unknown>,
  first: unknown,
): Promise<void> {
  let err = first;
  for (let attempt = 0; attempt < 20 && !ctx.stopping; attempt++) {
    const base = OUTAGE_RETRY_MS[Math.min(attempt, OUTAGE_RETRY_MS.length - 1)]!;
    await new Promise((res) => setTimeout(res, base));
    try {
      const last = (await readJournal(ctx, runId, 0, 10_000_000)).at(-1);
      if (last?.kind === fields.kind && last.step_id === fields.step_id) return;
      await write();
      return;
    } catch (e) {
      if (e instanceof LeaseLostError || !(isStoreOutage(e) || commitUnknown(e))) throw e;
      err = e;
    }
  }
  throw err;
}

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
  /** Claim the run even from a holder whose heartbeat has not lapsed (an operator's recover; fencing keeps it safe). */
  forceClaim?: boolean;
  /** Called once this drive took the run over from a driver that stopped (its journal verified), before any step runs. */
  onTakeover?(previousOwner: string | null): Promise<void>;
}

export interface DriveResult {
  state: RunState;
  result: RunResult | null;
}

/** Journal kinds whose records hold a step's recorded output. */
const RECORDED_KINDS = ['step', 'decision', 'run_started'] as const;

/** Journal kind of the record written right before a model or tool call (core/engine beginCall). */
const INTENT_KIND = 'intent';

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
  /** Calls started (an `intent` record) and not finished (no recorded output after it), per step id. */
  readonly #open = new Map<string, number>();
  private constructor(private readonly ctx: RunsContext) {}

  static async load(ctx: RunsContext, runId: string): Promise<RecordedIndex> {
    const idx = new RecordedIndex(ctx);
    for (const rec of await recordsOfKinds(ctx.core.store, runId, [...RECORDED_KINDS, INTENT_KIND])) {
      if (rec.kind === INTENT_KIND) {
        idx.#open.set(rec.step_id, (idx.#open.get(rec.step_id) ?? 0) + 1);
        continue;
      }
      idx.#open.delete(rec.step_id);
      idx.#byStep.set(rec.step_id, { outputHash: rec.output_hash, ...(rec.data !== undefined ? { data: rec.data } : {}) });
    }
    return idx;
  }

  /** The engine's intents port: calls of the step that were in flight when earlier drives stopped. */
  intents(stepId: string): number {
    return this.#open.get(stepId) ?? 0;
  }

  noteAppend(kind: string, stepId: string, output: unknown, data: JsonObject | undefined): void {
    if (kind === INTENT_KIND) {
      this.#open.set(stepId, (this.#open.get(stepId) ?? 0) + 1);
      return;
    }
    if (!(RECORDED_KINDS as readonly string[]).includes(kind)) return;
    this.#open.delete(stepId);
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
  try {
    return await driveLoop(ctx, runId, graph, ports, input, opts);
  } finally {
    // The lease is kept from one drive to the next of this loop (an outage's re-drive is no takeover).
    dropLease(ctx, runId);
    await flushStaged(ctx, runId).catch((e: unknown) =>
      ctx.core.log.warn('writes staged for a run were not kept', { run_id: runId, error: e instanceof Error ? e.message : String(e) }),
    );
  }
}

async function driveLoop(
  ctx: RunsContext,
  runId: string,
  graph: Graph,
  ports: DrivePorts,
  input: unknown,
  opts: DriveOptions,
): Promise<DriveResult> {
  let outages = 0;
  for (;;) {
    const handle = registerDriver(ctx, runId);
    let r: DriveResult;
    let decisions: number;
    try {
      // A decision recorded on another cell while this one drives cannot wake this drive
      // (requestWake is per process): a count that grew meanwhile makes it look again.
      decisions = await decisionCount(ctx.core.store, runId);
      r = await driveOnce(ctx, handle, runId, graph, ports, input, opts);
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
  const { log } = ctx.core;
  const stateNow = async (): Promise<RunState> => (await getRun(ctx, runId))?.state ?? 'failed';
  const graphHash = opts.graphHash ?? contentHash(graph);
  const claim = await claimRun(ctx, runId, graphHash, opts.forceClaim === true);
  if (!claim.ok) return { state: await stateNow(), result: null };
  const fence = claim.fence;
  try {
    return await driveClaimed(ctx, handle, runId, graph, ports, input, opts, graphHash, claim);
  } catch (err) {
    if (!(err instanceof LeaseLostError)) throw err;
    // Another cell took the run over while this one was paused: nothing more is written here.
    log.warn('run lease lost; this cell stops driving the run', { run_id: runId, epoch: fence.epoch, owner: err.owner });
    ctx.claimedHere.delete(runId);
    return { state: await stateNow(), result: null };
  }
}

async function driveClaimed(
  ctx: RunsContext,
  handle: DriverHandle,
  runId: string,
  graph: Graph,
  ports: DrivePorts,
  input: unknown,
  opts: DriveOptions,
  graphHash: string,
  claim: Extract<Claim, { ok: true }>,
): Promise<DriveResult> {
  const { clock, config, log } = ctx.core;
  const stateNow = async (): Promise<RunState> => (await getRun(ctx, runId))?.state ?? 'failed';
  const fence = claim.fence;
  const finish = (...a: Parameters<typeof finishRun> extends [unknown, unknown, ...infer R] ? R : never) =>
    keptWrite(ctx, runId, () => finishRun(ctx, runId, ...a));
  if (claim.takeover) {
    const previous = claim.previousOwner !== config.cellId ? 'peer' : ctx.claimedHere.has(runId) ? 'self' : 'restart';
    ctx.metrics.runTakeovers.inc({ previous });
    if (previous === 'self') log.error('this process took over a run it drives itself', { run_id: runId, epoch: fence.epoch });
  }
  ctx.claimedHere.set(runId, fence.epoch);
  if (claim.takeover) {
    // A run taken over from a driver that stopped: its whole journal must verify against the
    // group's published keys before anything is built on it.
    const verdict = await verifyRunJournal(ctx, runId);
    if (!verdict.ok) {
      log.error('journal of a taken-over run does not verify', { run_id: runId, seq: verdict.seq, reason: verdict.reason });
      await finish('failed', {
        error: {
          code: 'failed',
          message: 'the run cannot be resumed: its journal does not verify',
          reason: 'journal_invalid',
          details: { seq: verdict.seq, problem: verdict.reason },
        },
        fence,
      });
      return { state: await stateNow(), result: null };
    }
    await appendJournal(
      ctx,
      runId,
      { step_id: 'run', kind: 'taken_over', data: { cell_id: config.cellId, epoch: fence.epoch, previous_owner: claim.previousOwner } },
      [],
      fence,
    );
    await opts.onTakeover?.(claim.previousOwner);
  }
  let engineFinal: JsonObject | undefined;
  let lost: LeaseLostError | null = null;
  const recorded = await RecordedIndex.load(ctx, runId);
  const enginePorts: EnginePorts = {
    ...ports,
    clock,
    isCancelled: () => handle.signal.aborted || lost !== null,
    recorded: async (stepId) => recorded.get(stepId),
    intents: async (stepId) => recorded.intents(stepId),
    journal: {
      async append(fields, payload) {
        if (lost) throw lost;
        // The run's last record is written by finishRun together with the state change.
        if (fields.kind === TERMINAL_KIND) {
          engineFinal = fields.data ?? {};
          // Rides in finishRun's transaction.
          await stageRunBlob(ctx, runId, payload.output);
          return;
        }
        const write = () => keptWrite(ctx, runId, () => appendJournal(ctx, runId, { ...fields }, [payload.input, payload.output], fence));
        try {
          await write().catch((e: unknown) => (commitUnknown(e) ? keptIfUnknown(ctx, runId, fields, write, e) : Promise.reject(e)));
        } catch (e) {
          if (e instanceof LeaseLostError) lost = e;
          throw e;
        }
        recorded.noteAppend(fields.kind, fields.step_id, payload.output, fields.data);
        if (fields.data?.['reissued'] === true) await flagReissue(ctx, runId, fields.step_id, fields.kind, fields.data);
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
    if (lost) throw lost;
    if (isStoreOutage(err)) throw err; // not the run's failure: driven again (driveRun)
    log.error('run drive failed', { run_id: runId, error: err instanceof Error ? (err.stack ?? err.message) : String(err) });
    await finish('failed', {
      error: { code: 'internal_error', message: 'the run failed unexpectedly', reason: 'engine_error' },
      fence,
    });
    return { state: await stateNow(), result: null };
  }
  if (lost) throw lost;
  if (result.cause !== undefined && result.outcome === 'failed') {
    const c = result.cause;
    log.warn('run step failed', { run_id: runId, reason: result.reason, error: c instanceof Error ? c.message : String(c) });
  }
  const extra: JsonObject = { ...(engineFinal ?? {}), steps: result.steps };
  // A step or record refused by a store outage: not the run's failure (driveRun drives it again).
  if (result.outcome === 'failed' && isStoreOutage(result.cause)) throw result.cause;
  if (handle.signal.aborted && handle.cancelledBy() !== null) {
    await finish('cancelled', {
      error: { code: 'cancelled', message: 'the run was cancelled', reason: 'cancelled' },
      data: { ...extra, reason: 'cancelled', by: handle.cancelledBy() },
      fence,
    });
  } else if (result.outcome === 'completed') {
    await finish('completed', {
      output: opts.finalOutput ? await opts.finalOutput(result) : result.output,
      data: extra,
      fence,
    });
  } else if (result.outcome === 'waiting') {
    await keptWrite(ctx, runId, () => releaseToWaiting(ctx, runId, fence));
  } else if (handle.signal.aborted) {
    // Stopped because the cell is shutting down: leave the run for recovery.
  } else if (result.outcome === 'failed' && storageLimitOf(result.cause) !== undefined) {
    // A payload was refused by a storage limit (nothing of it was written): that is the run's error.
    const error = storageRunError(storageLimitOf(result.cause)!);
    await finish('failed', { error, data: { ...extra, reason: error.reason ?? null }, fence });
  } else {
    const error = (opts.describeError ?? defaultError)(result);
    await finish(result.outcome, { error, data: { ...extra, reason: error.reason ?? result.reason ?? null }, fence });
  }
  return { state: await stateNow(), result };
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
