/**
 * An in-memory journal: the journal, recorded and intents ports over an array
 * of sealed records and a Map of content-addressed values. For tests,
 * benchmarks and the edge (which persists `records` and `blobs` itself). Seals
 * and signs every record exactly as the cell does.
 */
import type { JournalPort, RecordedStep } from '../engine/types.ts';
import { recordHash } from './hash.ts';
import { GENESIS_HASH, type JournalRecord, type JournalSigner, type JournalWriter } from './record.ts';
import { isReusable } from './recorded.ts';
import { sealRecord } from './seal.ts';

/** A JSON value as it is now (values are plain JSON: content-addressed by their canonical text). */
function snapshot(v: unknown): unknown {
  return typeof v === 'object' && v !== null ? (JSON.parse(JSON.stringify(v)) as unknown) : v;
}

export interface MemoryJournal {
  records: JournalRecord[];
  blobs: Map<string, unknown>;
  port: JournalPort;
  recorded(stepId: string): Promise<RecordedStep | undefined>;
  /** Intent records of a step with no reusable record after them (calls that were in flight). */
  intents(stepId: string): Promise<number>;
  /** `attempt` records of a call's step id so far, and the due time of the next attempt (core/engine internal/attempts.ts). */
  attempts(stepId: string): Promise<{ count: number; retry_at: number | null }>;
}

/**
 * A journal for one run. Pass existing records/blobs to continue a journal
 * (recovery). `writer` names who writes (default: the signer's kid, epoch 0,
 * as on an edge device, whose key id is its device id).
 */
export function memoryJournal(
  runId: string,
  signer: JournalSigner,
  existing?: { records: JournalRecord[]; blobs: Map<string, unknown> },
  writer: JournalWriter = { cell_id: signer.kid, epoch: 0 },
): MemoryJournal {
  const records = existing?.records ?? [];
  const blobs = existing?.blobs ?? new Map<string, unknown>();
  const last = records[records.length - 1];
  let head = last !== undefined ? recordHash(last) : GENESIS_HASH;
  const index = new Map<string, JournalRecord>();
  const intents = new Map<string, number>();
  const attempts = new Map<string, { count: number; retry_at: number | null }>();
  const note = (r: JournalRecord) => {
    if (isReusable(r.kind)) {
      index.set(r.step_id, r);
      intents.delete(r.step_id);
    } else if (r.kind === 'attempt') {
      intents.delete(r.step_id);
      const at = r.data?.['retry_at'];
      attempts.set(r.step_id, { count: (attempts.get(r.step_id)?.count ?? 0) + 1, retry_at: typeof at === 'number' ? at : null });
    } else if (r.kind === 'intent') intents.set(r.step_id, (intents.get(r.step_id) ?? 0) + 1);
  };
  for (const r of records) note(r);
  let tail: Promise<unknown> = Promise.resolve();
  const port: JournalPort = {
    append(fields, payload) {
      // Serialize appends so seq and the chain stay contiguous even if called concurrently.
      const p = tail.then(async () => {
        const rec = await sealRecord({ run_id: runId, seq: records.length + 1, ...fields, ...writer }, head, signer);
        head = recordHash(rec);
        records.push(rec);
        // A copy as the value was when hashed: the engine goes on with its objects (a step's conversation
        // grows after its model call), and a kept reference would no longer match its hash.
        if (!blobs.has(fields.input_hash)) blobs.set(fields.input_hash, snapshot(payload.input));
        if (!blobs.has(fields.output_hash)) blobs.set(fields.output_hash, snapshot(payload.output));
        note(rec);
      });
      tail = p.catch(() => undefined);
      return p;
    },
  };
  return {
    records,
    blobs,
    port,
    async recorded(stepId) {
      const r = index.get(stepId);
      if (r === undefined) return undefined;
      if (!blobs.has(r.output_hash)) throw new TypeError(`journal: output of step ${stepId} is missing`);
      const output = blobs.get(r.output_hash);
      return r.data !== undefined ? { output, data: r.data, input_hash: r.input_hash } : { output, input_hash: r.input_hash };
    },
    async intents(stepId) {
      return intents.get(stepId) ?? 0;
    },
    async attempts(stepId) {
      return attempts.get(stepId) ?? { count: 0, retry_at: null };
    },
  };
}
