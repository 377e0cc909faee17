/**
 * Journal persistence: every run's signed, hash-chained journal (format in
 * core/journal/record.ts), written durably to the `journal` table and then
 * published on the run's event stream (events.ts).
 *
 * - `appendJournal(ctx, runId, fields)` assigns `seq` (contiguous from 1) and
 *   `prev_hash`, seals the record with the cell's identity key, commits it
 *   (durable before it resolves) and publishes it. Appends to one run are
 *   serialised; a run that is already terminal refuses appends (RunClosedError),
 *   so nothing follows the terminal record.
 * - `finishRun(ctx, runId, outcome, ...)` moves a run to a terminal state and
 *   writes its `run_finished` record in the same transaction. The first finisher
 *   wins; later calls are no-ops that return false (idempotent cancel).
 * - `completeRefusal(ctx, runId)` ends a run recorded with a refusal (its
 *   `flags.refusal`, set in its creating transaction): its `refusal` record and
 *   its `run_finished` (outcome refused) in one transaction, once.
 * - `readJournal(ctx, runId, afterSeq)` returns the sealed records after `afterSeq`.
 *
 * Step inputs and outputs are stored by content hash in `journal_blobs`
 * (`putRunBlob` / `getBlob`, or the `blobs` of appendJournal, same transaction);
 * records carry hashes only.
 *
 * Every write here is metered against the run's storage cap, its workspace's
 * quota and the cell's (storage.ts), in the write's own transaction. A record
 * carrying a payload that would pass a limit is refused (RunStorageLimitError,
 * nothing written); a completed run whose final output (kept again on the run
 * row) would pass one ends `failed` with the limit's reason instead, without
 * that output.
 */
import { contentHash } from '../../core/canonical.ts';
import { recordHash } from '../../core/journal/hash.ts';
import type { JournalRecord, JsonObject } from '../../core/journal/record.ts';
import type { Reader, Tx } from '../store/types.ts';
import type { RunsContext, StagedWrite } from './context.ts';
import { LeaseLostError, type Fence } from './lease.ts';
import { publish } from './events.ts';
import { commitAppend, type AppendOutcome } from './group-commit.ts';
import {
  EMPTY_HASH,
  lockRun,
  RunClosedError,
  prepareEntry,
  prepareValue,
  sealAfter,
  tailAt,
  type AppendEntry,
  type AppendFields,
  type AppendBlobs,
} from './internal/records.ts';
import { recordText } from './internal/record-text.ts';
import * as repo from './repository.ts';
import { getRun, isTerminal, pendingRefusal, setRunStateTx, type RunError, type RunState } from './runs.ts';
import { byteSize, forgetMeter, meterTx, prepareMeter, measure, type RunStorageLimitError, usageRefusal } from './storage.ts';

export type { JournalRecord } from '../../core/journal/record.ts';
export type { AppendBlobs, AppendEntry, AppendFields } from './internal/records.ts';
export { RunClosedError, stamped } from './internal/records.ts';

/** Kind of the last record of every run. Its `data.outcome` is the terminal state. */
export const TERMINAL_KIND = 'run_finished';

/** Runs `fn` after every earlier append of this run has settled. */
function serialised<T>(ctx: RunsContext, runId: string, fn: () => Promise<T>): Promise<T> {
  const queues = ctx.queues;
  const prev = queues.get(runId) ?? Promise.resolve();
  const next = prev.then(fn, fn);
  const settled = next.then(
    () => undefined,
    () => undefined,
  );
  queues.set(runId, settled);
  void settled.then(() => {
    if (queues.get(runId) === settled) queues.delete(runId);
  });
  return next;
}

/**
 * Appends one record to a run's journal: sealed, durable, then published.
 * With `fence` (the run's driver) the write happens only while this cell holds
 * the run's lease at that epoch; without (a cancel, a note from any cell) the
 * record carries the lease's current epoch. Seq and chain come from the
 * journal as the transaction reads it, so appends by several cells interleave.
 * @throws RunClosedError when the run is unknown or terminal.
 * @throws LeaseLostError when `fence` is no longer the run's lease (nothing written).
 */
export async function appendJournal(
  ctx: RunsContext,
  runId: string,
  fields: AppendFields,
  blobs: AppendBlobs = [],
  fence?: Fence,
): Promise<JournalRecord> {
  const recs = await appendJournalBatch(ctx, runId, [{ fields, blobs }], fence);
  return recs[0]!;
}

