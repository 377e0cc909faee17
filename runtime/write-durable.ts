/**
 * Replaces a file atomically and durably: write a temp file, fsync it, rename
 * it over the target, fsync the directory. The one synchronous way the cell
 * and the edge write small files that must survive power loss (the store's
 * snapshot has its own, asynchronous, path: cell/store/internal/files.ts).
 */
import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';

export interface WriteDurableOptions {
  /** Mode of a newly created file (default 0o644). */
  mode?: number;
  /**
   * Ignore a failing directory fsync (unsupported on some filesystems; the
   * rename is still atomic). Default false: the failure is thrown.
   */
  dirSyncBestEffort?: boolean;
}

export function writeFileDurable(path: string, data: string | Uint8Array, opts: WriteDurableOptions = {}): void {
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true });
  const tmp = `${path}.tmp-${process.pid}`;
  const fd = openSync(tmp, 'w', opts.mode ?? 0o644);
  try {
    // writeSync may write less than asked: loop until every byte is out.
    const bytes = typeof data === 'string' ? Buffer.from(data) : data;
    for (let done = 0; done < bytes.length; ) done += writeSync(fd, bytes, done, bytes.length - done);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
  try {
    const dfd = openSync(dir, 'r');
    try {
      fsyncSync(dfd);
    } finally {
      closeSync(dfd);
    }
  } catch (err) {
    if (!opts.dirSyncBestEffort) throw err;
  }
}
