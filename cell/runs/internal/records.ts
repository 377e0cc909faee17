/**
 * What a journal write does to each record before it stores it (journal.ts,
 * group-commit.ts): the fields stamped and their values prepared, the run's
 * tail as the writing transaction read it, and the record sealed after it.
 */
import { contentHash } from '../../../core/canonical.ts';
import { recordHash } from '../../../core/journal/hash.ts';
import { GENESIS_HASH, type JournalRecord, type JsonObject } from '../../../core/journal/record.ts';
import { sealRecord } from '../../../core/journal/seal.ts';
import type { Tx } from '../../store/types.ts';
import type { JournalTail, RunsContext } from '../context.ts';
import { assertFence, type Fence } from '../lease.ts';
import * as repo from '../repository.ts';
import { isTerminal } from '../runs.ts';
import type { PreparedValue } from '../storage.ts';

/** The content hash of null: a record's input or output hash when it has none. */
export const EMPTY_HASH = contentHash(null);

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

/** One record of an append: its fields and the values it stores by content hash. */
export interface AppendEntry {
  fields: AppendFields;
  blobs: AppendBlobs;
  /**
   * The content hashes of `blobs`, in order, when the writer has them already (the engine's
   * `input_hash` and `output_hash`, computed from the same values: core/engine JournalPort).
   */
  blobHashes?: readonly string[];
}

export interface PreparedEntry {
  f: AppendFields;
  values: PreparedValue[];
  /** A record carrying a payload is refused past a limit; one carrying none (a refusal, a cancel, a wait) never is. */
  enforce: boolean;
}

/** A value as journal_blobs stores it. */
export function prepareValue(value: unknown, hash?: string): PreparedValue {
  return { hash: hash ?? contentHash(value ?? null), body: JSON.stringify(value ?? null) };
}

/** Values in hash order: two appends storing the same values lock their rows in the same order. */
export function byHash(a: PreparedValue, b: PreparedValue): number {
  return a.hash < b.hash ? -1 : a.hash > b.hash ? 1 : 0;
}

export function prepareEntry(ctx: RunsContext, e: AppendEntry): PreparedEntry {
  const values = e.blobs.map((b, i) => prepareValue(b, e.blobHashes?.[i])).sort(byHash);
  return {
    f: stamped(ctx, e.fields),
    values,
    enforce: values.some((v) => v.body !== 'null'),
  };
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

/** The run's tail given its last seq as the writing transaction read it (the cache saves re-hashing the record). */
export async function tailAt(ctx: RunsContext, tx: Tx, runId: string, seq: number): Promise<JournalTail> {
  if (seq === 0) return { seq: 0, hash: GENESIS_HASH };
  const t = ctx.tails.get(runId);
  if (t && t.seq === seq) return t;
  const rec = await repo.lastRecord(tx, runId);
  return rec ? { seq: rec.seq, hash: recordHash(rec) } : { seq: 0, hash: GENESIS_HASH };
}

/** Seals the record that follows `tail`. */
export async function sealAfter(
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

/** Thrown by appendJournal (journal.ts) when the run is already terminal (or unknown). */
export class RunClosedError extends Error {
  constructor(
    readonly runId: string,
    readonly state: string,
  ) {
    super(`run ${runId} is ${state}: its journal is closed`);
    this.name = 'RunClosedError';
  }
}

/**
 * The first statement of a run's journal write: locks the run's row and
 * stamps its progress (repo.lockRunHead), so that the transaction, running
 * with row locks rather than serializable, reads the run's tail after every
 * other writer of that run; returns the run's head.
 * @throws RunClosedError when the run is unknown or terminal.
 * @throws LeaseLostError when `fence` is no longer the run's lease.
 */
export async function lockRun(ctx: RunsContext, tx: Tx, runId: string, at: number, fence: Fence | undefined): Promise<repo.RunHead> {
  const me = ctx.core.config.cellId;
  const locked = await repo.lockRunHead(tx, runId, at, fence ? { owner: me, epoch: fence.epoch } : null);
  if (locked) return locked;
  // Nothing matched: say why (a terminal or unknown run, or a lease that is not this driver's).
  const s = await repo.runHead(tx, runId);
  if (!s || isTerminal(s.state)) throw new RunClosedError(runId, s?.state ?? 'unknown');
  if (fence) assertFence(ctx, runId, s, fence);
  throw new RunClosedError(runId, s.state);
}
