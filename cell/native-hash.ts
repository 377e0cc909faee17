/**
 * Installs node:crypto's SHA-256 behind core's `sha256Hex`/`contentHash` for the
 * cell process (imported for its effect by cell/app.ts). The hashes are the same
 * bytes as core's pure-JS default (@noble/hashes); node:crypto only costs less CPU,
 * which matters on the run path (every journal record and blob is hashed).
 */
import { hash } from 'node:crypto';
import { useSha256Hex } from '../core/canonical.ts';

/**
 * Hex SHA-256 with node:crypto's one-shot hash (no hasher object per call); a string is hashed as its
 * UTF-8 bytes, as core's default does.
 */
export function nativeSha256Hex(data: Uint8Array | string): string {
  return hash('sha256', data, 'hex');
}

useSha256Hex(nativeSha256Hex);
