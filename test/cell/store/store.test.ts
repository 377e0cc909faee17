/** Unit tests of the durable store: transactions, group commit, fail-closed fsync, migrations, checkpoint and replay. */
import { strict as assert } from 'node:assert';
import { readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, it } from 'node:test';
import { HEADER_BYTES } from '../../../cell/store/_log.ts';
import { LOG_FILE, openStore, SNAPSHOT_FILE, type DurableStore } from '../../../cell/store/store.ts';
import { crashCopy, T_MIGRATIONS, tempDir } from './_util.ts';

const cleanups: (() => void | Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function fresh(extra: Partial<Parameters<typeof openStore>[0]> = {}): Promise<{ store: DurableStore; dir: string; notes: string[] }> {
  const { dir, cleanup } = tempDir();
  const notes: string[] = [];
  const store = await openStore({ dir, migrations: T_MIGRATIONS, log: (m) => notes.push(m), ...extra });
  cleanups.push(cleanup, () => store.close());
  return { store, dir, notes };
}

async function reopen(dir: string, notes: string[] = []): Promise<DurableStore> {
  const store = await openStore({ dir, migrations: T_MIGRATIONS, log: (m) => notes.push(m) });
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }), () => store.close());
  return store;
}

function deferred(): { promise: Promise<void>; resolve(): void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('store: transactions', () => {
  it('writes, reads, and keeps everything across close/reopen and across a crash', async () => {
    const { store, dir } = await fresh();
    const blob = new Uint8Array([0, 1, 2, 255]);
    const changes = await store.write((tx) => tx.run('INSERT INTO t (id, v, b) VALUES (?, ?, ?)', [1, 'one', blob]));
    assert.deepEqual(changes, { changes: 1 });
    await store.write((tx) => {
      tx.run('INSERT INTO t (id, v) VALUES (?, ?)', [2, 'two']);
      tx.run("UPDATE t SET v = 'uno' WHERE id = 1");
      return tx.get<{ n: number }>('SELECT COUNT(*) AS n FROM t')?.n;
    }).then((n) => assert.equal(n, 2));
    await store.write((tx) => tx.run('INSERT INTO t (id, v) VALUES (?, ?)', [3, 'tab\tquote"\u00e9\u{1F600}']));
    assert.deepEqual(store.get('SELECT v FROM t WHERE id = ?', [1]), { v: 'uno' });

    const crashed = await reopen(crashCopy(dir));
    assert.ok(crashed.recovery.replayed >= 3, 'the copy replays the log');
    assert.equal(crashed.recovery.droppedBytes, 0);
    const rows = crashed.all<{ id: number; v: string; b: Uint8Array | null }>('SELECT id, v, b FROM t ORDER BY id');
    assert.deepEqual(rows.map((r) => [r.id, r.v]), [[1, 'uno'], [2, 'two'], [3, 'tab\tquote"\u00e9\u{1F600}']]);
    assert.deepEqual([...(rows[0]?.b ?? [])], [0, 1, 2, 255]);

    await store.close();
    const again = await reopen(dir);
    assert.equal(again.recovery.replayed, 0, 'close checkpointed: nothing to replay');
    assert.equal(again.get<{ n: number }>('SELECT COUNT(*) AS n FROM t')?.n, 3);
  });

  it('rolls back a throwing transaction and logs nothing', async () => {
    const { store, dir } = await fresh();
    await store.write((tx) => tx.run('INSERT INTO t (id) VALUES (1)'));
    const before = { ...store.stats, size: statSync(join(dir, LOG_FILE)).size };
    const boom = new Error('boom');
    await assert.rejects(
      store.write((tx) => {
        tx.run('INSERT INTO t (id) VALUES (2)');
        throw boom;
      }),
      (err) => err === boom,
    );
    assert.equal(store.get<{ n: number }>('SELECT COUNT(*) AS n FROM t')?.n, 1);
    assert.equal(store.stats.commits, before.commits);
    assert.equal(store.stats.lsn, before.lsn);
    assert.equal(statSync(join(dir, LOG_FILE)).size, before.size);
    // A later write still works.
    await store.write((tx) => tx.run('INSERT INTO t (id) VALUES (3)'));
    assert.deepEqual(store.all('SELECT id FROM t ORDER BY id'), [{ id: 1 }, { id: 3 }]);
  });

  it('refuses an async transaction function and a nested write, rolling both back', async () => {
    const { store } = await fresh();
    await assert.rejects(
      store.write(async (tx) => tx.run('INSERT INTO t (id) VALUES (1)')),
      (err) => err instanceof TypeError && /synchronous/.test(err.message),
    );
    let inner: Promise<unknown> | undefined;
    await store.write((tx) => {
      tx.run('INSERT INTO t (id) VALUES (2)');
      inner = store.write((tx2) => tx2.run('INSERT INTO t (id) VALUES (3)')).then(() => 'committed', (err: unknown) => err);
    });
    const err = await inner;
    assert.ok(err instanceof TypeError && /nested/.test(err.message));
    assert.deepEqual(store.all('SELECT id FROM t'), [{ id: 2 }]);
  });

  it('a SQL error inside a transaction rejects with it and leaves no trace', async () => {
    const { store } = await fresh();
    await assert.rejects(store.write((tx) => tx.run('INSERT INTO nope (x) VALUES (1)')), /no such table/);
    await assert.rejects(store.write((tx) => {
      tx.run('INSERT INTO t (id) VALUES (1)');
      tx.run('INSERT INTO t (id, zz) VALUES (1, 2)');
    }), /zz/);
    assert.equal(store.get<{ n: number }>('SELECT COUNT(*) AS n FROM t')?.n, 0);
  });

  it('refuses transaction control statements inside write()', async () => {
    const { store } = await fresh();
    await assert.rejects(store.write((tx) => {
      tx.run('INSERT INTO t (id) VALUES (1)');
      tx.run('COMMIT');
    }), (err) => err instanceof TypeError && /"COMMIT" is not allowed/.test(err.message));
    assert.equal(store.get<{ n: number }>('SELECT COUNT(*) AS n FROM t')?.n, 0);
  });

  it('cached statements stay correct across evictions, checkpoints and schema changes', async () => {
    const { store } = await fresh();
    await store.write((tx) => tx.run('INSERT INTO t (id, v) VALUES (1, ?)', ['a']));
    for (let i = 0; i < 300; i++) assert.equal(store.get<{ x: number }>(`SELECT id + ${i} AS x FROM t WHERE id = ?`, [1])?.x, 1 + i);
    const q = 'SELECT v FROM t WHERE id = ?';
    assert.deepEqual(store.get(q, [1]), { v: 'a' });
    assert.equal(store.get(q, [2]), undefined, 'no stale binding');
    await store.checkpoint();
    assert.deepEqual(store.get(q, [1]), { v: 'a' });
    await store.write((tx) => {
      tx.run('ALTER TABLE t ADD COLUMN w TEXT');
      tx.run('UPDATE t SET w = ? WHERE id = ?', ['b', 1]);
    });
    assert.deepEqual(store.get('SELECT * FROM t WHERE id = ?', [1]), { id: 1, v: 'a', b: null, w: 'b' });
  });

  it('a read-only transaction resolves without touching the log', async () => {
    const { store } = await fresh();
    const before = store.stats.fsyncs;
    const n = await store.write((tx) => tx.get<{ n: number }>('SELECT COUNT(*) AS n FROM t')?.n);
    assert.equal(n, 0);
    assert.equal(store.stats.fsyncs, before);
  });
});

describe('store: group commit and fsync failure', () => {
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
    await store.write((tx) => tx.run('INSERT INTO t (id) VALUES (0)'));
    gate = deferred();
    entered = deferred();
    try {
      const base = calls;
      const first = store.write((tx) => tx.run('INSERT INTO t (id) VALUES (1)'));
      await entered.promise; // the first batch is inside fsync
      assert.equal(calls, base + 1);
      let acked = 0;
      const rest = Array.from({ length: 31 }, (_, i) =>
        store.write((tx) => tx.run('INSERT INTO t (id) VALUES (?)', [i + 2])).then(() => acked++),
      );
      await new Promise((r) => setImmediate(r));
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
    assert.equal(copy.get<{ n: number }>('SELECT COUNT(*) AS n FROM t')?.n, 33);
  });

  it('a failed fsync rejects the batch with service_unavailable and fails the store closed', async () => {
    let failNext = false;
    const fsync = async (fh: FileHandle) => {
      if (failNext) throw Object.assign(new Error('EIO: simulated'), { code: 'EIO' });
      await fh.sync();
    };
    const { store, notes } = await fresh({ fsync });
    await store.write((tx) => tx.run('INSERT INTO t (id) VALUES (1)'));
    failNext = true;
    const batch = [1, 2, 3].map((i) => store.write((tx) => tx.run('INSERT INTO t (id) VALUES (?)', [10 + i])));
    for (const p of batch) {
      await assert.rejects(p, (err: { code?: string; details?: { reason?: string } }) =>
        err.code === 'service_unavailable' && err.details?.reason === 'store_failed');
    }
    assert.equal(store.failed, true);
    failNext = false;
    await assert.rejects(store.write((tx) => tx.run('INSERT INTO t (id) VALUES (99)')), { code: 'service_unavailable' });
    await assert.rejects(store.checkpoint(), { code: 'service_unavailable' });
    assert.ok(notes.some((n) => /fsync failed/.test(n)));
    const refusal = (await store.write(() => 1).catch((e: unknown) => e)) as Error;
    assert.ok(!/EIO/.test(refusal.message), 'no internal text in the refusal');
  });

  it('refuses writes after close', async () => {
    const { store } = await fresh();
    await store.close();
    await assert.rejects(store.write((tx) => tx.run('INSERT INTO t (id) VALUES (1)')), { code: 'service_unavailable' });
  });
});

