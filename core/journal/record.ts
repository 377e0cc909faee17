/**
 * The signed journal's record format (version 1).
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
 * Changing any field, its meaning, or the bytes that are signed requires a new
 * format version `v`; recorded journals under test/fixtures/journals pin v1.
 */
import { utf8 } from '../canonical.ts';
import { canonicalText } from '../json-hash.ts';

/** Format version of records written by this code. */
export const JOURNAL_FORMAT_VERSION = 1;

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
 */
export type JournalKind = 'run_started' | 'step' | 'decision' | 'refusal' | 'waiting' | 'run_finished';

/** A small JSON object (no undefined values after canonicalization). */
export type JsonObject = { [k: string]: unknown };

/** The fields a writer supplies; `sealRecord` adds v, prev_hash, signer_kid and sig. */
export interface UnsignedRecord {
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

/** One sealed journal record, format version 1. */
export interface JournalRecord extends UnsignedRecord {
  v: 1;
  prev_hash: string;
  signer_kid: string;
  /** Ed25519 signature, unpadded base64url, over `signingBytes(record)`. */
  sig: string;
}

/** What signs journal records: the cell's (or the edge device's) identity key. */
export interface JournalSigner {
  kid: string;
  sign(bytes: Uint8Array): Promise<Uint8Array>;
}

/** The bytes a record's signature covers: UTF-8 of the canonical JSON of the record without `sig`. */
export function signingBytes(record: Omit<JournalRecord, 'sig'> | JournalRecord): Uint8Array {
  const { sig: _sig, ...rest } = record as JournalRecord;
  return utf8(canonicalText(rest));
}
