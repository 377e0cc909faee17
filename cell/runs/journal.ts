/**
 * Journal persistence: every run's signed, hash-chained journal (format in
 * core/journal/record.ts), written durably to the `journal` table and then
 * published on the run's event stream (events.ts).
 *
 * - `appendJournal(cell, runId, fields)` assigns `seq` (contiguous from 1) and
 *   `prev_hash`, seals the record with the cell's identity key, commits it
 *   (durable before it resolves) and publishes it. Appends to one run are
 *   serialised; a run that is already terminal refuses appends (RunClosedError),
 *   so nothing follows the terminal record.
 * - `finishRun(cell, runId, outcome, ...)` moves a run to a terminal state and
 *   writes its `run_finished` record in the same transaction. The first finisher
 *   wins; later calls are no-ops that return false (idempotent cancel).
 * - `readJournal(cell, runId, afterSeq)` returns the sealed records after `afterSeq`.
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
import type { Cell } from '../context.ts';
import { cellSigner } from '../iam/identity.ts';
import type { Tx } from '../store/types.ts';
import { publish } from './events.ts';
import { getRun, isTerminal, setRunStateTx, type RunError, type RunState } from './runs.ts';
import { byteSize, forgetMeter, meterTx, storageRefusal, type PreparedValue, type RunStorageLimitError } from './storage.ts';

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

interface Tail { seq: number; hash: string }

/** Per-cell journal state: the tail of each active run and the per-run append queue. */
class JournalState {
  readonly tails = new Map<string, Tail>();
  readonly queues = new Map<string, Promise<unknown>>();
}

const states = new WeakMap<Cell, JournalState>();
function stateOf(cell: Cell): JournalState {
  let s = states.get(cell);
  if (!s) { s = new JournalState(); states.set(cell, s); }
  return s;
}

/** Runs `fn` after every earlier append of this run has settled. */
function serialised<T>(cell: Cell, runId: string, fn: () => Promise<T>): Promise<T> {
  const st = stateOf(cell);
  const prev = st.queues.get(runId) ?? Promise.resolve();
  const next = prev.then(fn, fn);
  const settled = next.then(() => undefined, () => undefined);
  st.queues.set(runId, settled);
  void settled.then(() => { if (st.queues.get(runId) === settled) st.queues.delete(runId); });
  return next;
}

function tailOf(cell: Cell, runId: string): Tail {
  const st = stateOf(cell);
  const t = st.tails.get(runId);
  if (t) return t;
  const row = cell.store.get<{ record: string }>('SELECT record FROM journal WHERE run_id = ? ORDER BY seq DESC LIMIT 1', [runId]);
  if (!row) return { seq: 0, hash: GENESIS_HASH };
  const rec = JSON.parse(row.record) as JournalRecord;
  return { seq: rec.seq, hash: recordHash(rec) };
}

async function sealNext(cell: Cell, runId: string, graphHash: string, f: AppendFields): Promise<{ rec: JournalRecord; tail: Tail }> {
  const tail = tailOf(cell, runId);
  const rec = await sealRecord({
    run_id: runId,
    seq: tail.seq + 1,
    step_id: f.step_id,
    kind: f.kind,
    graph_hash: f.graph_hash ?? graphHash,
    input_hash: f.input_hash ?? EMPTY_HASH,
    output_hash: f.output_hash ?? EMPTY_HASH,
    at: f.at ?? cell.clock.now(),
    ...(f.data !== undefined ? { data: f.data } : {}),
  }, tail.hash, cellSigner(cell));
  return { rec, tail: { seq: rec.seq, hash: recordHash(rec) } };
}

function insertTx(tx: Tx, rec: JournalRecord, text: string): void {
  tx.run('INSERT INTO journal (run_id, seq, kind, record) VALUES (?, ?, ?, ?)', [rec.run_id, rec.seq, rec.kind, text]);
}

/** A value as journal_blobs stores it. */
function prepareValue(value: unknown): PreparedValue {
  return { hash: contentHash(value ?? null), body: JSON.stringify(value ?? null) };
}

function putPreparedTx(tx: Tx, v: PreparedValue): void {
  tx.run('INSERT OR IGNORE INTO journal_blobs (hash, body) VALUES (?, ?)', [v.hash, v.body]);
}

/** The run's error when a storage limit ended it. */
export function storageRunError(e: RunStorageLimitError): RunError {
  return { code: 'failed', reason: e.reason, message: e.message, details: e.details() };
}

/** Room kept for the terminal record, which finishRun measures before sealing it (it is always written). */
const TERMINAL_RECORD_ALLOWANCE = 2048;

function graphHashOf(cell: Cell, runId: string): { state: string; graphHash: string } | undefined {
  const r = cell.store.get<{ state: string; graph_hash: string | null }>('SELECT state, graph_hash FROM runs WHERE run_id = ?', [runId]);
  if (!r) return undefined;
  return { state: r.state, graphHash: r.graph_hash ?? EMPTY_HASH };
}

