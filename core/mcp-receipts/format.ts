/**
 * The MCP receipt (format version 1): what the cell (or an edge device)
 * signs over a run it answers an MCP `tools/call` with, so the client can
 * check later, offline, what ran and what it was answered.
 *
 * A receipt names the run (`run_id`), the graph it executes (`graph_hash`,
 * the compiled graph's content hash: every record of the run's journal
 * carries it), the head of its signed journal when the answer was given
 * (`journal_seq`, the seq of the last record, and `journal_head`, that
 * record's hash: core/journal/hash.ts), the run's `state` then, and
 * `output_hash`, the content hash (`sha256:` + hex of RFC 8785 canonical
 * JSON) of the output the answer carried (null when none). The signer names
 * itself (`issuer`: a cell id, or a device id; `kid`: the RFC 7638
 * thumbprint of its Ed25519 identity key, published at
 * /.well-known/cell-keys.json, or the device's public key) and the time
 * (`issued_at`, integer milliseconds, as signed records carry it).
 * `sig` is an Ed25519 signature, unpadded base64url, over the UTF-8 bytes of
 * the RFC 8785 canonical JSON of every other member.
 *
 * Since the journal is a hash chain whose every record is signed, the head
 * commits to every step before it: given the journal (GET
 * /api/public/v1/admin/jobs/runs/{run_id}/journal, or the MCP tool
 * `journal_verify`), the receipt proves that this journal, up to that
 * record, is what the run had done when the answer was given.
 *
 * Changing a member, its meaning or the signed bytes requires a new `v`;
 * test/fixtures/receipts pins version 1.
 */
import { utf8 } from '../canonical.ts';
import { canonicalText, hashJson } from '../json-hash.ts';

/** `typ` of every receipt. */
export const RECEIPT_TYPE = 'agent-cell.mcp-receipt';

/** Format version of receipts written by this code. */
export const RECEIPT_FORMAT_VERSION = 1;

/** The members a receipt signs. */
export interface ReceiptBody {
  v: 1;
  typ: typeof RECEIPT_TYPE;
  run_id: string;
  graph_hash: string;
  journal_seq: number;
  journal_head: string;
  state: string;
  output_hash: string | null;
  issuer: string;
  kid: string;
  issued_at: number;
}

/** A signed receipt. */
export interface Receipt extends ReceiptBody {
  /** Ed25519 signature, unpadded base64url, over `receiptSigningBytes(body)`. */
  sig: string;
}

/** The bytes a receipt's signature covers: UTF-8 of the canonical JSON of every member but `sig`. */
export function receiptSigningBytes(r: ReceiptBody | Receipt): Uint8Array {
  const { sig: _sig, ...body } = r as Receipt;
  return utf8(canonicalText(body));
}

/**
 * `output_hash` of an output: its content hash, or null for none (null or absent).
 * @throws TypeError when the output is not plain JSON.
 */
export function outputHash(output: unknown): string | null {
  return output === null || output === undefined ? null : hashJson(output);
}