/**
 * Appends records to a run's journal in one transaction, in order, with
 * contiguous seqs (a step's records and the intent of the next call: the
 * run's driver, drive.ts). Like appendJournal otherwise; when a record's
 * payload would pass a storage limit, the records before it are kept (with
 * the writes staged for the run) and RunStorageLimitError is thrown for it,
 * as if they had been appended one by one.
 */
export function appendJournalBatch(
  ctx: RunsContext,
  runId: string,
  entries: readonly AppendEntry[],
  fence?: Fence,
): Promise<JournalRecord[]> {
  return serialised(ctx, runId, async () => {
    if (entries.length === 0) return [];
    const items = entries.map((e) => prepareEntry(ctx, e));
    const meter = await prepareMeter(ctx, runId);
    const staged = takeStaged(ctx, runId);
    let out: AppendOutcome;
    try {
      // One transaction: the run's row (locked first, then stamped), the writes staged for it
      // (budget), the records, their values and the run's storage share; a driver's (fenced) append
      // shares it with the appends other drivers make at the same moment (group-commit.ts).
      out = await commitAppend(ctx, { runId, items, staged, fence, meter });
    } catch (e) {
      restage(ctx, runId, staged, e);
      if (e instanceof RunClosedError) forgetMeter(ctx, runId);
      throw e;
    }
    ctx.tails.set(runId, out.tail);
    for (const rec of out.recs) {
      ctx.metrics.journalRecords.inc({ kind: rec.kind });
      publish(ctx, rec);
    }
    if (out.refused) throw out.refused;
    return out.recs;
  });
}

/**
 * Stages a write of a run's driver to ride in the run's next journal append
 * (or its finish), in that append's transaction: a call's budget commit
 * rides with the driver's next commit (the next call's reservation,
 * writeWithDriver, or the run's end). In this process only; one that was
 * never appended (the drive stopped) is flushed by flushStaged.
 */
export function stageRunWrite(ctx: RunsContext, runId: string, write: StagedWrite): void {
  const list = ctx.staged.get(runId);
  if (list) list.push(write);
  else ctx.staged.set(runId, [write]);
}

function takeStaged(ctx: RunsContext, runId: string): StagedWrite[] {
  const list = ctx.staged.get(runId) ?? [];
  ctx.staged.delete(runId);
  return list;
}

/** Puts back the writes of an append that failed, for the next one; dropped when the run is closed or the lease lost. */
function restage(ctx: RunsContext, runId: string, staged: StagedWrite[], err: unknown): void {
  if (staged.length === 0 || err instanceof RunClosedError || err instanceof LeaseLostError) return;
  ctx.staged.set(runId, [...staged, ...(ctx.staged.get(runId) ?? [])]);
}

/**
 * Forgets the writes staged for a run: an append whose COMMIT's outcome was
 * unknown put its staged writes back (restage), and the journal then showed
 * the append kept (runs/drive.ts keptIfUnknown): they were committed with it.
 */
export function dropStaged(ctx: RunsContext, runId: string): void {
  ctx.staged.delete(runId);
}

/**
 * Runs `write` now, in the transaction of the run's driver's next commit: with the records the
 * driver holds back (a step's result) and the writes staged for the run, in one transaction shared
 * with other drivers' (group-commit.ts); without a driver in this process, with the staged writes in
 * a transaction of their own. Resolves with what `write` returned in the transaction that committed.
 * A write whose commit failed is abandoned: it does not ride in a later one.
 *
 * `readBack`: `write` issues all its statements before its first await (StagedWrite.atOnce), so it
 * may leave with the COMMIT in one round trip (group-commit.ts); should the connection be lost then
 * and the server say the transaction committed, its answer is lost with it, and `readBack` reads
 * what it wrote from the store instead. It answers null when nothing of the write is there: so
 * when the COMMIT's outcome is unknown, the driver reads it back to learn whether the write was
 * kept, and writes it again if not (StagedWrite.kept; drive.ts StepWriter.flush).
 */
export async function writeWithDriver<T>(
  ctx: RunsContext,
  runId: string,
  write: (tx: Tx) => Promise<T>,
  opts: { readBack?: (db: Reader) => Promise<T> } = {},
): Promise<T> {
  let live = true;
  let began = false;
  let ran = false;
  let out: T | undefined;
  const staged: StagedWrite = async (tx) => {
    if (!live) return;
    began = true;
    out = await write(tx);
    ran = true;
  };
  const readBack = opts.readBack;
  if (readBack !== undefined) {
    staged.atOnce = true;
    staged.kept = async (db) => (await readBack(db)) !== null;
  }
  stageRunWrite(ctx, runId, staged);
  try {
    const flush = ctx.writers.get(runId);
    await (flush !== undefined ? flush() : flushStaged(ctx, runId));
  } catch (e) {
    live = false;
    throw e;
  }
  live = false;
  if (ran) return out as T;
  // Committed, its answer lost with the connection (StagedWrite.atOnce): what it wrote is in the store.
  if (began && readBack !== undefined) return readBack(ctx.core.store);
  throw new TypeError('writeWithDriver: the write was not committed with the run');
}

