/** Durable file helpers: atomic replace (temp, fsync, rename, fsync dir; the temp file removed on failure) and full writes. */
import { open, rename, rm, type FileHandle } from 'node:fs/promises';

/** Replaces `path` with `bytes` atomically and durably: write temp, fsync, rename, fsync the directory. */
export async function writeFileDurably(path: string, bytes: Uint8Array, dir: string): Promise<void> {
  const tmp = `${path}.tmp`;
  try {
    const fh = await open(tmp, 'w', 0o600);
    try {
      await writeAll(fh, bytes);
      await fh.sync();
    } finally {
      await fh.close();
    }
  } catch (err) {
    // A half-written temp file (a full disk) would keep the space taken.
    await rm(tmp, { force: true }).catch(() => undefined);
    throw err;
  }
  await rename(tmp, path);
  await syncDir(dir);
}

export async function syncDir(dir: string): Promise<void> {
  const d = await open(dir, 'r');
  try {
    await d.sync();
  } finally {
    await d.close();
  }
}

export async function writeAll(fh: FileHandle, bytes: Uint8Array): Promise<void> {
  let done = 0;
  while (done < bytes.length) {
    const { bytesWritten } = await fh.write(bytes, done, bytes.length - done, null);
    if (bytesWritten <= 0) throw new Error('store: short write');
    done += bytesWritten;
  }
}
