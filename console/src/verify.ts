/**
 * Journal verification in the browser, exactly as the cell and the edge do
 * it: core/journal/verify.ts (format, one run id, contiguous seq, one graph
 * hash, the hash chain, a known signer and a valid Ed25519 signature over the
 * RFC 8785 canonical JSON of every record) with WebCrypto, against the keys
 * the cell publishes at `/.well-known/cell-keys.json` (fetched without a
 * credential; current and retired keys). The verdict names the first record
 * that fails. A run's attestation (issue 41) is checked the same way, with
 * core's one verifier, and against the run log's checkpoint this browser saw
 * before (`checkAttestation`).
 */
import { contentHash } from '../../core/canonical.ts';
import { verifyJournal, type JournalVerdict } from '../../core/journal/verify.ts';
import type { JournalRecord } from '../../core/journal/record.ts';
import { verifyAttestation } from '../../core/attestation/bundle.ts';
import { checkConsistent, verifyCheckpoint, type ConsistencyProof } from '../../core/transparency/checkpoint.ts';

export interface CellKeys {
  cell_id: string;
  keys: Map<string, JsonWebKey>;
}

let cached: Promise<CellKeys> | null = null;

/** The cell's published identity keys (cached; `refresh` fetches them again). */
export function cellKeys(refresh = false): Promise<CellKeys> {
  if (refresh || !cached) {
    cached = fetch('/.well-known/cell-keys.json', { credentials: 'omit', cache: 'no-store' }).then(async (r) => {
      if (!r.ok) throw new Error(`the cell's keys are unavailable (HTTP ${r.status})`);
      const body = (await r.json()) as { cell_id: string; keys: { kid: string; jwk: JsonWebKey }[] };
      return { cell_id: body.cell_id, keys: new Map(body.keys.map((k) => [k.kid, k.jwk])) };
    });
    cached.catch(() => {
      cached = null;
    });
  }
  return cached;
}

export interface Verification {
  verdict: JournalVerdict;
  /** Records checked. */
  count: number;
  /** Signer key ids the records name. */
  signers: string[];
}

/** Verifies a run's journal (records in seq order from seq 1). Keys unknown at first are fetched once more. */
export async function verifyRunJournal(records: readonly unknown[]): Promise<Verification> {
  let keys = await cellKeys();
  const kids = [
    ...new Set(records.map((r) => (r as { signer_kid?: unknown }).signer_kid).filter((k): k is string => typeof k === 'string')),
  ];
  if (kids.some((k) => !keys.keys.has(k))) keys = await cellKeys(true);
  const verdict = await verifyJournal(records as JournalRecord[], (kid) => keys.keys.get(kid));
  return { verdict, count: records.length, signers: kids };
}

/** True when `value` is the one the record's hash commits to (RFC 8785 content hash). */
export function valueMatches(value: unknown, hash: string): boolean {
  try {
    return contentHash(value) === hash;
  } catch {
    return false;
  }
}

/** What the browser found of a run's attestation (its DSSE signature, its place in the run log, consistency). */
export type AttestationCheck =
  | { ok: true; keyid: string; origin: string; leaf_index: number; tree_size: number; consistent_with: number | null }
  | { ok: false; reason: string };

const RUN_LOG = '/.well-known/agent-cell/run-log';
const seenKey = (origin: string) => `agent-cell.run-log.checkpoint:${origin}`;

async function consistencyProof(first: number, second: number): Promise<ConsistencyProof> {
  const r = await fetch(`${RUN_LOG}/consistency?first=${first}&second=${second}`, { credentials: 'omit', cache: 'no-store' });
  if (!r.ok) throw new Error(`the run log's consistency proof is unavailable (HTTP ${r.status})`);
  return (await r.json()) as ConsistencyProof;
}

/**
 * Verifies a run's attestation file in this browser with core's verifier (core/attestation/bundle.ts),
 * against the cell's published keys: the DSSE signature, the statement's subjects, the run's inclusion
 * in the signed checkpoint. The largest checkpoint this browser verified before (kept in localStorage,
 * per log) must be consistent with the attestation's (RFC 9162 proof from the public route): a log
 * rewritten since is refused. The larger of the two is kept.
 */
export async function checkAttestation(doc: unknown): Promise<AttestationCheck> {
  let keys = await cellKeys();
  const kid = (doc as { dsse_envelope?: { signatures?: { keyid?: unknown }[] } })?.dsse_envelope?.signatures?.[0]?.keyid;
  if (typeof kid === 'string' && !keys.keys.has(kid)) keys = await cellKeys(true);
  const list = [...keys.keys].map(([k, jwk]) => ({ kid: k, jwk }));
  const alone = await verifyAttestation(doc, list);
  if (!alone.ok) return alone;
  const log = alone.attestation.log!;
  const seen = localStorage.getItem(seenKey(log.origin));
  let consistentWith: number | null = null;
  let keep = log.checkpoint;
  if (seen !== null) {
    const before = await verifyCheckpoint(seen, log.origin, list);
    if (before.ok) {
      const m = before.checkpoint.size;
      const [older, newer] = m <= log.tree_size ? [seen, log.checkpoint] : [log.checkpoint, seen];
      const [a, b] = m <= log.tree_size ? [m, log.tree_size] : [log.tree_size, m];
      const proof = a === b || a === 0 ? undefined : await consistencyProof(a, b);
      const c = await checkConsistent(older, newer, log.origin, list, proof);
      if (!c.ok) return { ok: false, reason: `${c.reason} (checkpoint of ${m} seen before in this browser)` };
      consistentWith = m;
      if (m > log.tree_size) keep = seen;
    }
  }
  localStorage.setItem(seenKey(log.origin), keep);
  return {
    ok: true,
    keyid: alone.attestation.keyid,
    origin: log.origin,
    leaf_index: log.leaf_index,
    tree_size: log.tree_size,
    consistent_with: consistentWith,
  };
}
