/**
 * Single-writer lock on a data directory: a file `LOCK` holding the owner's pid.
 *
 * Created atomically with its content (write a private temp file, then
 * `link()` it to LOCK, which fails if LOCK exists). A LOCK whose pid is dead
 * (`process.kill(pid, 0)` fails with ESRCH), or whose pid is this process but
 * not held by it (a restarted container where the cell is pid 1 again), is
 * stale and taken over.
 */
import { closeSync, fsyncSync, linkSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';

const held = new Set<string>();

export interface DirLock {
  readonly path: string;
  release(): void;
}

export type LockNote = (msg: string) => void;

/** Takes the lock on `dir` or throws an Error naming the pid that holds it. */
export function acquireDirLock(dir: string, note: LockNote): DirLock {
  const path = join(dir, 'LOCK');
  if (held.has(path)) throw new Error(`data directory ${dir} is in use by pid ${process.pid} (this process)`);
  const tmp = join(dir, `LOCK.${process.pid}.${Date.now()}.tmp`);
  const fd = openSync(tmp, 'w', 0o600);
  try {
    writeSync(fd, `${process.pid}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        linkSync(tmp, path);
        held.add(path);
        return {
          path,
          release() {
            held.delete(path);
            try {
              if (readPid(path) === process.pid) unlinkSync(path);
            } catch (err) {
              if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
            }
          },
        };
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      const pid = readPid(path);
      if (pid !== null && pid !== process.pid && isAlive(pid)) {
        throw new Error(`data directory ${dir} is in use by pid ${pid}`);
      }
      note(`store: taking over the lock on ${dir} from ${pid === null ? 'an unreadable lock file' : `pid ${pid}, which is not running`}`);
      try {
        unlinkSync(path);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
    }
    throw new Error(`data directory ${dir}: could not take the lock (contended)`);
  } finally {
    try {
      unlinkSync(tmp);
    } catch {
      // Already gone: nothing to clean up.
    }
  }
}

function readPid(path: string): number | null {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  const pid = Number.parseInt(text.trim(), 10);
  return Number.isSafeInteger(pid) && pid > 0 ? pid : null;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}
