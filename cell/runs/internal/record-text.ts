/** The JSON text of sealed journal records, serialized once (the storage meter, the journal row, the event stream). */
import type { JournalRecord } from '../../../core/journal/record.ts';

const texts = new WeakMap<JournalRecord, string>();

/**
 * A sealed record's JSON text, serialized once however many times it is measured, stored and sent
 * (the storage meter, the journal row, the event stream's frame). A sealed record is never changed.
 */
export function recordText(rec: JournalRecord): string {
  let t = texts.get(rec);
  if (t === undefined) {
    t = JSON.stringify(rec);
    texts.set(rec, t);
  }
  return t;
}
