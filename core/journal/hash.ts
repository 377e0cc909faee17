/**
 * Hash of a sealed journal record: the link the next record's `prev_hash` carries.
 */
import { hashJson } from '../json-hash.ts';
import type { JournalRecord } from './record.ts';

/** `sha256:` + hex SHA-256 of the canonical JSON of the whole record, signature included. */
export function recordHash(record: JournalRecord): string {
  return hashJson(record);
}
