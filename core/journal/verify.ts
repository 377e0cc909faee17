/**
 * Verifying a whole journal against the signer's published keys.
 *
 * Checks, record by record, failing at the first problem with its seq:
 * format version, field types, one run id, seq contiguous from 1, one graph
 * hash per run, the hash chain (`prev_hash`), a known signer key and a valid
 * Ed25519 signature over the canonical JSON of the record without `sig`.
 * Signatures are verified with WebCrypto, in parallel batches.
 */
import { canonicalJson, fromB64url } from '../canonical.ts';
import { verifyEd25519 } from '../crypto/ed25519.ts';
import { recordHash } from './hash.ts';
import { GENESIS_HASH, JOURNAL_FORMAT_VERSION, signingBytes, type JournalRecord } from './record.ts';

export type JournalVerdict = { ok: true } | { ok: false; seq: number; reason: string };

const HASH = /^sha256:[0-9a-f]{64}$/;
const BATCH = 256;

function shapeProblem(r: unknown): string | null {
  if (typeof r !== 'object' || r === null || Array.isArray(r)) return 'malformed: not an object';
  const x = r as Record<string, unknown>;
  if (x.v !== JOURNAL_FORMAT_VERSION) return `unsupported format version ${String(x.v)}`;
  for (const f of ['run_id', 'step_id', 'kind', 'signer_kid', 'sig'] as const) {
    if (typeof x[f] !== 'string' || (x[f] as string).length === 0) return `malformed: ${f}`;
  }
  for (const f of ['graph_hash', 'input_hash', 'output_hash', 'prev_hash'] as const) {
    if (typeof x[f] !== 'string' || !HASH.test(x[f] as string)) return `malformed: ${f}`;
  }
  if (!Number.isSafeInteger(x.seq)) return 'malformed: seq';
  if (typeof x.at !== 'number' || !Number.isFinite(x.at)) return 'malformed: at';
  if (x.data !== undefined && (typeof x.data !== 'object' || x.data === null || Array.isArray(x.data))) return 'malformed: data';
  const known = new Set(['v', 'run_id', 'seq', 'step_id', 'kind', 'graph_hash', 'input_hash', 'output_hash', 'prev_hash', 'at', 'signer_kid', 'sig', 'data']);
  for (const k of Object.keys(x)) if (!known.has(k)) return `malformed: unknown field ${k}`;
  try {
    canonicalJson(x);
  } catch {
    return 'malformed: not plain JSON';
  }
  return null;
}

/**
 * Verifies a run's complete journal (records in seq order, starting at seq 1).
 * `keys(kid)` returns the public JWK of a signer, or undefined when unknown.
 * Never throws on hostile input: any problem is `{ ok: false, seq, reason }`.
 */
export async function verifyJournal(
  records: readonly JournalRecord[],
  keys: (kid: string) => JsonWebKey | undefined,
): Promise<JournalVerdict> {
  const first = records[0];
  // Structural pass: shape, run id, seq, graph hash, chain. Cheap, sequential.
  for (let i = 0; i < records.length; i++) {
    const r = records[i] as unknown;
    const seqOf = (x: unknown) => (typeof (x as { seq?: unknown })?.seq === 'number' ? (x as { seq: number }).seq : i + 1);
    const problem = shapeProblem(r);
    if (problem !== null) return { ok: false, seq: seqOf(r), reason: problem };
    const rec = r as JournalRecord;
    if (rec.seq !== i + 1) return { ok: false, seq: rec.seq, reason: `seq not contiguous: expected ${i + 1}` };
    if (rec.run_id !== first!.run_id) return { ok: false, seq: rec.seq, reason: 'run_id differs from the first record' };
    if (rec.graph_hash !== first!.graph_hash) return { ok: false, seq: rec.seq, reason: 'graph_hash differs from the first record' };
    const expectedPrev = i === 0 ? GENESIS_HASH : recordHash(records[i - 1]!);
    if (rec.prev_hash !== expectedPrev) return { ok: false, seq: rec.seq, reason: 'hash chain broken: prev_hash does not match the previous record' };
    if (keys(rec.signer_kid) === undefined) return { ok: false, seq: rec.seq, reason: `unknown signer key ${rec.signer_kid}` };
  }
  // Signature pass: WebCrypto verifications in parallel batches.
  for (let start = 0; start < records.length; start += BATCH) {
    const batch = records.slice(start, start + BATCH);
    const results = await Promise.all(
      batch.map(async (rec) => {
        let sig: Uint8Array;
        try {
          sig = fromB64url(rec.sig);
        } catch {
          return false;
        }
        return verifyEd25519(keys(rec.signer_kid)!, signingBytes(rec), sig);
      }),
    );
    const bad = results.indexOf(false);
    if (bad >= 0) return { ok: false, seq: batch[bad]!.seq, reason: 'signature does not verify' };
  }
  return { ok: true };
}
