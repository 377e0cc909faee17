/**
 * Sealing a journal record: chain it to the previous record and sign it.
 */
import { b64url } from '../canonical.ts';
import { sortedKeys } from '../json-hash.ts';
import { JOURNAL_FORMAT_VERSION, signingBytes, type JournalRecord, type JournalSigner, type UnsignedRecord } from './record.ts';

/**
 * Returns the sealed record: `v`, `prev_hash` (use GENESIS_HASH for seq 1),
 * `signer_kid` and an Ed25519 signature over the canonical JSON of the rest.
 * @throws TypeError when the fields are not plain JSON (a programming mistake).
 * @example const r = await sealRecord({ run_id, seq: 1, step_id: 'run', kind: 'run_started', graph_hash, input_hash, output_hash, at }, GENESIS_HASH, signer)
 */
export async function sealRecord(unsigned: UnsignedRecord, prevHash: string, signer: JournalSigner): Promise<JournalRecord> {
  // Keys in RFC 8785 order (the canonical form is the same either way; this order lets
  // hashing and verification serialize with native JSON.stringify).
  const body: Omit<JournalRecord, 'sig'> = {
    at: unsigned.at,
    ...(unsigned.data !== undefined ? { data: sortedKeys(unsigned.data) } : {}),
    graph_hash: unsigned.graph_hash,
    input_hash: unsigned.input_hash,
    kind: unsigned.kind,
    output_hash: unsigned.output_hash,
    prev_hash: prevHash,
    run_id: unsigned.run_id,
    seq: unsigned.seq,
    signer_kid: signer.kid,
    step_id: unsigned.step_id,
    v: JOURNAL_FORMAT_VERSION,
  };
  const sig = await signer.sign(signingBytes(body));
  const { at, data, graph_hash, input_hash, kind, output_hash, prev_hash, run_id, seq, signer_kid, step_id, v } = body;
  return {
    at,
    ...(data !== undefined ? { data } : {}),
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
