/**
 * The embedded engine after a failed log write or fsync: what the failure is
 * (`disk_full` for ENOSPC/EDQUOT, else `store_failed`), whether waiting can
 * help (`retryable`), the 503 a writer gets meanwhile, and the probe that
 * tells when the disk takes writes again.
 */
import { open, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { ServiceError } from '../../../core/errors.ts';
import { writeAll } from './files.ts';

/** errno codes after which the same write may succeed later (space freed, device back). */
const TRANSIENT = new Set(['ENOSPC', 'EDQUOT', 'EIO', 'EAGAIN', 'EINTR', 'ENOMEM', 'EBUSY', 'EMFILE', 'ENFILE', 'ETIMEDOUT']);
const FULL = new Set(['ENOSPC', 'EDQUOT']);

/** Bytes the probe writes and fsyncs before writes are accepted again. */
export const PROBE_BYTES = 256 * 1024;
export const PROBE_FILE = 'probe.tmp';

export interface Failure {
  reason: 'disk_full' | 'store_failed';
  /** False once recovery cannot succeed without an operator. */
  retryable: boolean;
  /** The in-memory database still holds refused transactions: re-open from disk first. */
  needsReload: boolean;
  refusal(): ServiceError;
}

export function classifyFailure(err: unknown): Failure {
  const code = (err as { code?: unknown } | null)?.code;
  const errno = typeof code === 'string' ? code : '';
  const f: Failure = {
    reason: FULL.has(errno) ? 'disk_full' : 'store_failed',
    retryable: TRANSIENT.has(errno),
    needsReload: true,
    refusal() {
      const message = f.reason === 'disk_full' ? 'The store cannot accept writes: its disk is full.' : 'The store cannot accept writes.';
      return new ServiceError('service_unavailable', message, {
        details: { reason: f.reason },
        retryable: f.retryable,
        ...(f.retryable ? { headers: { 'Retry-After': '1' } } : {}),
      });
    },
  };
  return f;
}

/** Writes and fsyncs PROBE_BYTES in `dir`, then removes them; throws what the disk says. */
export async function probeWritable(dir: string): Promise<void> {
  const path = join(dir, PROBE_FILE);
  try {
    const fh = await open(path, 'w', 0o600);
    try {
      await writeAll(fh, Buffer.alloc(PROBE_BYTES));
      await fh.sync();
    } finally {
      await fh.close();
    }
  } finally {
    await rm(path, { force: true }).catch(() => undefined);
  }
}
