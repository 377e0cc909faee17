/**
 * The lineage of a forked run's journal (record kinds in record.ts): a
 * `forked` record opens it and names the parent run, the parent record's seq
 * it was forked at and that record's hash; the records it reuses from the
 * parent are copies that name the parent record they copy
 * (`data.reused: { run_id, seq, record_hash }`).
 *
 * `lineageProblem` checks that shape on the journal alone; with the parent's
 * records (its journal from seq 1 through the fork point, as a journal export
 * carries them, and the parent's own parent for a fork of a fork) it checks
 * that the fork point's hash is the parent record's hash and that every copy
 * is the parent record it names (same kind, step_id, input_hash, output_hash,
 * hash). The parent's records are verified with the same verifier by the
 * caller (verify.ts), so the chain of every ancestor is checked too.
 */
import { recordHash } from './hash.ts';
import type { JournalRecord } from './record.ts';

/** A parent's journal as a verifier is given it: records from seq 1 through the fork point at least. */
export interface ParentJournal {
  records: readonly JournalRecord[];
  /** The parent's own parent, when the parent is a fork too. */
  parent?: ParentJournal;
}

/** What a `forked` record says: the parent run, the seq forked at and that parent record's hash. */
export interface ForkPoint {
  run_id: string;
  seq: number;
  record_hash: string;
}

const HASH = /^sha256:[0-9a-f]{64}$/;

function pointOf(v: unknown): ForkPoint | null {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return null;
  const x = v as Record<string, unknown>;
  if (typeof x['run_id'] !== 'string' || x['run_id'].length === 0) return null;
  if (!Number.isSafeInteger(x['seq']) || (x['seq'] as number) < 1) return null;
  if (typeof x['record_hash'] !== 'string' || !HASH.test(x['record_hash'])) return null;
  return { run_id: x['run_id'], seq: x['seq'] as number, record_hash: x['record_hash'] };
}

/** The fork point of a journal whose first record is `forked`, or null. */
export function forkPointOf(records: readonly JournalRecord[]): ForkPoint | null {
  const first = records[0];
  return first?.kind === 'forked' ? pointOf(first.data?.['from']) : null;
}

/** The first lineage problem of a structurally valid journal, as { seq, reason }, or null. */
export function lineageProblem(records: readonly JournalRecord[], parent?: ParentJournal): { seq: number; reason: string } | null {
  const first = records[0];
  if (first === undefined) return null;
  const forked = first.kind === 'forked';
  const from = forked ? pointOf(first.data?.['from']) : null;
  if (forked && from === null) return { seq: first.seq, reason: 'forked: data.from must name run_id, seq and record_hash' };
  if (from !== null && from.run_id === first.run_id) return { seq: first.seq, reason: 'forked: a run cannot be forked from itself' };
  for (const r of records) {
    if (r.kind === 'forked' && r.seq !== 1) return { seq: r.seq, reason: 'forked: the forked record must open the journal' };
    const reused = r.data?.['reused'];
    if (reused === undefined) continue;
    if (from === null) return { seq: r.seq, reason: 'reused: a record copied from a parent in a journal that was not forked' };
    const p = pointOf(reused);
    if (p === null || p.run_id !== from.run_id || p.seq >= from.seq)
      return { seq: r.seq, reason: 'reused: must name a record of the parent before the fork point' };
  }
  if (from === null || parent === undefined) return null;
  const prs = parent.records;
  if (prs[0]?.run_id !== from.run_id) return { seq: first.seq, reason: 'forked: the parent journal given is of another run' };
  const at = prs[from.seq - 1];
  if (at === undefined || at.seq !== from.seq || recordHash(at) !== from.record_hash)
    return { seq: first.seq, reason: "forked: record_hash is not the parent record's hash" };
  for (const r of records) {
    const p = pointOf(r.data?.['reused']);
    if (p === null) continue;
    const src = prs[p.seq - 1];
    if (
      src === undefined ||
      src.seq !== p.seq ||
      recordHash(src) !== p.record_hash ||
      src.kind !== r.kind ||
      src.step_id !== r.step_id ||
      src.input_hash !== r.input_hash ||
      src.output_hash !== r.output_hash
    )
      return { seq: r.seq, reason: 'reused: the record is not the parent record it names' };
  }
  return null;
}
