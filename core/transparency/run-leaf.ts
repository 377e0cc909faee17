/**
 * The entry the run log holds for a finished run: its id, the hash of its
 * journal's last record (which commits to the whole chain) and its graph
 * hash. The leaf's data is the RFC 8785 canonical JSON
 *   {"graph_hash":…,"journal_head":…,"run_id":…,"v":1}
 * and its hash is the RFC 9162 leaf hash of those bytes (merkle.ts). One
 * leaf per run: a second leaf for one run id in a log is evidence that two
 * journals were shown for it.
 */
import { canonicalJson, utf8 } from '../canonical.ts';
import { leafHash, type Sha256 } from './merkle.ts';

/** Format version of the run log's leaves. */
export const RUN_LEAF_VERSION = 1;

/** A run's head as the log records it. */
export interface RunHead {
  run_id: string;
  /** `sha256:` + hex: recordHash of the journal's last record. */
  journal_head: string;
  /** `sha256:` + hex: the run's graph hash. */
  graph_hash: string;
}

/** The leaf's data: canonical JSON of the head with its version. */
export function runLeafData(h: RunHead): Uint8Array {
  return utf8(canonicalJson({ graph_hash: h.graph_hash, journal_head: h.journal_head, run_id: h.run_id, v: RUN_LEAF_VERSION }));
}

/** The leaf hash of a run's head (RFC 9162: SHA-256(0x00 || data)). */
export function runLeafHash(h: RunHead, sha256?: Sha256): Uint8Array {
  return leafHash(runLeafData(h), sha256);
}
