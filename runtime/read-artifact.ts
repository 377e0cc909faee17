/**
 * Reading a signed artifact file (a key bundle, a crew bundle, a model manifest) without believing its
 * size: the file's size is bounded before anything is read (a 400 MiB file once cost the edge 884 MB of
 * memory before its signature was even looked at), and its header line (the envelope format and a
 * trusted signing key, bundles/envelope.ts `openHeader`) is judged from its first bytes before the rest
 * is read. The signature is then checked over the payload before the payload is parsed (`openEnvelope`).
 * One descriptor: the bytes judged are the bytes read, whatever happens to the path meanwhile.
 */
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { MAX_HEADER, openHeader, refused } from '../bundles/envelope.ts';
import type { TrustedKey } from '../bundles/codec.ts';
import { SetupError } from './setup-error.ts';

/** The largest key or crew bundle read: 64 MiB, about 390,000 keys (a key takes ~170 bytes). */
export const MAX_BUNDLE_BYTES = 64 * 1024 * 1024;
/** The largest model manifest read: a manifest is a name, a size and a hash. */
export const MAX_MANIFEST_BYTES = 64 * 1024;

/** Fills `buf` from `start` to `end` with the file's bytes at the same offsets; returns where it stopped (earlier at the end of the file). */
function fill(fd: number, buf: Uint8Array, start: number, end: number): number {
  let at = start;
  while (at < end) {
    const n = readSync(fd, buf, at, end - at, at);
    if (n === 0) break;
    at += n;
  }
  return at;
}

/**
 * The bytes of the artifact at `path`, once its size is at most `maxBytes` (else 400 `artifact_too_large`,
 * before any read) and its header names a trusted key (else the envelope's refusal, after one read of at
 * most MAX_HEADER bytes). A file that cannot be read is a SetupError naming `what`.
 */
export function readSignedArtifact(path: string, what: string, trusted: readonly TrustedKey[], maxBytes: number): Uint8Array {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    throw new SetupError(`cannot read the ${what} ${path}`);
  }
  try {
    const size = fstatSync(fd).size;
    if (size > maxBytes) {
      throw refused('artifact_too_large', `the ${what} is ${size} bytes, more than the ${maxBytes} this program reads`, 'invalid_request', {
        size,
        max_bytes: maxBytes,
      });
    }
    // The header is judged from the first bytes, before a buffer of the file's size is even made.
    const first = new Uint8Array(Math.min(size, MAX_HEADER));
    const head = fill(fd, first, 0, first.length);
    openHeader(first.subarray(0, head), trusted);
    const buf = new Uint8Array(size);
    buf.set(first.subarray(0, head));
    return buf.subarray(0, fill(fd, buf, head, size));
  } finally {
    closeSync(fd);
  }
}