/**
 * Appends one record to a run's journal: sealed, durable, then published.
 * @throws RunClosedError when the run is unknown or terminal.
 */
export function appendJournal(cell: Cell, runId: string, fields: AppendFields, blobs: AppendBlobs = []): Promise<JournalRecord> {
  return serialised(cell, runId, async () => {
    const run = graphHashOf(cell, runId);
    if (!run || isTerminal(run.state)) throw new RunClosedError(runId, run?.state ?? 'unknown');
    const values = blobs.map(prepareValue);
    const { rec, tail } = await sealNext(cell, runId, run.graphHash, fields);
    const text = JSON.stringify(rec);
    // A record carrying a payload is refused past a limit; one carrying none (a refusal, a cancel, a wait) never is.
    const enforce = values.some((v) => v.body !== 'null');
    let metered = () => {};
    await cell.store.write((tx) => {
      const s = tx.get<{ state: string }>('SELECT state FROM runs WHERE run_id = ?', [runId]);
      if (!s || isTerminal(s.state)) throw new RunClosedError(runId, s?.state ?? 'unknown');
      metered = meterTx(cell, tx, runId, byteSize(text), values, enforce);
      for (const v of values) putPreparedTx(tx, v);
      insertTx(tx, rec, text);
    });
    metered();
    stateOf(cell).tails.set(runId, tail);
    publish(cell, rec);
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
export function finishRun(cell: Cell, runId: string, requested: Extract<RunState, 'completed' | 'failed' | 'refused' | 'cancelled'>, opts: FinishOptions = {}): Promise<boolean> {
  return serialised(cell, runId, async () => {
    const run = graphHashOf(cell, runId);
    if (!run || isTerminal(run.state)) return false;
    let outcome = requested;
    let o = opts;
    // The run row keeps its output (a second copy of the last step's): it counts in full.
    let outputBytes = 'output' in o ? byteSize(JSON.stringify(o.output ?? null)) : 0;
    if (outcome === 'completed' && outputBytes > 0) {
      const refused = storageRefusal(cell, runId, TERMINAL_RECORD_ALLOWANCE + outputBytes, []);
      if (refused) {
        // The run did its work but its output does not fit: it ends failed, without it.
        const error = storageRunError(refused);
        outcome = 'failed';
        o = { error, data: { ...o.data, reason: refused.reason } };
        outputBytes = 0;
      }
    }
    const data: JsonObject = { ...o.data, outcome, ...(o.error ? { error: { ...o.error } } : {}) };
    const { rec } = await sealNext(cell, runId, run.graphHash, {
      step_id: 'run', kind: TERMINAL_KIND, output_hash: contentHash(o.output ?? null), data,
    });
    const at = rec.at;
    const text = JSON.stringify(rec);
    let metered = () => {};
    const changed = await cell.store.write((tx) => {
      const patch: { output?: unknown; error?: RunError | null } = {};
      if ('output' in o) patch.output = o.output;
      if (o.error !== undefined) patch.error = o.error;
      if (!setRunStateTx(tx, runId, outcome, at, patch)) return false;
      metered = meterTx(cell, tx, runId, byteSize(text) + outputBytes + (o.error ? byteSize(JSON.stringify(o.error)) : 0), [], false);
      insertTx(tx, rec, text);
      return true;
    });
    if (!changed) return false;
    metered();
    forgetMeter(cell, runId);
    stateOf(cell).tails.delete(runId);
    publish(cell, rec);
    return true;
  });
}

/** The run's sealed records with seq > afterSeq, in order. */
export function readJournal(cell: Cell, runId: string, afterSeq = 0, limit = 100_000): JournalRecord[] {
  return cell.store.all<{ record: string }>('SELECT record FROM journal WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?', [runId, afterSeq, limit])
    .map((r) => JSON.parse(r.record) as JournalRecord);
}

/** Whether the run's journal already holds its terminal record. */
export function journalClosed(cell: Cell, runId: string): boolean {
  return cell.store.get('SELECT 1 AS x FROM journal WHERE run_id = ? AND kind = ? LIMIT 1', [runId, TERMINAL_KIND]) !== undefined;
}

/**
 * Stores a value of a run by content hash (idempotent), metered for that run
 * but not refused (the engine's final output, always a value a step already
 * stored); returns the hash.
 */
export async function putRunBlob(cell: Cell, runId: string, value: unknown): Promise<string> {
  const v = prepareValue(value);
  let metered = () => {};
  await cell.store.write((tx) => {
    metered = meterTx(cell, tx, runId, 0, [v], false);
    putPreparedTx(tx, v);
  });
  metered();
  return v.hash;
}

/** The value stored under `hash`, or undefined. */
export function getBlob(cell: Cell, hash: string): unknown {
  const r = cell.store.get<{ body: string }>('SELECT body FROM journal_blobs WHERE hash = ?', [hash]);
  return r ? (JSON.parse(r.body) as unknown) : undefined;
}

/** Re-exported for routes that need the run row with the journal. */
export { getRun };