/**
 * Commits the writes staged for a run in a transaction of their own, fenced by its driver's lease
 * (a driver's commit with no record held back: journal.ts writeWithDriver). Serialised with the
 * run's appends; put back for the next append when the transaction fails (as an append's).
 * @throws LeaseLostError when `fence` is no longer the run's lease; RunClosedError when the run ended.
 */
export function commitStaged(ctx: RunsContext, runId: string, fence: Fence): Promise<void> {
  return serialised(ctx, runId, async () => {
    const staged = takeStaged(ctx, runId);
    if (staged.length === 0) return;
    try {
      await ctx.core.store.write(
        async (tx) => {
          await lockRun(ctx, tx, runId, ctx.core.clock.now(), fence);
          for (const w of staged) await w(tx);
        },
        { isolation: 'row-locks', notify: 'batched', subjects: [runId] },
      );
    } catch (e) {
      restage(ctx, runId, staged, e);
      throw e;
    }
  });
}

/** Commits the writes still staged for a run in a transaction of their own (a drive that ends without appending them). */
export async function flushStaged(ctx: RunsContext, runId: string): Promise<void> {
  const staged = takeStaged(ctx, runId);
  if (staged.length === 0) return;
  await ctx.core.store.write(
    async (tx) => {
      for (const w of staged) await w(tx);
    },
    { isolation: 'row-locks' },
  );
}

export interface FinishOptions {
  output?: unknown;
  error?: RunError | null;
  /** Extra fields for the terminal record's `data`. */
  data?: JsonObject;
  /** The driver's lease: the run ends only while this cell holds it (LeaseLostError otherwise). */
  fence?: Fence;
  /**
   * Records of the driver written before the terminal record, in the same
   * transaction (its last step's: drive.ts). A completed run's are judged
   * here with its output: when the two do not fit the limits, the run ends
   * failed without its output, and without these from the first that alone
   * does not fit on. Another end's are metered, not refused: the driver
   * checked they fit (storageRefusal) before handing them over.
   */
  before?: readonly AppendEntry[];
}

/** The states a run ends in. */
export type EndState = Extract<RunState, 'completed' | 'failed' | 'refused' | 'cancelled'>;

/**
 * Moves a run to a terminal state and writes its `run_finished` record in one
 * transaction. Returns false (changing nothing) when it is already terminal.
 */
export async function finishRun(ctx: RunsContext, runId: string, requested: EndState, opts: FinishOptions = {}): Promise<boolean> {
  return (await endRun(ctx, runId, requested, opts)) !== null;
}

/**
 * finishRun, answering the state the run was left in: the one requested, or
 * `failed` for a completed run whose output does not fit its storage limits;
 * null (changing nothing) when it had ended already. A driver's end takes its
 * run's state from here rather than reading it back.
 */
