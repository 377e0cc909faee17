/**
 * The single-writer lock on a store directory (embedded engine only: on
 * PostgreSQL several cells share a database by design): refusal while the
 * holder lives, takeover when it is dead.
 */
import { strict as assert } from 'node:assert';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { openEmbeddedStore as openStore } from '../../../cell/store/embedded.ts';
import { T_MIGRATIONS, tempDir } from './_util.ts';

/** A child process that exits at once: its pid is dead afterwards. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' });
  await new Promise((r) => child.once('exit', r));
  assert.ok(child.pid);
  return child.pid;
}

describe('store: directory lock', () => {
  it('a second opener in the same process is refused while the first holds the lock', async () => {
    const { dir, cleanup } = tempDir();
    try {
      const a = await openStore({ dir, migrations: T_MIGRATIONS, log: () => undefined });
      await assert.rejects(
        openStore({ dir, migrations: T_MIGRATIONS, log: () => undefined }),
        (err: Error) => err.message === `data directory ${dir} is in use by pid ${process.pid} (this process)`,
      );
      await a.close();
      assert.equal(existsSync(join(dir, 'LOCK')), false, 'close releases the lock');
      const b = await openStore({ dir, migrations: T_MIGRATIONS, log: () => undefined });
      await b.close();
    } finally {
      cleanup();
    }
  });

  it('refuses, naming the pid, while another live process holds the lock', async () => {
    const { dir, cleanup } = tempDir();
    const holder = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)'], { stdio: 'ignore' });
    try {
      assert.ok(holder.pid);
      writeFileSync(join(dir, 'LOCK'), `${holder.pid}\n`);
      await assert.rejects(
        openStore({ dir, migrations: T_MIGRATIONS, log: () => undefined }),
        (err: Error) => err.message === `data directory ${dir} is in use by pid ${holder.pid}`,
      );
      assert.equal(readFileSync(join(dir, 'LOCK'), 'utf8'), `${holder.pid}\n`, 'the holder keeps its lock');
    } finally {
      holder.kill('SIGKILL');
      cleanup();
    }
  });

  it('takes over the lock of a dead pid, says so, and writes its own pid', async () => {
    const { dir, cleanup } = tempDir();
    try {
      const pid = await deadPid();
      writeFileSync(join(dir, 'LOCK'), `${pid}\n`);
      const notes: string[] = [];
      const s = await openStore({ dir, migrations: T_MIGRATIONS, log: (m) => notes.push(m) });
      assert.equal(readFileSync(join(dir, 'LOCK'), 'utf8'), `${process.pid}\n`);
      assert.ok(
        notes.some((n) => n.includes(`from pid ${pid}, which is not running`)),
        notes.join('\n'),
      );
      await s.close();
    } finally {
      cleanup();
    }
  });
});
