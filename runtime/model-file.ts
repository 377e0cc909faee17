/**
 * Reading a model file once: its size and SHA-256 over the bytes actually
 * read through one open file descriptor, and (for loading) a private copy of
 * exactly those bytes.
 *
 * A model runtime loads a model by path. Measuring the original path and then
 * loading it reads the file twice, and a file swapped in between is loaded
 * unverified. So the loader measures while copying, through one descriptor,
 * into a directory only this process's user can enter (mkdtemp: mode 0700,
 * the file 0600, created exclusively), verifies the measure, and loads the
 * copy: the bytes loaded are the bytes hashed, whatever happens to the
 * original afterwards.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, open, rm } from 'node:fs/promises';
import { join } from 'node:path';

const CHUNK = 1 << 20;

export interface Measured {
  size: number;
  sha256: string;
}

/** Size and SHA-256 (hex) of a file, over the bytes read through one descriptor. */
export async function measureFile(path: string): Promise<Measured> {
  return readThrough(path, async () => undefined);
}

/** A private copy of a file and the measure of exactly the bytes it holds; `remove()` deletes it. */
export interface PrivateCopy extends Measured {
  path: string;
  remove(): Promise<void>;
}

/**
 * Copies `path` into a fresh private directory under `scratchDir`, measuring
 * the bytes as they are copied. The caller verifies the measure and then
 * uses the copy, never the original.
 */
export async function privateCopy(path: string, scratchDir: string): Promise<PrivateCopy> {
  const dir = await mkdtemp(join(scratchDir, '.model-'));
  const remove = () => rm(dir, { recursive: true, force: true });
  const copyPath = join(dir, 'model.gguf');
  try {
    const out = await open(copyPath, 'wx', 0o600);
    try {
      const m = await readThrough(path, async (chunk) => {
        for (let off = 0; off < chunk.length; ) off += (await out.write(chunk, off, chunk.length - off)).bytesWritten;
      });
      await out.sync();
      return { ...m, path: copyPath, remove };
    } finally {
      await out.close();
    }
  } catch (e) {
    await remove();
    throw e;
  }
}

async function readThrough(path: string, each: (chunk: Buffer) => Promise<void>): Promise<Measured> {
  const fd = await open(path, 'r');
  try {
    const h = createHash('sha256');
    const buf = Buffer.allocUnsafe(CHUNK);
    let size = 0;
    for (;;) {
      const { bytesRead } = await fd.read(buf, 0, CHUNK, null);
      if (bytesRead === 0) break;
      const chunk = buf.subarray(0, bytesRead);
      h.update(chunk);
      await each(chunk);
      size += bytesRead;
    }
    return { size, sha256: h.digest('hex') };
  } finally {
    await fd.close();
  }
}
