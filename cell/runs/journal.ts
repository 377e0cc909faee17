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
import { GENESIS_HASH, type JournalRecord, type JsonObject } from '../../core/journal/record.ts';
import { sealRecord } from '../../core/journal/seal.ts';
import type { Tx } from '../store/types.ts';
import type { JournalTail, RunsContext, StagedWrite } from './context.ts';
import { assertFence, LeaseLostError, type Fence } from './lease.ts';
import { publish } from './events.ts';
import * as repo from './repository.ts';
import { getRun, isTerminal, pendingRefusal, setRunStateTx, type RunError, type RunState } from './runs.ts';
import {
  byteSize,
  forgetMeter,
  measure,
  meterTx,
  prepareMeter,
  storageRefusal,
  usageRefusal,
  type PreparedValue,
  type RunStorageLimitError,
} from './storage.ts';

export type { JournalRecord } from '../../core/journal/record.ts';

/** Kind of the last record of every run. Its `data.outcome` is the terminal state. */
export const TERMINAL_KIND = 'run_finished';

/** Thrown by appendJournal when the run is already terminal (or unknown). */
export class RunClosedError extends Error {
  constructor(
    readonly runId: string,
    readonly state: string,
  ) {
    super(`run ${runId} is ${state}: its journal is closed`);
    this.name = 'RunClosedError';
  }
}

/** The fields a writer gives; run_id, seq and prev_hash are assigned here, `at` defaults to the clock. */
export interface AppendFields {
  step_id: string;
  kind: string;
  graph_hash?: string;
  input_hash?: string;
  output_hash?: string;
  at?: number;
  data?: JsonObject;
}

/** Values stored by content hash in the same transaction as the record (a step's input and output). */
export type AppendBlobs = readonly unknown[];

const EMPTY_HASH = contentHash(null);

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
 * The run's last record, read in the writing transaction: in a group other
 * cells append to the same journal (a cancel, a recovery note), so a cached
 * tail could be stale. The cache only saves re-hashing the record when it is
 * still the last one.
 */
async function tailOf(ctx: RunsContext, tx: Tx, runId: string): Promise<JournalTail> {
  const seq = await repo.lastSeq(tx, runId);
  if (seq === 0) return { seq: 0, hash: GENESIS_HASH };
  const t = ctx.tails.get(runId);
  if (t && t.seq === seq) return t;
  const rec = await repo.lastRecord(tx, runId);
  return rec ? { seq: rec.seq, hash: recordHash(rec) } : { seq: 0, hash: GENESIS_HASH };
}

