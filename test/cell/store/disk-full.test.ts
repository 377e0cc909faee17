/**
 * A full disk under the embedded engine, on a small tmpfs (issue 13): writes
 * are refused with 503 `disk_full`, `retryable: true`; once space is freed
 * the store takes writes again by itself; every acknowledged write is there
 * exactly once and no refused one is. Needs root (mount); skipped otherwise,
 * saying so. PostgreSQL's full disk is the server's to handle.
 */
import { strict as assert } from 'node:assert';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { openEmbeddedStore } from '../../../cell/store/embedded.ts';
import type { Store } from '../../../cell/store/types.ts';
import { crashCopy } from './_util.ts';

function tmpfsUnavailable(): string | false {
  if (process.getuid?.() !== 0) return 'mounting a small tmpfs needs root (mount -t tmpfs)';
  const probe = mkdtempSync(join(tmpdir(), 'tmpfs-probe-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', probe], { stdio: 'ignore' });
    execFileSync('umount', [probe], { stdio: 'ignore' });
    return false;
  } catch {
    return 'this machine does not let us mount a tmpfs (no CAP_SYS_ADMIN?)';
  } finally {
    rmSync(probe, { recursive: true, force: true });
  }
}

const MIGRATIONS = [{ id: 'full-001', sql: 'CREATE TABLE acks (id TEXT NOT NULL, pad TEXT)' }];
const free = (dir: string) => {
  const s = statfsSync(dir);
  return s.bavail * s.bsize;
};

describe('embedded store on a full disk', { skip: tmpfsUnavailable() }, () => {
  it('refuses writes with 503 disk_full while full, recovers by itself once space is freed, loses and doubles nothing', {
    timeout: 60_000,
  }, async () => {
    const mnt = mkdtempSync(join(tmpdir(), 'store-full-'));
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'tmpfs', mnt]);
    let opened: Store | undefined;
    try {
      const dir = join(mnt, 'store');
      const notes: string[] = [];
      const store = await openEmbeddedStore({
        dir,
        migrations: MIGRATIONS,
        recoveryDelayMs: 50,
        checkpointBytes: 1 << 30,
        checkpointIntervalMs: 0,
        log: (m) => notes.push(m),
      });
      opened = store;
      // Leave about 96 KiB: a few dozen writes fit, then the log cannot grow.
      writeFileSync(join(mnt, 'filler'), Buffer.alloc(Math.max(0, free(mnt) - 96 * 1024)));
      const acked: string[] = [];
      const refused: { id: string; err: { code?: string; details?: unknown; retryable?: boolean } }[] = [];
      let phase: 'full' | 'freed' = 'full';
      let ackedAfterFree = 0;
      let stop = false;
      const writer = async (w: number) => {
        for (let n = 0; !stop; n++) {
          const id = `w${w}-${n}`;
          try {
            await store.write((tx) => tx.run('INSERT INTO acks (id, pad) VALUES (?, ?)', [id, 'p'.repeat(2048)]));
            acked.push(id);
            if (phase === 'freed') ackedAfterFree++;
          } catch (err) {
            refused.push({ id, err: err as { code?: string } });
            await new Promise((r) => setTimeout(r, 10));
          }
        }
      };
      const writers = Array.from({ length: 8 }, (_, w) => writer(w));
      const waitFor = async (what: string, ok: () => boolean, ms: number) => {
        const end = Date.now() + ms;
        while (!ok()) {
          if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
          await new Promise((r) => setTimeout(r, 10));
        }
      };
      await waitFor('the disk to fill', () => refused.length >= 20, 20_000);
      assert.ok(acked.length > 0, 'some writes fitted before the disk was full');
      for (const r of refused) {
        assert.deepEqual(
          { code: r.err.code, details: r.err.details, retryable: r.err.retryable },
          { code: 'service_unavailable', details: { reason: 'disk_full' }, retryable: true },
          r.id,
        );
      }
      assert.deepEqual(await store.health(), { ok: false, reason: 'disk_full' });
      // Reads go on while writes are refused.
      assert.equal(typeof (await store.get('SELECT COUNT(*) AS n FROM acks'))?.['n'], 'number');

      rmSync(join(mnt, 'filler'));
      phase = 'freed';
      await waitFor('writes to be accepted again', () => ackedAfterFree >= 50, 20_000);
      stop = true;
      await Promise.all(writers);
      assert.deepEqual(await store.health(), { ok: true });
      assert.ok(store.stats.reloads >= 1, 'the store re-opened itself from disk');
      assert.ok(
        notes.some((n) => /accepts writes again/.test(n)),
        notes.join('\n'),
      );

      const check = async (s: Store, where: string) => {
        const rows = await s.all('SELECT id, COUNT(*) AS n FROM acks GROUP BY id');
        const doubled = rows.filter((r) => r['n'] !== 1).map((r) => r['id']);
        const present = new Set(rows.map((r) => String(r['id'])));
        assert.deepEqual(doubled, [], `${where}: doubled writes`);
        assert.deepEqual(
          acked.filter((id) => !present.has(id)),
          [],
          `${where}: acknowledged writes lost`,
        );
        assert.deepEqual(
          refused.map((r) => r.id).filter((id) => present.has(id)),
          [],
          `${where}: refused writes kept`,
        );
      };
      await check(store, 'in memory');
      const copy = crashCopy(dir); // on the ordinary disk
      try {
        const reopened = await openEmbeddedStore({ dir: copy, migrations: MIGRATIONS, log: () => undefined });
        try {
          await check(reopened, 'after a crash');
        } finally {
          await reopened.close();
        }
      } finally {
        rmSync(copy, { recursive: true, force: true });
      }
    } finally {
      // Closed before the unmount, failed test or not: open files would keep the tmpfs busy.
      await opened?.close().catch(() => undefined);
      execFileSync('umount', [mnt]);
      rmSync(mnt, { recursive: true, force: true });
    }
  });
});
