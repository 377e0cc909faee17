/**
 * Sealing a journal record: chain it to the previous record and sign it.
 */
import { b64url } from '../canonical.ts';
import { sortedKeys } from '../json-hash.ts';
import { signingBytes, type JournalRecordV2, type JournalSigner, type UnsignedRecord } from './record.ts';

/**
 * Returns the sealed record (format version 2): `v`, `prev_hash` (use
 * GENESIS_HASH for seq 1), `signer_kid` and an Ed25519 signature over the
 * canonical JSON of the rest, which includes the writer's `cell_id` and `epoch`.
 * @throws TypeError when the fields are not plain JSON (a programming mistake).
 * @example const r = await sealRecord({ run_id, seq: 1, step_id: 'run', kind: 'run_started', graph_hash, input_hash, output_hash, at, cell_id, epoch: 1 }, GENESIS_HASH, signer)
 */
export async function sealRecord(unsigned: UnsignedRecord, prevHash: string, signer: JournalSigner): Promise<JournalRecordV2> {
  if (typeof unsigned.cell_id !== 'string' || unsigned.cell_id === '') throw new TypeError('sealRecord: cell_id is required');
  if (!Number.isSafeInteger(unsigned.epoch) || unsigned.epoch < 0) throw new TypeError('sealRecord: epoch must be a non-negative integer');
  // Keys in RFC 8785 order (the canonical form is the same either way; this order lets
  // hashing and verification serialize with native JSON.stringify).
  const body: Omit<JournalRecordV2, 'sig'> = {
    at: unsigned.at,
    cell_id: unsigned.cell_id,
    ...(unsigned.data !== undefined ? { data: sortedKeys(unsigned.data) } : {}),
    epoch: unsigned.epoch,
    graph_hash: unsigned.graph_hash,
    input_hash: unsigned.input_hash,
    kind: unsigned.kind,
    output_hash: unsigned.output_hash,
    prev_hash: prevHash,
    run_id: unsigned.run_id,
    seq: unsigned.seq,
    signer_kid: signer.kid,
    step_id: unsigned.step_id,
    v: 2,
  };
  const sig = await signer.sign(signingBytes(body));
  const { at, cell_id, data, epoch, graph_hash, input_hash, kind, output_hash, prev_hash, run_id, seq, signer_kid, step_id, v } = body;
  return {
    at,
    cell_id,
    ...(data !== undefined ? { data } : {}),
    epoch,
    graph_hash,
    input_hash,
    kind,
    output_hash,
    prev_hash,
    run_id,
    seq,
    sig: b64url(sig),
    signer_kid,
    step_id,
    v,
  };
}
