/**
 * The signed journal's record format (version 2; version 1 records still verify).
 *
 * A run's journal is a hash chain of records. Each record names the run, its
 * position (`seq`, contiguous from 1), the step it describes, the graph the run
 * executes (`graph_hash`, one per run), the content hashes of the step's input
 * and output (`sha256:` + hex of RFC 8785 canonical JSON; the values themselves
 * are stored beside the journal by hash), the hash of the previous record
 * (`GENESIS_HASH` for the first) and an Ed25519 signature (`sig`, unpadded
 * base64url) by the key `signer_kid` over the canonical JSON of the record
 * without `sig`. `data` is an optional small JSON object for decisions and
 * refusals (reason, contract, choice).
 *
 * Version 2 adds, under the signature, who wrote the record: `cell_id` (the
 * cell that held the run's lease; on an edge device, the device id) and
 * `epoch` (the fencing token of that lease: it never decreases along a
 * journal, and it grows each time another owner takes the run over). A
 * journal written by several cells of a group therefore says, record by
 * record, which cell wrote it under which lease. A journal may start with
 * version 1 records (written before the upgrade) and continue with version 2
 * ones, never the other way round.
 *
 * Changing any field, its meaning, or the bytes that are signed requires a new
 * format version `v`; recorded journals under test/fixtures/journals pin v1 and v2.
 */
import { utf8 } from '../canonical.ts';
import { canonicalText } from '../json-hash.ts';

/** Format version of records written by this code. */
export const JOURNAL_FORMAT_VERSION = 2;

/** Format versions the verifier accepts. */
export const JOURNAL_FORMAT_VERSIONS: readonly number[] = [1, 2];

/** prev_hash of a run's first record. */
export const GENESIS_HASH = 'sha256:' + '0'.repeat(64);

/**
 * Record kinds the engine writes (the verifier accepts any non-empty string so
 * that a newer writer's kinds do not break an older verifier).
 * - `run_started` / `run_finished`: the run's first and last records (data: outcome, reason).
 * - `step`: a completed step; its output is reused on recovery (`output_hash`).
 * - `decision`: gate, approval, delegate and consensus decisions (data: decision, reason, contract...).
 * - `refusal`: a refusal that stops the run (data: reason and what was refused).
 * - `waiting`: the run holds (approval pending, timer not due).
 * - `intent`: a model or tool call is about to be made (data: call, attempt, reissue); a
 *   later drive that finds an intent and no `step` record for the same step id knows the
 *   call was in flight when the previous driver stopped.
 * - `attempt`: one attempt of a call under a step's retry policy has ended (data: call, attempt,
 *   outcome ok | failed, reason, retry_at: the due time of the next attempt); it closes the
 *   attempt's `intent`.
 * - `forked`: the first record of a run forked from another (data.from: the parent's run_id,
 *   the `seq` forked at and the `record_hash` of that parent record). Records the fork reuses
 *   from its parent are copies carrying `data.reused: { run_id, seq, record_hash }` of the
 *   parent record they copy (same kind, step_id, input_hash and output_hash); verify.ts checks
 *   them against the parent's records when they are given.
 */
export type JournalKind = 'run_started' | 'step' | 'decision' | 'refusal' | 'waiting' | 'intent' | 'attempt' | 'forked' | 'run_finished';

/** A small JSON object (no undefined values after canonicalization). */
export type JsonObject = { [k: string]: unknown };

/** Who writes a record: the cell holding the run's lease (or the edge device) and the lease's epoch. */
export interface JournalWriter {
  cell_id: string;
  /** Fencing token of the writer's lease on the run; 0 where there are no leases (the edge). */
  epoch: number;
}

/** The fields a writer supplies; `sealRecord` adds v, prev_hash, signer_kid and sig. */
export interface UnsignedRecord extends JournalWriter {
  run_id: string;
  seq: number;
  step_id: string;
  kind: JournalKind | (string & {});
  graph_hash: string;
  input_hash: string;
  output_hash: string;
  /** Milliseconds since the epoch, from the writer's clock. */
  at: number;
  data?: JsonObject;
}

interface SealedFields {
  run_id: string;
  seq: number;
  step_id: string;
  kind: JournalKind | (string & {});
  graph_hash: string;
  input_hash: string;
  output_hash: string;
  at: number;
  data?: JsonObject;
  prev_hash: string;
  signer_kid: string;
  /** Ed25519 signature, unpadded base64url, over `signingBytes(record)`. */
  sig: string;
}

/** A sealed record of format version 1 (no writer fields): read and verified, never written. */
export interface JournalRecordV1 extends SealedFields {
  v: 1;
}

/** A sealed record of format version 2: the writer's cell id and lease epoch are signed too. */
export interface JournalRecordV2 extends SealedFields, JournalWriter {
  v: 2;
}

/** One sealed journal record. */
export type JournalRecord = JournalRecordV1 | JournalRecordV2;

/** What signs journal records: the cell's (or the edge device's) identity key. */
export interface JournalSigner {
  kid: string;
  sign(bytes: Uint8Array): Promise<Uint8Array>;
}

/** The bytes a record's signature covers: UTF-8 of the canonical JSON of the record without `sig`. */
export function signingBytes(record: Omit<JournalRecordV1, 'sig'> | Omit<JournalRecordV2, 'sig'> | JournalRecord): Uint8Array {
  const { sig: _sig, ...rest } = record as JournalRecord;
  return utf8(canonicalText(rest));
}

/** The writer of a record: its cell id and epoch (version 1 records name none). */
export function writerOf(record: JournalRecord): JournalWriter | null {
  return record.v === 2 ? { cell_id: record.cell_id, epoch: record.epoch } : null;
}