/** Seals the record that follows `tail`. */
async function sealAfter(
  ctx: RunsContext,
  tail: JournalTail,
  runId: string,
  graphHash: string,
  f: AppendFields,
  epoch: number,
): Promise<{ rec: JournalRecord; tail: JournalTail }> {
  const rec = await sealRecord(
    {
      run_id: runId,
      seq: tail.seq + 1,
      step_id: f.step_id,
      kind: f.kind,
      graph_hash: f.graph_hash ?? graphHash,
      input_hash: f.input_hash ?? EMPTY_HASH,
      output_hash: f.output_hash ?? EMPTY_HASH,
      at: f.at ?? ctx.core.clock.now(),
      ...(f.data !== undefined ? { data: f.data } : {}),
      cell_id: ctx.core.config.cellId,
      epoch,
    },
    tail.hash,
    ctx.iam.signer(),
  );
  return { rec, tail: { seq: rec.seq, hash: recordHash(rec) } };
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

/** One record of appendJournalBatch: its fields and the values it stores by content hash. */
export interface AppendEntry {
  fields: AppendFields;
  blobs: AppendBlobs;
}

interface PreparedEntry {
  f: AppendFields;
  values: PreparedValue[];
  /** A record carrying a payload is refused past a limit; one carrying none (a refusal, a cancel, a wait) never is. */
  enforce: boolean;
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
    let out: { recs: JournalRecord[]; tail: JournalTail; refused: RunStorageLimitError | null };
    try {
      // One transaction: the run's row (locked first, then stamped), the writes staged for it
      // (budget), the records, their values and the run's storage share.
      out = await ctx.core.store.write(
        async (tx) => {
          // Issued together (one round trip on PostgreSQL), run in this order: the lock comes first.
          const [s, , head] = await Promise.all([
            lockRun(ctx, tx, runId, items.at(-1)!.f.at!, fence),
            Promise.all(staged.map((w) => w(tx))),
            repo.appendRead(tx, runId, items.some((i) => i.enforce) ? { workspace: meter.workspace } : null),
          ]);
          let tail = await tailAt(ctx, tx, runId, head.last_seq);
          const epoch = fence ? fence.epoch : s.lease_epoch;
          const recs: JournalRecord[] = [];
          const values = new Map<string, PreparedValue>();
          const fresh = new Set<string>();
          let adding = 0;
          let refused: RunStorageLimitError | null = null;
          for (const item of items) {
            const sealed = await sealAfter(ctx, tail, runId, s.graph_hash ?? EMPTY_HASH, item.f, epoch);
            const trial = new Set(fresh);
            const add = measure(
              { ...meter, spec: recs.length === 0 ? meter.spec : 0 },
              byteSize(JSON.stringify(sealed.rec)),
              item.values,
              trial,
            ).adding;
            if (item.enforce && head.usage) {
              refused = usageRefusal(ctx, meter, head.usage, adding + add);
              if (refused) break;
            }
            for (const h of trial) fresh.add(h);
            for (const v of item.values) values.set(v.hash, v);
            adding += add;
            recs.push(sealed.rec);
            tail = sealed.tail;
          }
          // The first record refused: nothing is kept (the staged writes wait for the next append).
          if (recs.length === 0) throw refused ?? new TypeError('appendJournalBatch: nothing to write');
          // Not waited for: they travel with the COMMIT (store Tx.run), whose write fails with them.
          Promise.all([
            repo.addStorage(tx, runId, meter.workspace, adding),
            repo.putBlobs(
              tx,
              [...values.values()].sort((a, b) => (a.hash < b.hash ? -1 : a.hash > b.hash ? 1 : 0)),
            ),
            repo.insertRecords(tx, recs),
          ]).catch(() => undefined);
          tx.afterCommit(() => {
            meter.bytes += adding;
            meter.spec = 0;
            for (const h of fresh) meter.hashes.add(h);
          });
          return { recs, tail, refused };
        },
        // Other cells hear of journal appends in one notification shared by the appends of a short
        // interval (store WriteOptions.notify), so concurrent runs' commits share their flushes.
        // Its rows are the run's (the staged writes too): other cells re-read only the runs named (Change.subjects).
        { isolation: 'row-locks', notify: 'batched', subjects: [runId] },
      );
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

function prepareEntry(ctx: RunsContext, e: AppendEntry): PreparedEntry {
  // Stored in hash order: two appends storing the same values lock their rows in the same order.
  const values = e.blobs.map(prepareValue).sort((a, b) => (a.hash < b.hash ? -1 : a.hash > b.hash ? 1 : 0));
  return {
    f: stamped(ctx, e.fields),
    values,
    enforce: values.some((v) => v.body !== 'null'),
  };
}

/** The run's tail given its last seq as the writing transaction read it (the cache saves re-hashing the record). */
async function tailAt(ctx: RunsContext, tx: Tx, runId: string, seq: number): Promise<JournalTail> {
  if (seq === 0) return { seq: 0, hash: GENESIS_HASH };
  const t = ctx.tails.get(runId);
  if (t && t.seq === seq) return t;
  const rec = await repo.lastRecord(tx, runId);
  return rec ? { seq: rec.seq, hash: recordHash(rec) } : { seq: 0, hash: GENESIS_HASH };
}

/**
 * The first statement of a run's journal write: locks the run's row and
 * stamps its progress (repo.lockRunHead), so that the transaction, running
 * with row locks rather than serializable, reads the run's tail after every
 * other writer of that run; returns the run's head.
 * @throws RunClosedError when the run is unknown or terminal.
 * @throws LeaseLostError when `fence` is no longer the run's lease.
 */
async function lockRun(ctx: RunsContext, tx: Tx, runId: string, at: number, fence: Fence | undefined): Promise<repo.RunHead> {
  const me = ctx.core.config.cellId;
  const locked = await repo.lockRunHead(tx, runId, at, fence ? { owner: me, epoch: fence.epoch } : null);
  if (locked) return locked;
  // Nothing matched: say why (a terminal or unknown run, or a lease that is not this driver's).
  const s = await repo.runHead(tx, runId);
  if (!s || isTerminal(s.state)) throw new RunClosedError(runId, s?.state ?? 'unknown');
  if (fence) assertFence(ctx, runId, s, fence);
  throw new RunClosedError(runId, s.state);
}

/**
 * Stages a write of a run's driver to ride in the run's next journal append
 * (or its finish), in that append's transaction: a budget reservation made
 * before a model call commits with the call's `intent` record, the call's
 * budget commit with its step record. In this process only; one that was
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

/**
 * The fields as of now: their time, and `data.traceparent` when a trace is behind them. A driver that
 * holds a record back stamps it when the engine appends it, so the record keeps the time and the span
 * of its step, not those of the later write that carries it.
 */
export function stamped(ctx: RunsContext, fields: AppendFields): AppendFields {
  return { ...traced(ctx, fields), at: fields.at ?? ctx.core.clock.now() };
}

/** The fields with `data.traceparent` when a request's trace is behind this record (cell/http/trace.ts); one stamped already keeps its own. */
function traced(ctx: RunsContext, fields: AppendFields): AppendFields {
  if (typeof fields.data?.['traceparent'] === 'string') return fields;
  const traceparent = ctx.core.traces.traceparent();
  return traceparent ? { ...fields, data: { ...fields.data, traceparent } } : fields;
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
   * transaction (its last step's: drive.ts). Metered, not refused: the
   * driver checked they fit (storageRefusal) before handing them over.
   */
  before?: readonly AppendEntry[];
}

/**
 * Moves a run to a terminal state and writes its `run_finished` record in one
 * transaction. Returns false (changing nothing) when it is already terminal.
 */
export function finishRun(
  ctx: RunsContext,
  runId: string,
  requested: Extract<RunState, 'completed' | 'failed' | 'refused' | 'cancelled'>,
  opts: FinishOptions = {},
): Promise<boolean> {
  return serialised(ctx, runId, async () => {
    const run = await repo.runHead(ctx.core.store, runId);
    if (!run || isTerminal(run.state)) {
      ctx.staged.delete(runId);
      return false;
    }
    let outcome = requested;
    let o = opts;
    // The run row keeps its output (a second copy of the last step's): it counts in full.
    let outputBytes = 'output' in o ? byteSize(JSON.stringify(o.output ?? null)) : 0;
    if (outcome === 'completed' && outputBytes > 0) {
      // With the records written before the terminal one (each counted as a terminal record's room).
      const held = (opts.before ?? []).map((e) => prepareEntry(ctx, e));
      const refused = await storageRefusal(
        ctx,
        runId,
        TERMINAL_RECORD_ALLOWANCE * (1 + held.length) + outputBytes,
        held.flatMap((h) => h.values),
      );
      if (refused) {
        // The run did its work but its output does not fit: it ends failed, without it.
        const error = storageRunError(refused);
        outcome = 'failed';
        o = { error, data: { ...o.data, reason: refused.reason } };
        outputBytes = 0;
      }
    }
    const traceparent = ctx.core.traces.traceparent();
    const data: JsonObject = { ...o.data, outcome, ...(o.error ? { error: { ...o.error } } : {}), ...(traceparent ? { traceparent } : {}) };
    const at = ctx.core.clock.now();
    const fence = opts.fence;
    const meter = await prepareMeter(ctx, runId);
    const staged = takeStaged(ctx, runId);
    const before = (opts.before ?? []).map((e) => prepareEntry(ctx, e));
    let beforeRecs: JournalRecord[] = [];
    let rec: JournalRecord | null;
    try {
      rec = await ctx.core.store.write(
        async (tx) => {
          beforeRecs = [];
          let s: repo.RunHead;
          try {
            s = await lockRun(ctx, tx, runId, at, fence);
          } catch (e) {
            if (e instanceof RunClosedError) return null;
            throw e;
          }
          // Issued together (one round trip on PostgreSQL), in this order.
          let [, tail] = await Promise.all([Promise.all(staged.map((w) => w(tx))), tailOf(ctx, tx, runId)]);
          const epoch = fence ? fence.epoch : s.lease_epoch;
          const graphHash = s.graph_hash ?? EMPTY_HASH;
          let beforeBytes = 0;
          for (const b of before) {
            const sealed = await sealAfter(ctx, tail, runId, graphHash, b.f, epoch);
            beforeRecs.push(sealed.rec);
            beforeBytes += byteSize(JSON.stringify(sealed.rec));
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
          if (!(await setRunStateTx(tx, runId, outcome, at, patch))) return null;
          const text = JSON.stringify(rec);
          const values = [...new Map(before.flatMap((b) => b.values).map((v) => [v.hash, v] as const)).values()].sort((a, b) =>
            a.hash < b.hash ? -1 : a.hash > b.hash ? 1 : 0,
          );
          const recordBytes = beforeBytes + byteSize(text) + outputBytes + (o.error ? byteSize(JSON.stringify(o.error)) : 0);
          // Not waited for: they travel with the COMMIT (store Tx.run), whose write fails with them.
          const head = { run_id: runId, journal_head: recordHash(rec), graph_hash: graphHash };
          Promise.all([
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
      restage(ctx, runId, staged, e);
      throw e;
    }
    if (rec === null) return false;
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
    return true;
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

/** A value as journal_blobs stores it. */
function prepareValue(value: unknown): PreparedValue {
  return { hash: contentHash(value ?? null), body: JSON.stringify(value ?? null) };
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