export function endRun(ctx: RunsContext, runId: string, requested: EndState, opts: FinishOptions = {}): Promise<EndState | null> {
  return serialised(ctx, runId, async () => {
    // A driver's finish (fenced) is judged in its transaction, under the run's lock: nothing read first.
    if (!opts.fence) {
      const run = await repo.runHead(ctx.core.store, runId);
      if (!run || isTerminal(run.state)) {
        ctx.staged.delete(runId);
        return null;
      }
    }
    // The run row keeps its output (a second copy of the last step's): it counts in full.
    const fullOutputBytes = 'output' in opts ? byteSize(JSON.stringify(opts.output ?? null)) : 0;
    const fence = opts.fence;
    const meter = await prepareMeter(ctx, runId);
    const staged = takeStaged(ctx, runId);
    const before = (opts.before ?? []).map((e) => prepareEntry(ctx, e));
    // A completed run's output must fit the limits, with the records written before the terminal one
    // (each counted as a terminal record's room): judged against the storage in use read in the transaction.
    const room =
      requested === 'completed' && fullOutputBytes > 0
        ? measure(
            meter,
            TERMINAL_RECORD_ALLOWANCE * (1 + before.length) + fullOutputBytes,
            before.flatMap((h) => h.values),
          ).adding
        : null;
    const traceparent = ctx.core.traces.traceparent();
    const at = ctx.core.clock.now();
    let beforeRecs: JournalRecord[] = [];
    let outcome: typeof requested = requested;
    let o: FinishOptions = opts;
    let data: JsonObject = {};
    let changed: Promise<boolean> = Promise.resolve(true);
    let rec: JournalRecord;
    try {
      rec = await ctx.core.store.write(
        async (tx) => {
          beforeRecs = [];
          // Issued together (one round trip on PostgreSQL), in this order: the lock first, so the
          // staged writes, the last seq and the storage in use are read under it. A run that ended
          // or a lease that was lost rolls the transaction back (lockRun throws).
          const [s, , seq, usage] = await Promise.all([
            lockRun(ctx, tx, runId, at, fence),
            Promise.all(staged.map((w) => w(tx))),
            repo.lastSeq(tx, runId),
            room === null ? null : repo.storageUsage(tx, meter.workspace),
          ]);
          let tail = await tailAt(ctx, tx, runId, seq);
          outcome = requested;
          o = opts;
          let outputBytes = fullOutputBytes;
          let refused = usage === null || room === null ? null : usageRefusal(ctx, meter, usage, room);
          let written = before;
          if (refused && usage !== null) {
            // The records held back judged one by one, as a step's append would: those from the first that
            // does not fit on are not written either, and that record's limit is the run's error.
            const fresh = new Set<string>();
            let adding = 0;
            for (let k = 0; k < before.length; k++) {
              // The run's spec counts once, with the first (as group-commit.ts sealMember measures a batch).
              adding += measure({ ...meter, spec: k === 0 ? meter.spec : 0 }, TERMINAL_RECORD_ALLOWANCE, before[k]!.values, fresh).adding;
              const beforeRefused = usageRefusal(ctx, meter, usage, adding);
              if (beforeRefused) {
                refused = beforeRefused;
                written = before.slice(0, k);
                break;
              }
            }
          }
          if (refused) {
            // The run did its work but its output does not fit: it ends failed, without it.
            const error = storageRunError(refused);
            outcome = 'failed';
            o = { error, data: { ...o.data, reason: refused.reason } };
            outputBytes = 0;
          }
          data = {
            ...o.data,
            outcome,
            ...(o.error ? { error: { ...o.error } } : {}),
            ...(traceparent ? { traceparent } : {}),
          };
          const epoch = fence ? fence.epoch : s.lease_epoch;
          const graphHash = s.graph_hash ?? EMPTY_HASH;
          let beforeBytes = 0;
          for (const b of written) {
            const sealed = await sealAfter(ctx, tail, runId, graphHash, b.f, epoch);
            beforeRecs.push(sealed.rec);
            beforeBytes += byteSize(recordText(sealed.rec));
            tail = sealed.tail;
          }
          const { rec } = await sealAfter(
            ctx,
            tail,
            runId,
            graphHash,
            { step_id: 'run', kind: TERMINAL_KIND, output_hash: contentHash(o.output ?? null), data, at },
            epoch,
          );
          const patch: { output?: unknown; error?: RunError | null } = {};
          if ('output' in o) patch.output = o.output;
          if (o.error !== undefined) patch.error = o.error;
          const text = recordText(rec);
          const values = [...new Map(written.flatMap((b) => b.values).map((v) => [v.hash, v] as const)).values()].sort((a, b) =>
            a.hash < b.hash ? -1 : a.hash > b.hash ? 1 : 0,
          );
          const recordBytes = beforeBytes + byteSize(text) + outputBytes + (o.error ? byteSize(JSON.stringify(o.error)) : 0);
          const head = { run_id: runId, journal_head: recordHash(rec), graph_hash: graphHash };
          // Not waited for: they travel with the COMMIT (store Tx.run), whose write fails with them. The
          // state change matches: the run's row is locked by this transaction and was not terminal.
          changed = setRunStateTx(tx, runId, outcome, at, patch);
          Promise.all([
            changed,
            meterTx(ctx, tx, meter, runId, recordBytes, values, false),
            repo.putBlobs(tx, values),
            repo.insertRecords(tx, [...beforeRecs, rec]),
            ...ctx.finishHooks.map((hook) => hook(tx, head)),
          ]).catch(() => undefined);
          return rec;
        },
        { isolation: 'row-locks', subjects: [runId] },
      );
    } catch (e) {
      if (e instanceof RunClosedError) return null;
      restage(ctx, runId, staged, e);
      throw e;
    }
    if (!(await changed)) ctx.core.log.error('a finished run kept its state', { run_id: runId });
    for (const b of beforeRecs) {
      ctx.metrics.journalRecords.inc({ kind: b.kind });
      publish(ctx, b);
    }
    const reason = o.error?.reason ?? (typeof data['reason'] === 'string' ? data['reason'] : (o.error?.code ?? ''));
    ctx.metrics.runsFinished.inc({ state: outcome, reason: outcome === 'completed' || outcome === 'cancelled' ? '' : reason });
    ctx.metrics.journalRecords.inc({ kind: rec.kind });
    forgetMeter(ctx, runId);
    ctx.tails.delete(runId);
    publish(ctx, rec);
    return outcome;
  });
}

