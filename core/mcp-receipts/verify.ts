/**
 * Verifying an MCP receipt offline (format.ts), alone or against what it
 * speaks of: the output the answer carried and the run's journal.
 *
 * Checks, failing at the first problem: the shape (format version 1, every
 * member of its type, nothing else), a known signer key, the Ed25519
 * signature; then, when given, that the output hashes to `output_hash`; and
 * when the journal is given, that it verifies with the same keys
 * (core/journal/verify.ts), is the journal of `run_id` and `graph_hash`, and
 * holds at `journal_seq` the record whose hash is `journal_head` (records
 * written after the receipt may follow it).
 */
import { fromB64url } from '../canonical.ts';
import { verifyEd25519 } from '../crypto/ed25519.ts';
import { recordHash } from '../journal/hash.ts';
import type { JournalRecord } from '../journal/record.ts';
import { verifyJournal } from '../journal/verify.ts';
import { RECEIPT_TYPE, outputHash, receiptSigningBytes, type Receipt } from './format.ts';

export type ReceiptVerdict = { ok: true; receipt: Receipt } | { ok: false; reason: string };

const HASH = /^sha256:[0-9a-f]{64}$/;
const FIELDS = new Set([
  'v',
  'typ',
  'run_id',
  'graph_hash',
  'journal_seq',
  'journal_head',
  'state',
  'output_hash',
  'issuer',
  'kid',
  'issued_at',
  'sig',
]);

function shapeProblem(r: unknown): string | null {
  if (typeof r !== 'object' || r === null || Array.isArray(r)) return 'malformed: not an object';
  const x = r as Record<string, unknown>;
  if (x['v'] !== 1) return `unsupported format version ${String(x['v'])}`;
  if (x['typ'] !== RECEIPT_TYPE) return 'malformed: typ';
  for (const k of Object.keys(x)) if (!FIELDS.has(k)) return `malformed: unknown field ${k}`;
  for (const f of ['run_id', 'state', 'issuer', 'kid', 'sig'] as const)
    if (typeof x[f] !== 'string' || (x[f] as string).length === 0) return `malformed: ${f}`;
  for (const f of ['graph_hash', 'journal_head'] as const)
    if (typeof x[f] !== 'string' || !HASH.test(x[f] as string)) return `malformed: ${f}`;
  if (x['output_hash'] !== null && (typeof x['output_hash'] !== 'string' || !HASH.test(x['output_hash']))) return 'malformed: output_hash';
  if (!Number.isSafeInteger(x['journal_seq']) || (x['journal_seq'] as number) < 1) return 'malformed: journal_seq';
  if (!Number.isSafeInteger(x['issued_at'])) return 'malformed: issued_at';
  return null;
}

/**
 * Verifies a receipt. `keys(kid)` returns a signer's public JWK, or undefined
 * when unknown (for a cell: its /.well-known/cell-keys.json; for a device:
 * its public key). Never throws on hostile input.
 * @example const v = await verifyReceipt(result.structuredContent.receipt, (kid) => keys.get(kid), { output, journal })
 */
export async function verifyReceipt(
  receipt: unknown,
  keys: (kid: string) => JsonWebKey | undefined,
  opts: { output?: unknown; journal?: readonly JournalRecord[] } = {},
): Promise<ReceiptVerdict> {
  const problem = shapeProblem(receipt);
  if (problem !== null) return { ok: false, reason: problem };
  const r = receipt as Receipt;
  const key = keys(r.kid);
  if (key === undefined) return { ok: false, reason: `unknown signer key ${r.kid}` };
  let sig: Uint8Array;
  try {
    sig = fromB64url(r.sig);
  } catch {
    return { ok: false, reason: 'malformed: sig' };
  }
  if (!(await verifyEd25519(key, receiptSigningBytes(r), sig))) return { ok: false, reason: 'signature does not verify' };
  if ('output' in opts) {
    let h: string | null;
    try {
      h = outputHash(opts.output);
    } catch {
      return { ok: false, reason: 'the output is not plain JSON' };
    }
    if (h !== r.output_hash) return { ok: false, reason: 'the output does not hash to output_hash' };
  }
  if (opts.journal !== undefined) {
    const j = opts.journal;
    const head = j[r.journal_seq - 1];
    if (head === undefined) return { ok: false, reason: `the journal has no record ${r.journal_seq}` };
    const jv = await verifyJournal(j, keys);
    if (!jv.ok) return { ok: false, reason: `journal record ${jv.seq}: ${jv.reason}` };
    if (head.run_id !== r.run_id) return { ok: false, reason: 'the journal is of another run' };
    if (head.graph_hash !== r.graph_hash) return { ok: false, reason: 'the journal executes another graph' };
    if (recordHash(head) !== r.journal_head) return { ok: false, reason: 'journal_head is not the hash of that record' };
  }
  return { ok: true, receipt: r };
}
