/**
 * What only the embedded engine has (PostgreSQL keeps its own log): every
 * write logged and replayed from a crash copy, group commit, a failed fsync
 * refused then recovered from disk, checkpoints and replay, the statement
 * cache. The contract both engines share is in contract.test.ts.
 */
import { strict as assert } from 'node:assert';
import { readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, it } from 'node:test';
import { HEADER_BYTES } from '../../../cell/store/internal/log.ts';
import { LOG_FILE, openEmbeddedStore, SNAPSHOT_FILE, type EmbeddedStore, type EmbeddedStoreOptions } from '../../../cell/store/embedded.ts';
import type { Store } from '../../../cell/store/types.ts';
import { crashCopy, deferred, T_MIGRATIONS, tempDir } from './_util.ts';

const cleanups: (() => void | Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function fresh(extra: Partial<EmbeddedStoreOptions> = {}): Promise<{ store: EmbeddedStore; dir: string; notes: string[] }> {
  const { dir, cleanup } = tempDir();
  const notes: string[] = [];
  const store = await openEmbeddedStore({ dir, migrations: T_MIGRATIONS, log: (m) => notes.push(m), ...extra });
  cleanups.push(cleanup, () => store.close());
  return { store, dir, notes };
}

async function reopen(dir: string, notes: string[] = [], migrations = T_MIGRATIONS): Promise<EmbeddedStore> {
  const store = await openEmbeddedStore({ dir, migrations, log: (m) => notes.push(m) });
  cleanups.push(
    () => rmSync(dir, { recursive: true, force: true }),
    () => store.close(),
  );
  return store;
}

const count = async (s: Store) => (await s.get('SELECT COUNT(*) AS n FROM t'))?.['n'];
const insert = (s: Store, id: number, v: string | null = null) => s.write((tx) => tx.run('INSERT INTO t (id, v) VALUES (?, ?)', [id, v]));

describe('embedded store: the log', () => {
  it('every committed write is in the log: a crash copy replays them all', async () => {
    const { store, dir } = await fresh();
    await store.write((tx) => tx.run('INSERT INTO t (id, v, b) VALUES (?, ?, ?)', [1, 'one', new Uint8Array([0, 1, 2, 255])]));
    await store.write(async (tx) => {
      await tx.run('INSERT INTO t (id, v) VALUES (?, ?)', [2, 'two']);
      await tx.run("UPDATE t SET v = 'uno' WHERE id = 1");
    });
    await store.write((tx) => tx.get('INSERT INTO t (id, v) VALUES (?, ?) RETURNING id', [3, 'tab\tquote"\u00e9\u{1F600}']));
    const crashed = await reopen(crashCopy(dir));
    assert.ok(crashed.recovery.replayed >= 3, 'the copy replays the log');
    assert.equal(crashed.recovery.droppedBytes, 0);
    const rows = await crashed.all('SELECT id, v, b FROM t ORDER BY id');
    assert.deepEqual(
      rows.map((r) => [r['id'], r['v']]),
      [
        [1, 'uno'],
        [2, 'two'],
        [3, 'tab\tquote"\u00e9\u{1F600}'],
      ],
    );
    assert.deepEqual([...(rows[0]!['b'] as Uint8Array)], [0, 1, 2, 255]);
    await store.close();
    const again = await reopen(dir);
    assert.equal(again.recovery.replayed, 0, 'close checkpointed: nothing to replay');
    assert.equal(await count(again), 3);
  });

  it('a rolled-back or read-only transaction logs nothing and costs no fsync', async () => {
    const { store, dir } = await fresh();
    await insert(store, 1);
    const before = { ...store.stats, size: statSync(join(dir, LOG_FILE)).size };
    await assert.rejects(
      store.write(async (tx) => {
        await tx.run('INSERT INTO t (id) VALUES (2)');
        throw new Error('boom');
      }),
    );
    assert.equal(await store.write(async (tx) => (await tx.get('SELECT COUNT(*) AS n FROM t'))?.['n']), 1);
    assert.deepEqual({ ...store.stats, size: statSync(join(dir, LOG_FILE)).size }, before);
  });

  it('cached statements stay correct across evictions, checkpoints and schema changes', async () => {
    const { store } = await fresh();
    await insert(store, 1, 'a');
    for (let i = 0; i < 300; i++) assert.equal((await store.get(`SELECT id + ${i} AS x FROM t WHERE id = ?`, [1]))?.['x'], 1 + i);
    const q = 'SELECT v FROM t WHERE id = ?';
    assert.deepEqual(await store.get(q, [1]), { v: 'a' });
    assert.equal(await store.get(q, [2]), undefined, 'no stale binding');
    await store.checkpoint();
    assert.deepEqual(await store.get(q, [1]), { v: 'a' });
    await store.write(async (tx) => {
      await tx.run('ALTER TABLE t ADD COLUMN w TEXT');
      await tx.run('UPDATE t SET w = ? WHERE id = ?', ['b', 1]);
    });
    assert.deepEqual(await store.get('SELECT * FROM t WHERE id = ?', [1]), { id: 1, v: 'a', b: null, w: 'b' });
    await store.write((tx) => tx.run('ALTER TABLE t RENAME COLUMN w TO c'));
    assert.deepEqual(await store.get('SELECT * FROM t WHERE id = ?', [1]), { id: 1, v: 'a', b: null, c: 'b' });
  });

  it('the log keeps each statement as it ran: parameters changed by the caller afterwards are not what replays', async () => {
    const { store, dir } = await fresh();
    const bytes = new Uint8Array([1, 2, 3]);
    const params: (string | number | Uint8Array)[] = [1, 'before', bytes];
    await store.write(async (tx) => {
      await tx.run('INSERT INTO t (id, v, b) VALUES (?, ?, ?)', params);
      params[1] = 'after';
      bytes[0] = 9;
      await tx.run('INSERT INTO t (id, v, b) VALUES (?, ?, ?)', [2, params[1], bytes]);
    });
    const expected = [
      { id: 1, v: 'before', b: [1, 2, 3] },
      { id: 2, v: 'after', b: [9, 2, 3] },
    ];
    const rows = async (s: Store) =>
      (await s.all('SELECT id, v, b FROM t ORDER BY id')).map((r) => ({ ...r, b: [...(r['b'] as Uint8Array)] }));
    assert.deepEqual(await rows(store), expected);
    assert.deepEqual(await rows(await reopen(crashCopy(dir))), expected, 'the replayed log holds what each statement ran with');
  });

  it('what a SQL text is (its dialect refusal, transaction control, tables written) is read once and holds on every use', async () => {
    const { store } = await fresh();
    const tables: string[][] = [];
    store.onChange((c) => tables.push([...c.tables]));
    for (let i = 0; i < 3; i++) {
      // Refused again when cached, inside and outside a transaction, as TypeErrors.
      await assert.rejects(
        store.get('SELECT IFNULL(v, 1) AS v FROM t'),
        (e: Error) => e instanceof TypeError && /COALESCE/.test(e.message),
      );
      await assert.rejects(
        store.write((tx) => tx.run('SELECT IFNULL(v, 1) AS v FROM t')),
        (e: Error) => e instanceof TypeError && /COALESCE/.test(e.message),
      );
      await assert.rejects(
        store.write((tx) => tx.run('COMMIT')),
        /not allowed inside write\(\)/,
      );
      await store.write(async (tx) => {
        await tx.run('INSERT INTO t (id, v) VALUES (?, ?)', [i, 'x']);
        assert.deepEqual(await tx.get('UPDATE t SET v = ? WHERE id = ? RETURNING v', ['y', i]), { v: 'y' });
      });
    }
    assert.deepEqual(tables, [['t'], ['t'], ['t']]);
    assert.equal(await count(store), 3);
  });

  it('migrations are logged transactions: a crash copy taken right after open has them', async () => {
    const { dir, cleanup } = tempDir();
    cleanups.push(cleanup);
    const m = [
      { id: 'b-001', sql: 'CREATE TABLE x (n INTEGER); INSERT INTO x (n) VALUES (1);' },
      { id: 'a-002', sql: 'INSERT INTO x (n) VALUES (2)' },
    ];
    const s1 = await openEmbeddedStore({ dir, migrations: m, log: () => undefined });
    const copy = crashCopy(dir);
    await s1.close();
    const crashed = await reopen(copy, [], m);
    assert.deepEqual(await crashed.all('SELECT n FROM x ORDER BY n'), [{ n: 1 }, { n: 2 }]);
  });

  it('an unreadable snapshot or a log that is not ours refuses the open (nothing overwritten)', async () => {
    const a = tempDir();
    cleanups.push(a.cleanup);
    writeFileSync(join(a.dir, SNAPSHOT_FILE), Buffer.alloc(4096, 7));
    await assert.rejects(openEmbeddedStore({ dir: a.dir, migrations: T_MIGRATIONS, log: () => undefined }), /snapshot\.db is unreadable/);
    const b = tempDir();
    cleanups.push(b.cleanup);
    writeFileSync(join(b.dir, LOG_FILE), 'definitely not a cell log');
    await assert.rejects(
      openEmbeddedStore({ dir: b.dir, migrations: T_MIGRATIONS, log: () => undefined }),
      /not a usable log \(bad magic\)/,
    );
    assert.equal(readFileSync(join(b.dir, LOG_FILE), 'utf8'), 'definitely not a cell log');
  });
});

describe('embedded store: group commit and a failed fsync', () => {
  it('batches transactions committed while an fsync is in flight into one write+fsync', async () => {
    let gate = deferred();
    gate.resolve(); // open (migrations) goes through
    let entered = deferred();
    let calls = 0;
    const fsync = async (fh: FileHandle) => {
      calls++;
      entered.resolve();
      await gate.promise;
      await fh.sync();
    };
    const { store, dir } = await fresh({ fsync });
    await insert(store, 0);
    gate = deferred();
    entered = deferred();
    try {
      const base = calls;
      const first = insert(store, 1);
      await entered.promise; // the first batch is inside fsync
      assert.equal(calls, base + 1);
      let acked = 0;
      const rest = Array.from({ length: 31 }, (_, i) => insert(store, i + 2).then(() => acked++));
      for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
      assert.equal(acked, 0, 'nothing is acknowledged before its fsync');
      gate.resolve();
      await first;
      await Promise.all(rest);
      assert.equal(calls, base + 2, '31 concurrent transactions shared one fsync');
      assert.equal(acked, 31);
    } finally {
      gate.resolve();
    }
    const copy = await reopen(crashCopy(dir));
    assert.equal(await count(copy), 33);
  });

  it('a failed fsync refuses the batch with 503, drops it, re-opens from disk and takes writes again', async () => {
    let fail = 0;
    const fsync = async (fh: FileHandle) => {
      if (fail > 0) {
        fail--;
        throw Object.assign(new Error('EIO: simulated'), { code: 'EIO' });
      }
      await fh.sync();
    };
    const { store, dir, notes } = await fresh({ fsync, recoveryDelayMs: 20 });
    await insert(store, 1);
    fail = 1;
    const batch = [1, 2, 3].map((i) => insert(store, 10 + i));
    for (const p of batch) {
      await assert.rejects(
        p,
        (err: { code?: string; details?: unknown; retryable?: boolean; message: string }) =>
          err.code === 'service_unavailable' &&
          JSON.stringify(err.details) === '{"reason":"store_failed"}' &&
          err.retryable === true &&
          !/EIO/.test(err.message),
      );
    }
    assert.ok(notes.some((n) => /fsync failed/.test(n)));
    for (let i = 0; i < 500 && store.failed; i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(store.failed, false, 'recovered by itself');
    assert.equal(store.stats.reloads, 1);
    assert.deepEqual(await store.all('SELECT id FROM t ORDER BY id'), [{ id: 1 }], 'the refused batch is gone, in memory too');
    await insert(store, 2);
    const copy = await reopen(crashCopy(dir));
    assert.deepEqual(
      await copy.all('SELECT id FROM t ORDER BY id'),
      [{ id: 1 }, { id: 2 }],
      'and on disk: nothing refused, nothing doubled',
    );
  });

  it('a transaction still open when the log fails is refused at its commit, not left hanging', async () => {
    let gate = deferred();
    gate.resolve();
    let failNext = false;
    const fsync = async (fh: FileHandle) => {
      await gate.promise;
      if (failNext) {
        failNext = false;
        throw Object.assign(new Error('EIO: simulated'), { code: 'EIO' });
      }
      await fh.sync();
    };
    const { store } = await fresh({ fsync, recoveryDelayMs: 20 });
    gate = deferred();
    failNext = true;
    const c = insert(store, 1); // its fsync waits on the gate, then fails
    const inside = deferred();
    const open = deferred();
    const a = store.write(async (tx) => {
      await tx.run('INSERT INTO t (id) VALUES (2)');
      inside.resolve();
      await open.promise;
    });
    await inside.promise;
    gate.resolve(); // the log fails while A is open
    await assert.rejects(c, { code: 'service_unavailable' });
    open.resolve();
    await assert.rejects(a, { code: 'service_unavailable' });
    for (let i = 0; i < 500 && store.failed; i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(store.failed, false);
    assert.equal(await count(store), 0, 'neither refused transaction is kept');
  });

  it('a failure that does not pass by itself keeps refusing writes, saying retryable: false', async () => {
    let fail = false;
    const fsync = async (fh: FileHandle) => {
      if (fail) throw new Error('simulated failure with no errno');
      await fh.sync();
    };
    const { store } = await fresh({ fsync, recoveryDelayMs: 10 });
    await insert(store, 1);
    fail = true;
    await assert.rejects(insert(store, 2), { code: 'service_unavailable', retryable: false });
    fail = false;
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(store.failed, true);
    await assert.rejects(insert(store, 3), { code: 'service_unavailable', retryable: false });
    await assert.rejects(store.checkpoint(), { code: 'service_unavailable' });
    assert.deepEqual(await store.health(), { ok: false, reason: 'store_failed' });
    assert.deepEqual(await store.all('SELECT id FROM t'), [{ id: 1 }], 'still re-opened from disk: reads show only durable data');
  });
});

describe('embedded store: checkpoint and replay', () => {
  it('checkpoint writes a snapshot, truncates the log, and replay applies only later records', async () => {
    const { store, dir } = await fresh();
    for (let i = 0; i < 20; i++) await insert(store, i);
    await store.checkpoint();
    assert.equal(statSync(join(dir, LOG_FILE)).size, HEADER_BYTES);
    assert.ok(statSync(join(dir, SNAPSHOT_FILE)).size > 0);
    assert.equal(store.stats.checkpoints, 1);
    for (let i = 20; i < 25; i++) await insert(store, i);
    const copy = await reopen(crashCopy(dir));
    assert.equal(copy.recovery.replayed, 5);
    assert.equal(await count(copy), 25);
  });

  it('replay skips records the snapshot already holds (crash between rename and truncate)', async () => {
    const { store, dir } = await fresh();
    for (let i = 0; i < 10; i++) await insert(store, i);
    const oldLog = readFileSync(join(dir, LOG_FILE));
    await store.checkpoint();
    for (let i = 10; i < 13; i++) await insert(store, i);
    const newLog = readFileSync(join(dir, LOG_FILE));
    const copyDir = crashCopy(dir);
    // As if the truncate never happened: old records (already in the snapshot), then the new ones.
    writeFileSync(join(copyDir, LOG_FILE), Buffer.concat([oldLog, newLog.subarray(HEADER_BYTES)]));
    const copy = await reopen(copyDir);
    assert.equal(copy.recovery.replayed, 3);
    assert.equal(copy.recovery.droppedBytes, 0);
    // t has no primary key: a double replay would show duplicates.
    assert.deepEqual(
      (await copy.all('SELECT id FROM t ORDER BY id')).map((r) => r['id']),
      Array.from({ length: 13 }, (_, i) => i),
    );
  });

  it('writes committed during a checkpoint are durable and land after it', async () => {
    const { store, dir } = await fresh();
    for (let i = 0; i < 5; i++) await insert(store, i);
    const cp = store.checkpoint();
    const during = Array.from({ length: 10 }, (_, i) => insert(store, 100 + i));
    await Promise.all([cp, ...during]);
    const copy = await reopen(crashCopy(dir));
    assert.equal(await count(copy), 15);
  });

  it('a checkpoint waits for an open transaction whose function is awaiting', async () => {
    const { store, dir } = await fresh();
    const gate = deferred();
    const inside = deferred();
    const w = store.write(async (tx) => {
      await tx.run('INSERT INTO t (id) VALUES (1)');
      inside.resolve();
      await gate.promise;
      await tx.run('INSERT INTO t (id) VALUES (2)');
    });
    await inside.promise;
    let checkpointed = false;
    const cp = store.checkpoint().then(() => {
      checkpointed = true;
    });
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    assert.equal(checkpointed, false, 'no snapshot of half a transaction');
    gate.resolve();
    await Promise.all([w, cp]);
    const copy = await reopen(crashCopy(dir));
    assert.equal(await count(copy), 2);
  });

  it('checkpoints automatically when the log passes checkpointBytes', async () => {
    const { store, dir } = await fresh({ checkpointBytes: 4096 });
    for (let i = 0; i < 60; i++) await insert(store, i, 'x'.repeat(100));
    // The automatic checkpoint runs in the background: wait for it, bounded (10 s).
    for (let i = 0; i < 1000 && store.stats.checkpoints === 0; i++) await new Promise((r) => setTimeout(r, 10));
    assert.ok(store.stats.checkpoints >= 1);
    assert.ok(store.stats.logBytes < 4096 + 1024);
    const copy = await reopen(crashCopy(dir));
    assert.equal(await count(copy), 60);
  });

  it('checkpoints by time when the log grew, and not again while idle', async () => {
    const { store } = await fresh({ checkpointIntervalMs: 20 });
    await insert(store, 1, 'a');
    for (let i = 0; i < 500 && store.stats.checkpoints === 0; i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(store.stats.checkpoints, 1);
    await new Promise((r) => setTimeout(r, 120));
    assert.equal(store.stats.checkpoints, 1, 'an idle store does not checkpoint again');
  });

  it('checkpoints right after opening when the replayed log is past checkpointBytes', async () => {
    const { store, dir } = await fresh();
    for (let i = 0; i < 40; i++) await insert(store, i, 'y'.repeat(100));
    const copyDir = crashCopy(dir);
    cleanups.push(() => rmSync(copyDir, { recursive: true, force: true }));
    const copy = await openEmbeddedStore({ dir: copyDir, migrations: T_MIGRATIONS, checkpointBytes: 2048, log: () => undefined });
    cleanups.push(() => copy.close());
    assert.ok(copy.recovery.replayed >= 40);
    assert.equal(copy.stats.checkpoints, 1);
    assert.equal(statSync(join(copyDir, LOG_FILE)).size, HEADER_BYTES);
    assert.equal(await count(copy), 40);
  });
});