/**
 * Ends a run that was recorded refused at its start (`flags.refusal`, set in
 * its creating transaction: runs.ts NewRun.refusal) as that refusal decided:
 * its `refusal` record (unless one is kept already) and its `run_finished`
 * (outcome refused, the same error) in one transaction, so the two are written
 * together or not at all and a second completer (the creating cell's opening
 * retry, a peer's takeover sweep, a restart, an operator's recover, a drive's
 * claim) finds the run ended and writes nothing. Such a run is never driven
 * (lease.ts claimRun refuses it). False when the run has no pending refusal
 * or is already terminal.
 */
export async function completeRefusal(ctx: RunsContext, runId: string): Promise<boolean> {
  const run = await getRun(ctx, runId);
  const refusal = run ? pendingRefusal(run) : null;
  if (!run || !refusal || isTerminal(run.state)) return false;
  // A record kept by a writer of before this was one transaction is not written twice.
  const kept = await repo.hasRecordOfKind(ctx.core.store, runId, 'refusal');
  const record: AppendEntry = {
    fields: { step_id: 'run', kind: 'refusal', data: { reason: refusal.reason, ...refusal.details } },
    blobs: [],
  };
  return finishRun(ctx, runId, 'refused', {
    error: { code: 'refused', message: refusal.message, reason: refusal.reason, details: refusal.details },
    before: kept ? [] : [record],
  });
}

/** The run's sealed records with seq > afterSeq, in order. */
export function readJournal(ctx: RunsContext, runId: string, afterSeq = 0, limit = 100_000): Promise<JournalRecord[]> {
  return repo.records(ctx.core.store, runId, afterSeq, limit);
}

/** The last record of the run's journal (its head), or undefined before the first. */
export function journalHead(ctx: RunsContext, runId: string): Promise<JournalRecord | undefined> {
  return repo.lastRecord(ctx.core.store, runId);
}

/** Whether the run's journal already holds its terminal record. */
export function journalClosed(ctx: RunsContext, runId: string): Promise<boolean> {
  return repo.hasRecordOfKind(ctx.core.store, runId, TERMINAL_KIND);
}

/** The run's error when a storage limit ended it. */
export function storageRunError(e: RunStorageLimitError): RunError {
  return { code: 'failed', reason: e.reason, message: e.message, details: e.details() };
}

/** Room kept for the terminal record, which finishRun measures before sealing it (it is always written). */
const TERMINAL_RECORD_ALLOWANCE = 2048;

/**
 * Stores a value of a run by content hash (idempotent), metered for that run
 * but not refused (the engine's final output, always a value a step already
 * stored); returns the hash.
 */
export async function putRunBlob(ctx: RunsContext, runId: string, value: unknown): Promise<string> {
  const v = prepareValue(value);
  const meter = await prepareMeter(ctx, runId);
  await ctx.core.store.write(async (tx) => {
    await meterTx(ctx, tx, meter, runId, 0, [v], false);
    await repo.putBlob(tx, v.hash, v.body);
  });
  return v.hash;
}

/** putRunBlob staged to ride in the run's next journal write (its finish: stageRunWrite); returns the hash. */
export async function stageRunBlob(ctx: RunsContext, runId: string, value: unknown): Promise<string> {
  const v = prepareValue(value);
  const meter = await prepareMeter(ctx, runId);
  stageRunWrite(ctx, runId, async (tx) => {
    await meterTx(ctx, tx, meter, runId, 0, [v], false);
    await repo.putBlob(tx, v.hash, v.body);
  });
  return v.hash;
}

/** The value stored under `hash`, or undefined. */
export function getBlob(ctx: RunsContext, hash: string): Promise<unknown> {
  return repo.blob(ctx.core.store, hash);
}