describe('store: migrations', () => {
  it('applies each migration once, in the given order, as logged transactions', async () => {
    const { dir, cleanup } = tempDir();
    cleanups.push(cleanup);
    const m1 = [
      { id: 'b-001', sql: 'CREATE TABLE x (n INTEGER); INSERT INTO x (n) VALUES (1);' },
      { id: 'a-002', sql: 'INSERT INTO x (n) VALUES (2)' },
    ];
    const s1 = await openStore({ dir, migrations: m1, log: () => undefined });
    const copy = crashCopy(dir);
    await s1.close();
    const crashed = await reopen(copy);
    assert.deepEqual(crashed.all('SELECT n FROM x ORDER BY n'), [{ n: 1 }, { n: 2 }], 'migrations were logged');

    const notes: string[] = [];
    const s2 = await openStore({ dir, migrations: [...m1, { id: 'c-003', sql: 'INSERT INTO x (n) VALUES (3)' }], log: (m) => notes.push(m) });
    cleanups.push(() => s2.close());
    assert.deepEqual(s2.all('SELECT n FROM x ORDER BY n'), [{ n: 1 }, { n: 2 }, { n: 3 }]);
    assert.deepEqual(s2.all('SELECT id, seq FROM _migrations ORDER BY seq'), [
      { id: 'b-001', seq: 1 }, { id: 'a-002', seq: 2 }, { id: 'c-003', seq: 3 },
    ]);
    assert.equal(notes.length, 0, notes.join("; "));
    await s2.close();
    const s3 = await openStore({ dir, migrations: [{ id: 'b-001', sql: 'CREATE TABLE x (changed INTEGER)' }], log: (m) => notes.push(m) });
    cleanups.push(() => s3.close());
    assert.ok(notes.some((n) => /b-001 was applied with different SQL/.test(n)));
  });

  it('a failing migration refuses the open, names the migration, and releases the directory', async () => {
    const { dir, cleanup } = tempDir();
    cleanups.push(cleanup);
    await assert.rejects(
      openStore({ dir, migrations: [{ id: 'bad-001', sql: 'CREATE TABLE' }], log: () => undefined }),
      /^Error: store: migration bad-001 failed: incomplete input$/,
    );
    const ok = await openStore({ dir, migrations: T_MIGRATIONS, log: () => undefined });
    cleanups.push(() => ok.close());
    assert.equal(ok.get<{ n: number }>("SELECT COUNT(*) AS n FROM _migrations WHERE id = 'bad-001'")?.n, 0);
  });

  it('an unreadable snapshot refuses the open', async () => {
    const { dir, cleanup } = tempDir();
    cleanups.push(cleanup);
    writeFileSync(join(dir, SNAPSHOT_FILE), Buffer.alloc(4096, 7));
    await assert.rejects(openStore({ dir, migrations: T_MIGRATIONS, log: () => undefined }), /snapshot\.db is unreadable/);
  });

  it('rejects duplicate migration ids', async () => {
    const { dir, cleanup } = tempDir();
    cleanups.push(cleanup);
    await assert.rejects(
      openStore({ dir, migrations: [{ id: 'a', sql: 'SELECT 1' }, { id: 'a', sql: 'SELECT 2' }] }),
      /duplicate migration id a/,
    );
  });
});

