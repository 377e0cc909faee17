/**
 * Verifying a whole journal against the signers' published keys.
 *
 * Checks, record by record, failing at the first problem with its seq:
 * format version (1 or 2, never back from 2 to 1), field types, one run id,
 * seq contiguous from 1, one graph hash per run, epochs that never decrease
 * (version 2: a record written under an older lease after a newer one is a
 * fenced writer's), the hash chain (`prev_hash`), a known signer key and a
 * valid Ed25519 signature over the canonical JSON of the record without `sig`.
 * Signatures are verified with WebCrypto, in parallel batches.
 *
 * A forked run's journal (lineage.ts) is checked too: its `forked` record
 * opens it, its reused records name parent records before the fork point,
 * and, given the parent's records (`opts.parent`, as a journal export carries
 * them), the parent's journal verifies with the same keys and the fork point
 * and every reused record are the parent's records they name.
 */
import { canonicalJson, fromB64url } from '../canonical.ts';
import { verifyEd25519 } from '../crypto/ed25519.ts';
import { recordHash } from './hash.ts';
import { lineageProblem, type ParentJournal } from './lineage.ts';
import { GENESIS_HASH, signingBytes, type JournalRecord } from './record.ts';

export type JournalVerdict = { ok: true } | { ok: false; seq: number; reason: string };

const HASH = /^sha256:[0-9a-f]{64}$/;
const BATCH = 256;

const V1_FIELDS = new Set([
  'v',
  'run_id',
  'seq',
  'step_id',
  'kind',
  'graph_hash',
  'input_hash',
  'output_hash',
  'prev_hash',
  'at',
  'signer_kid',
  'sig',
  'data',
]);
const V2_FIELDS = new Set([...V1_FIELDS, 'cell_id', 'epoch']);

function shapeProblem(r: unknown): string | null {
  if (typeof r !== 'object' || r === null || Array.isArray(r)) return 'malformed: not an object';
  const x = r as Record<string, unknown>;
  if (x.v !== 1 && x.v !== 2) return `unsupported format version ${String(x.v)}`;
  for (const f of ['run_id', 'step_id', 'kind', 'signer_kid', 'sig'] as const) {
    if (typeof x[f] !== 'string' || (x[f] as string).length === 0) return `malformed: ${f}`;
  }
  for (const f of ['graph_hash', 'input_hash', 'output_hash', 'prev_hash'] as const) {
    if (typeof x[f] !== 'string' || !HASH.test(x[f] as string)) return `malformed: ${f}`;
  }
  if (!Number.isSafeInteger(x.seq)) return 'malformed: seq';
  if (typeof x.at !== 'number' || !Number.isFinite(x.at)) return 'malformed: at';
  if (x.data !== undefined && (typeof x.data !== 'object' || x.data === null || Array.isArray(x.data))) return 'malformed: data';
  if (x.v === 2) {
    if (typeof x.cell_id !== 'string' || x.cell_id.length === 0) return 'malformed: cell_id';
    if (!Number.isSafeInteger(x.epoch) || (x.epoch as number) < 0) return 'malformed: epoch';
  }
  const known = x.v === 2 ? V2_FIELDS : V1_FIELDS;
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
  opts: { parent?: ParentJournal } = {},
): Promise<JournalVerdict> {
  const first = records[0];
  // Structural pass: shape, run id, seq, graph hash, versions and epochs, chain, known key.
  // Cheap, sequential; stops at the first problem.
  let structural: { index: number; verdict: JournalVerdict } | null = null;
  let lastEpoch = -1;
  let seenV2 = false;
  for (let i = 0; i < records.length && structural === null; i++) {
    const r = records[i] as unknown;
    const seq = typeof (r as { seq?: unknown })?.seq === 'number' ? (r as { seq: number }).seq : i + 1;
    const fail = (reason: string) => (structural = { index: i, verdict: { ok: false, seq, reason } });
    const problem = shapeProblem(r);
    if (problem !== null) {
      fail(problem);
      break;
    }
    const rec = r as JournalRecord;
    if (rec.seq !== i + 1) fail(`seq not contiguous: expected ${i + 1}`);
    else if (rec.run_id !== first!.run_id) fail('run_id differs from the first record');
    else if (rec.graph_hash !== first!.graph_hash) fail('graph_hash differs from the first record');
    else if (rec.v === 1 && seenV2) fail('format version 1 after version 2');
    else if (rec.v === 2 && rec.epoch < lastEpoch) fail(`epoch went back: ${rec.epoch} after ${lastEpoch}`);
    else if (rec.prev_hash !== (i === 0 ? GENESIS_HASH : recordHash(records[i - 1]!)))
      fail('hash chain broken: prev_hash does not match the previous record');
    else if (keys(rec.signer_kid) === undefined) fail(`unknown signer key ${rec.signer_kid}`);
    if (rec.v === 2) {
      seenV2 = true;
      lastEpoch = Math.max(lastEpoch, rec.epoch);
    }
  }
  // Signature pass over the records before the first structural problem (a tampered record
  // also breaks the next record's link: the signature names the record actually changed).
  const limit = structural === null ? records.length : (structural as { index: number }).index;
  for (let start = 0; start < limit; start += BATCH) {
    const batch = records.slice(start, Math.min(start + BATCH, limit));
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
  if (structural !== null) return (structural as { verdict: JournalVerdict }).verdict;
  if (opts.parent !== undefined) {
    const pv = await verifyJournal(opts.parent.records, keys, opts.parent.parent !== undefined ? { parent: opts.parent.parent } : {});
    if (!pv.ok) return { ok: false, seq: 1, reason: `parent journal, record ${pv.seq}: ${pv.reason}` };
  }
  const lineage = lineageProblem(records, opts.parent);
  return lineage === null ? { ok: true } : { ok: false, ...lineage };
}
