/**
 * Journal verification in the browser, exactly as the cell and the edge do
 * it: core/journal/verify.ts (format, one run id, contiguous seq, one graph
 * hash, the hash chain, a known signer and a valid Ed25519 signature over the
 * RFC 8785 canonical JSON of every record) with WebCrypto, against the keys
 * the cell publishes at `/.well-known/cell-keys.json` (fetched without a
 * credential; current and retired keys). The verdict names the first record
 * that fails.
 */
import { contentHash } from '../../core/canonical.ts';
import { verifyJournal, type JournalVerdict } from '../../core/journal/verify.ts';
import type { JournalRecord } from '../../core/journal/record.ts';

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