describe('store: checkpoint and replay', () => {
  it('checkpoint writes a snapshot, truncates the log, and replay applies only later records', async () => {
    const { store, dir } = await fresh();
    for (let i = 0; i < 20; i++) await store.write((tx) => tx.run('INSERT INTO t (id) VALUES (?)', [i]));
    await store.checkpoint();
    assert.equal(statSync(join(dir, LOG_FILE)).size, HEADER_BYTES);
    assert.ok(statSync(join(dir, SNAPSHOT_FILE)).size > 0);
    assert.equal(store.stats.checkpoints, 1);
    for (let i = 20; i < 25; i++) await store.write((tx) => tx.run('INSERT INTO t (id) VALUES (?)', [i]));
    const copy = await reopen(crashCopy(dir));
    assert.equal(copy.recovery.replayed, 5);
    assert.equal(copy.get<{ n: number }>('SELECT COUNT(*) AS n FROM t')?.n, 25);
  });

  it('replay skips records the snapshot already holds (crash between rename and truncate)', async () => {
    const { store, dir } = await fresh();
    for (let i = 0; i < 10; i++) await store.write((tx) => tx.run('INSERT INTO t (id) VALUES (?)', [i]));
    const oldLog = readFileSync(join(dir, LOG_FILE));
    await store.checkpoint();
    for (let i = 10; i < 13; i++) await store.write((tx) => tx.run('INSERT INTO t (id) VALUES (?)', [i]));
    const newLog = readFileSync(join(dir, LOG_FILE));
    const copyDir = crashCopy(dir);
    // As if the truncate never happened: old records (already in the snapshot), then the new ones.
    writeFileSync(join(copyDir, LOG_FILE), Buffer.concat([oldLog, newLog.subarray(HEADER_BYTES)]));
    const copy = await reopen(copyDir);
    assert.equal(copy.recovery.replayed, 3);
    assert.equal(copy.recovery.droppedBytes, 0);
    // t has no primary key: a double replay would show duplicates.
    assert.deepEqual(copy.all<{ id: number }>('SELECT id FROM t ORDER BY id').map((r) => r.id), Array.from({ length: 13 }, (_, i) => i));
  });

  it('writes committed during a checkpoint are durable and land after it', async () => {
    const { store, dir } = await fresh();
    for (let i = 0; i < 5; i++) await store.write((tx) => tx.run('INSERT INTO t (id) VALUES (?)', [i]));
    const cp = store.checkpoint();
    const during = Array.from({ length: 10 }, (_, i) => store.write((tx) => tx.run('INSERT INTO t (id) VALUES (?)', [100 + i])));
    await Promise.all([cp, ...during]);
    const copy = await reopen(crashCopy(dir));
    assert.equal(copy.get<{ n: number }>('SELECT COUNT(*) AS n FROM t')?.n, 15);
  });

  it('checkpoints automatically when the log passes checkpointBytes', async () => {
    const { store, dir } = await fresh({ checkpointBytes: 4096 });
    for (let i = 0; i < 60; i++) await store.write((tx) => tx.run('INSERT INTO t (id, v) VALUES (?, ?)', [i, 'x'.repeat(100)]));
    // The automatic checkpoint runs in the background: wait for it, bounded (10 s).
    for (let i = 0; i < 1000 && store.stats.checkpoints === 0; i++) await new Promise((r) => setTimeout(r, 10));
    assert.ok(store.stats.checkpoints >= 1);
    assert.ok(store.stats.logBytes < 4096 + 1024);
    const copy = await reopen(crashCopy(dir));
    assert.equal(copy.get<{ n: number }>('SELECT COUNT(*) AS n FROM t')?.n, 60);
  });

  it('checkpoints by time when the log grew, and not again while idle', async () => {
    const { store } = await fresh({ checkpointIntervalMs: 20 });
    await store.write((tx) => tx.run('INSERT INTO t (id, v) VALUES (?, ?)', [1, 'a']));
    for (let i = 0; i < 500 && store.stats.checkpoints === 0; i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(store.stats.checkpoints, 1);
    await new Promise((r) => setTimeout(r, 120));
    assert.equal(store.stats.checkpoints, 1, 'an idle store does not checkpoint again');
  });

  it('checkpoints right after opening when the replayed log is past checkpointBytes', async () => {
    const { store, dir } = await fresh();
    for (let i = 0; i < 40; i++) await store.write((tx) => tx.run('INSERT INTO t (id, v) VALUES (?, ?)', [i, 'y'.repeat(100)]));
    const copyDir = crashCopy(dir);
    cleanups.push(() => rmSync(copyDir, { recursive: true, force: true }));
    const copy = await openStore({ dir: copyDir, migrations: T_MIGRATIONS, checkpointBytes: 2048, log: () => undefined });
    cleanups.push(() => copy.close());
    assert.ok(copy.recovery.replayed >= 40);
    assert.equal(copy.stats.checkpoints, 1);
    assert.equal(statSync(join(copyDir, LOG_FILE)).size, HEADER_BYTES);
    assert.equal(copy.get<{ n: number }>('SELECT COUNT(*) AS n FROM t')?.n, 40);
  });

  it('refuses a log file that is not ours instead of overwriting it', async () => {
    const { dir, cleanup } = tempDir();
    cleanups.push(cleanup);
    writeFileSync(join(dir, LOG_FILE), 'definitely not a cell log');
    await assert.rejects(openStore({ dir, migrations: T_MIGRATIONS, log: () => undefined }), /not a usable log \(bad magic\)/);
  });
});

it('a cached SELECT * follows a schema change made after it was prepared', async () => {
  const tmp = tempDir();
  const s = await openStore({ dir: tmp.dir, migrations: [{ id: 't-1', sql: 'CREATE TABLE t (a INTEGER)' }] });
  try {
    await s.write((tx) => tx.run('INSERT INTO t (a) VALUES (?)', [1]));
    assert.deepEqual(s.get('SELECT * FROM t WHERE a = ?', [1]), { a: 1 });
    await s.write((tx) => tx.run('ALTER TABLE t ADD COLUMN b TEXT'));
    await s.write((tx) => tx.run('UPDATE t SET b = ? WHERE a = ?', ['x', 1]));
    assert.deepEqual(s.get('SELECT * FROM t WHERE a = ?', [1]), { a: 1, b: 'x' });
    await s.write((tx) => tx.run('ALTER TABLE t RENAME COLUMN b TO c'));
    assert.deepEqual(s.get('SELECT * FROM t WHERE a = ?', [1]), { a: 1, c: 'x' });
  } finally {
    await s.close();
    tmp.cleanup();
  }
});
