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
 * - `readJournal(ctx, runId, afterSeq)` returns the sealed records after `afterSeq`.
 *
 * Step inputs and outputs are stored by content hash in `journal_blobs`
 * (`putBlob` / `getBlob`, or the `blobs` of appendJournal, same transaction);
 * records carry hashes only.
 */
import { contentHash } from '../../core/canonical.ts';
import { recordHash } from '../../core/journal/hash.ts';
import { GENESIS_HASH, type JournalRecord, type JsonObject } from '../../core/journal/record.ts';
import { sealRecord } from '../../core/journal/seal.ts';
import type { Tx } from '../store/types.ts';
import type { JournalTail, RunsContext } from './context.ts';
import { publish } from './events.ts';
import * as repo from './repository.ts';
import { isTerminal, setRunStateTx, type RunError, type RunState } from './runs.ts';

export type { JournalRecord } from '../../core/journal/record.ts';

/** Kind of the last record of every run. Its `data.outcome` is the terminal state. */
export const TERMINAL_KIND = 'run_finished';

/** Thrown by appendJournal when the run is already terminal (or unknown). */
export class RunClosedError extends Error {
  constructor(readonly runId: string, readonly state: string) {
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
  const settled = next.then(() => undefined, () => undefined);
  queues.set(runId, settled);
  void settled.then(() => { if (queues.get(runId) === settled) queues.delete(runId); });
  return next;
}

async function tailOf(ctx: RunsContext, runId: string): Promise<JournalTail> {
  const t = ctx.tails.get(runId);
  if (t) return t;
  const rec = await repo.lastRecord(ctx.core.store, runId);
  return rec ? { seq: rec.seq, hash: recordHash(rec) } : { seq: 0, hash: GENESIS_HASH };
}

async function sealNext(ctx: RunsContext, runId: string, graphHash: string, f: AppendFields): Promise<{ rec: JournalRecord; tail: JournalTail }> {
  const tail = await tailOf(ctx, runId);
  const rec = await sealRecord({
    run_id: runId,
    seq: tail.seq + 1,
    step_id: f.step_id,
    kind: f.kind,
    graph_hash: f.graph_hash ?? graphHash,
    input_hash: f.input_hash ?? EMPTY_HASH,
    output_hash: f.output_hash ?? EMPTY_HASH,
    at: f.at ?? ctx.core.clock.now(),
    ...(f.data !== undefined ? { data: f.data } : {}),
  }, tail.hash, ctx.iam.signer());
  return { rec, tail: { seq: rec.seq, hash: recordHash(rec) } };
}

/**
 * Appends one record to a run's journal: sealed, durable, then published.
 * @throws RunClosedError when the run is unknown or terminal.
 */
export function appendJournal(ctx: RunsContext, runId: string, fields: AppendFields, blobs: AppendBlobs = []): Promise<JournalRecord> {
  return serialised(ctx, runId, async () => {
    const run = await repo.runHead(ctx.core.store, runId);
    if (!run || isTerminal(run.state)) throw new RunClosedError(runId, run?.state ?? 'unknown');
    const { rec, tail } = await sealNext(ctx, runId, run.graph_hash ?? EMPTY_HASH, fields);
    await ctx.core.store.write(async (tx) => {
      const s = await repo.runHead(tx, runId);
      if (!s || isTerminal(s.state)) throw new RunClosedError(runId, s?.state ?? 'unknown');
      for (const b of blobs) await putBlobTx(tx, b);
      await repo.insertRecord(tx, rec);
    });
    ctx.tails.set(runId, tail);
    publish(ctx, rec);
    return rec;
  });
}

export interface FinishOptions {
  output?: unknown;
  error?: RunError | null;
  /** Extra fields for the terminal record's `data`. */
  data?: JsonObject;
}

/**
 * Moves a run to a terminal state and writes its `run_finished` record in one
 * transaction. Returns false (changing nothing) when it is already terminal.
 */
export function finishRun(ctx: RunsContext, runId: string, outcome: Extract<RunState, 'completed' | 'failed' | 'refused' | 'cancelled'>, o: FinishOptions = {}): Promise<boolean> {
  return serialised(ctx, runId, async () => {
    const run = await repo.runHead(ctx.core.store, runId);
    if (!run || isTerminal(run.state)) return false;
    const data: JsonObject = { ...o.data, outcome, ...(o.error ? { error: { ...o.error } } : {}) };
    const { rec } = await sealNext(ctx, runId, run.graph_hash ?? EMPTY_HASH, {
      step_id: 'run', kind: TERMINAL_KIND, output_hash: contentHash(o.output ?? null), data,
    });
    const at = rec.at;
    const changed = await ctx.core.store.write(async (tx) => {
      const patch: { output?: unknown; error?: RunError | null } = {};
      if ('output' in o) patch.output = o.output;
      if (o.error !== undefined) patch.error = o.error;
      if (!(await setRunStateTx(tx, runId, outcome, at, patch))) return false;
      await repo.insertRecord(tx, rec);
      return true;
    });
    if (!changed) return false;
    ctx.tails.delete(runId);
    publish(ctx, rec);
    return true;
  });
}

/** The run's sealed records with seq > afterSeq, in order. */
export function readJournal(ctx: RunsContext, runId: string, afterSeq = 0, limit = 100_000): Promise<JournalRecord[]> {
  return repo.records(ctx.core.store, runId, afterSeq, limit);
}

/** Whether the run's journal already holds its terminal record. */
export function journalClosed(ctx: RunsContext, runId: string): Promise<boolean> {
  return repo.hasRecordOfKind(ctx.core.store, runId, TERMINAL_KIND);
}

/** Stores a value by content hash inside a transaction (idempotent); returns the hash. */
export async function putBlobTx(tx: Tx, value: unknown): Promise<string> {
  const hash = contentHash(value ?? null);
  await repo.putBlob(tx, hash, JSON.stringify(value ?? null));
  return hash;
}

/** Stores a value by content hash (idempotent); returns the hash. */
export function putBlob(ctx: RunsContext, value: unknown): Promise<string> {
  return ctx.core.store.write((tx) => putBlobTx(tx, value));
}

/** The value stored under `hash`, or undefined. */
export function getBlob(ctx: RunsContext, hash: string): Promise<unknown> {
  return repo.blob(ctx.core.store, hash);
}
