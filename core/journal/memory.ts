/**
 * An in-memory journal: the journal and recorded ports over an array of sealed
 * records and a Map of content-addressed values. For tests, benchmarks and the
 * edge (which persists `records` and `blobs` itself). Seals and signs every
 * record exactly as the cell does.
 */
import type { JournalPort, RecordedStep } from '../engine/types.ts';
import { recordHash } from './hash.ts';
import { GENESIS_HASH, type JournalRecord, type JournalSigner } from './record.ts';
import { isReusable } from './recorded.ts';
import { sealRecord } from './seal.ts';

export interface MemoryJournal {
  records: JournalRecord[];
  blobs: Map<string, unknown>;
  port: JournalPort;
  recorded(stepId: string): Promise<RecordedStep | undefined>;
}

/** A journal for one run. Pass existing records/blobs to continue a journal (recovery). */
export function memoryJournal(
  runId: string,
  signer: JournalSigner,
  existing?: { records: JournalRecord[]; blobs: Map<string, unknown> },
): MemoryJournal {
  const records = existing?.records ?? [];
  const blobs = existing?.blobs ?? new Map<string, unknown>();
  const last = records[records.length - 1];
  let head = last !== undefined ? recordHash(last) : GENESIS_HASH;
  const index = new Map<string, JournalRecord>();
  for (const r of records) if (isReusable(r.kind)) index.set(r.step_id, r);
  let tail: Promise<unknown> = Promise.resolve();
  const port: JournalPort = {
    append(fields, payload) {
      // Serialize appends so seq and the chain stay contiguous even if called concurrently.
      const p = tail.then(async () => {
        const rec = await sealRecord({ run_id: runId, seq: records.length + 1, ...fields }, head, signer);
        head = recordHash(rec);
        records.push(rec);
        if (!blobs.has(fields.input_hash)) blobs.set(fields.input_hash, payload.input);
        if (!blobs.has(fields.output_hash)) blobs.set(fields.output_hash, payload.output);
        if (isReusable(rec.kind)) index.set(rec.step_id, rec);
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
      return r.data !== undefined ? { output, data: r.data } : { output };
    },
  };
}
