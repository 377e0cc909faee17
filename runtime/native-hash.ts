/**
 * node:crypto's SHA-256 for both programs. `nativeSha256Hex` gives the same
 * hex digests as core's pure-JS default (@noble/hashes), for less CPU: the
 * cell hashes every journal record, blob and presented key with it, the edge
 * every presented key and bundle. `installNativeSha256` puts it behind core's
 * `sha256Hex`/`contentHash` for the whole process (each program's entry
 * calls it once; core stays free of node:). SHA-256 is SHA-256: every hash
 * stays byte-identical, only its cost changes (test/runtime/native-hash.test.ts).
 */
import { createHash, hash } from 'node:crypto';
import { useSha256Hex } from '../core/canonical.ts';

/**
 * Hex SHA-256 with node:crypto's one-shot hash (no hasher object per call); a string is hashed as its
 * UTF-8 bytes, as core's default does.
 */
export function nativeSha256Hex(data: Uint8Array | string): string {
  return hash('sha256', data, 'hex');
}

/** Makes core's `sha256Hex` (and so `contentHash`) use node:crypto in this process. */
export function installNativeSha256(): void {
  useSha256Hex(nativeSha256Hex);
}

/** SHA-256 of bytes with node:crypto's one-shot hash, as bytes: the run log's Merkle hashing (core/transparency/merkle.ts `Sha256`). */
export function nativeSha256(data: Uint8Array): Uint8Array {
  return createHash('sha256').update(data).digest();
}
