/**
 * Signing a receipt (format.ts) with the cell's (or the device's) identity key.
 */
import { b64url } from '../canonical.ts';
import type { JournalSigner } from '../journal/record.ts';
import { RECEIPT_FORMAT_VERSION, RECEIPT_TYPE, receiptSigningBytes, type Receipt, type ReceiptBody } from './format.ts';

/** What the signer states about a run. */
export type ReceiptClaims = Omit<ReceiptBody, 'v' | 'typ' | 'kid'>;

const HASH = /^sha256:[0-9a-f]{64}$/;

/**
 * Returns the signed receipt: `v`, `typ` and the signer's `kid` added, the
 * canonical JSON of the body signed.
 * @throws TypeError on members that are not what format.ts says (a programming mistake).
 * @example const r = await signReceipt({ run_id, graph_hash, journal_seq: 7, journal_head, state: 'completed', output_hash, issuer: cellId, issued_at: now }, signer)
 */
export async function signReceipt(claims: ReceiptClaims, signer: JournalSigner): Promise<Receipt> {
  if (!HASH.test(claims.graph_hash) || !HASH.test(claims.journal_head)) throw new TypeError('signReceipt: hashes are sha256:<hex>');
  if (claims.output_hash !== null && !HASH.test(claims.output_hash))
    throw new TypeError('signReceipt: output_hash is sha256:<hex> or null');
  if (!Number.isSafeInteger(claims.journal_seq) || claims.journal_seq < 1) throw new TypeError('signReceipt: journal_seq is a seq');
  if (!Number.isSafeInteger(claims.issued_at)) throw new TypeError('signReceipt: issued_at is integer milliseconds');
  // Members in RFC 8785 order, as verifiers serialise them.
  const body: ReceiptBody = {
    graph_hash: claims.graph_hash,
    issued_at: claims.issued_at,
    issuer: claims.issuer,
    journal_head: claims.journal_head,
    journal_seq: claims.journal_seq,
    kid: signer.kid,
    output_hash: claims.output_hash,
    run_id: claims.run_id,
    state: claims.state,
    typ: RECEIPT_TYPE,
    v: RECEIPT_FORMAT_VERSION,
  };
  return { ...body, sig: b64url(await signer.sign(receiptSigningBytes(body))) };
}
