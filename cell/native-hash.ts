/**
 * Installs node:crypto's SHA-256 behind core's `sha256Hex`/`contentHash` for the
 * cell process (imported for its effect by cell/app.ts). The hashes are the same
 * bytes as core's pure-JS default (@noble/hashes); node:crypto only costs less CPU,
 * which matters on the run path (every journal record and blob is hashed).
 */
import { createHash } from 'node:crypto';
import { useSha256Hex } from '../core/canonical.ts';

/** Hex SHA-256 with node:crypto; a string is hashed as its UTF-8 bytes, as core's default does. */
export function nativeSha256Hex(data: Uint8Array | string): string {
  return typeof data === 'string'
    ? createHash('sha256').update(data, 'utf8').digest('hex')
    : createHash('sha256').update(data).digest('hex');
}

useSha256Hex(nativeSha256Hex);
