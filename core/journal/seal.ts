/**
 * Sealing a journal record: chain it to the previous record and sign it.
 */
import { b64url } from '../canonical.ts';
import { JOURNAL_FORMAT_VERSION, signingBytes, type JournalRecord, type JournalSigner, type UnsignedRecord } from './record.ts';

/**
 * Returns the sealed record: `v`, `prev_hash` (use GENESIS_HASH for seq 1),
 * `signer_kid` and an Ed25519 signature over the canonical JSON of the rest.
 * @throws TypeError when the fields are not plain JSON (a programming mistake).
 * @example const r = await sealRecord({ run_id, seq: 1, step_id: 'run', kind: 'run_started', graph_hash, input_hash, output_hash, at }, GENESIS_HASH, signer)
 */
export async function sealRecord(unsigned: UnsignedRecord, prevHash: string, signer: JournalSigner): Promise<JournalRecord> {
  const body: Omit<JournalRecord, 'sig'> = {
    v: JOURNAL_FORMAT_VERSION,
    run_id: unsigned.run_id,
    seq: unsigned.seq,
    step_id: unsigned.step_id,
    kind: unsigned.kind,
    graph_hash: unsigned.graph_hash,
    input_hash: unsigned.input_hash,
    output_hash: unsigned.output_hash,
    prev_hash: prevHash,
    at: unsigned.at,
    signer_kid: signer.kid,
    ...(unsigned.data !== undefined ? { data: unsigned.data } : {}),
  };
  const sig = await signer.sign(signingBytes(body));
  return { ...body, sig: b64url(sig) };
}
