/**
 * The store contract (cell/store/types.ts) on both engines: transactions,
 * rollback, aborted transactions, afterCommit once, change notifications,
 * type round trips, the shared dialect, migrations. PostgreSQL runs on a new
 * database per test (test/helpers/postgres.ts).
 */
import { strict as assert } from 'node:assert';
import { afterEach, describe, it } from 'node:test';
import { openStore } from '../../../cell/store/open.ts';
import type { Migration, OpenStoreOptions, Store } from '../../../cell/store/types.ts';
import { deferred, ENGINES, T_MIGRATIONS, type Place } from './_util.ts';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

for (const engine of ENGINES) {
  describe(`store contract on the ${engine.name} engine`, { skip: engine.skip }, () => {
    async function place(): Promise<Place> {
      const p = await engine.fresh();
      cleanups.push(() => p.cleanup());
      return p;
    }
    async function open(p: Place, migrations: readonly Migration[] = T_MIGRATIONS, extra: Partial<OpenStoreOptions> = {}): Promise<Store> {
      const s = await openStore(p.config, { migrations, log: () => undefined, ...extra });
      cleanups.push(() => s.close());
      return s;
    }
    async function fresh(migrations: readonly Migration[] = T_MIGRATIONS): Promise<{ store: Store; p: Place }> {
      const p = await place();
      return { store: await open(p, migrations), p };
    }
    const count = async (s: Store, table = 't') => (await s.get(`SELECT COUNT(*) AS n FROM ${table}`))?.['n'];

    it('writes, reads inside and outside the transaction, and keeps everything across close and reopen', async () => {
      const { store, p } = await fresh();
      const r = await store.write(async (tx) => {
        const { changes } = await tx.run('INSERT INTO t (id, v) VALUES (?, ?)', [1, 'one']);
        await tx.run('INSERT INTO t (id, v) VALUES (?, ?)', [2, 'two']);
        const inside = await tx.get('SELECT COUNT(*) AS n FROM t');
        const viaStore = await store.get('SELECT COUNT(*) AS n FROM t');
        return { changes, inside: inside?.['n'], viaStore: viaStore?.['n'] };
      });
      assert.deepEqual(r, { changes: 1, inside: 2, viaStore: 2 }, 'reads inside the write function see its own writes');
      const upd = await store.write((tx) => tx.run('UPDATE t SET v = ? WHERE id >= ?', ['x', 0]));
      assert.equal(upd.changes, 2);
      await store.close();
      const again = await open(p);
      assert.deepEqual(await again.all('SELECT id, v FROM t ORDER BY id'), [
        { id: 1, v: 'x' },
        { id: 2, v: 'x' },
      ]);
    });

    it('round-trips big integers, unicode text, bytes, reals and null; aggregates and booleans come back as numbers', async () => {
      const { store, p } = await fresh([
        { id: 'types-001', sql: 'CREATE TABLE v (id INTEGER PRIMARY KEY, n INTEGER, s TEXT, b BLOB, r REAL)' },
      ]);
      const big = 2 ** 40 + 7;
      const rows = [
        [1, big, 'plain', new Uint8Array([0, 1, 2, 254, 255]), 1.5],
        [
          2,
          -big,
          "it's a 'quote', a ? and \"double\" \u00e9\u00e8 \u4e2d\u6587 \u{1F600}\ttab\nline",
          new Uint8Array(300).map((_, i) => i % 256),
          -0.25,
        ],
        [3, Number.MAX_SAFE_INTEGER, '', null, null],
        [2 ** 33, 2 ** 31, null, new Uint8Array([7]), 1e300],
      ] as const;
      await store.write(async (tx) => {
        for (const r of rows) await tx.run('INSERT INTO v (id, n, s, b, r) VALUES (?, ?, ?, ?, ?)', [...r]);
      });
      const check = async (s: Store) => {
        const got = await s.all('SELECT id, n, s, b, r FROM v ORDER BY id');
        assert.equal(got.length, 4);
        for (const [i, r] of rows.entries()) {
          const g = got[i]!;
          assert.equal(g['id'], r[0]);
          assert.equal(g['n'], r[1]);
          assert.equal(g['s'], r[2]);
          if (r[3] === null) assert.equal(g['b'], null);
          else {
            assert.ok(g['b'] instanceof Uint8Array, 'bytes come back as a Uint8Array');
            assert.deepEqual([...(g['b'] as Uint8Array)], [...r[3]]);
          }
          assert.equal(g['r'], r[4]);
        }
        const agg = await s.get('SELECT COUNT(*) AS n, SUM(n) AS total, MAX(id) AS top FROM v WHERE id < ?', [3]);
        assert.deepEqual(agg, { n: 2, total: 0, top: 2 });
        assert.deepEqual(await s.get('SELECT COUNT(*) AS n FROM v WHERE s IS NULL'), { n: 1 });
        const flag = await s.get('SELECT (n > 0) AS pos FROM v WHERE id = ?', [1]);
        assert.deepEqual(flag, { pos: 1 }, 'a comparison reads as 1/0 on both engines');
        const bound = await s.get('SELECT id FROM v WHERE n = ?', [2 ** 31]);
        assert.deepEqual(bound, { id: 2 ** 33 });
      };
      await check(store);
      await store.close();
      await check(await open(p, [{ id: 'types-001', sql: 'CREATE TABLE v (id INTEGER PRIMARY KEY, n INTEGER, s TEXT, b BLOB, r REAL)' }]));
    });

    it('`?` inside string literals is text, not a placeholder', async () => {
      const { store } = await fresh();
      await store.write((tx) => tx.run("INSERT INTO t (id, v) VALUES (?, 'why? because')", [5]));
      assert.deepEqual(await store.get("SELECT v, 'a?b' AS lit FROM t WHERE id = ? AND v <> '?'", [5]), { v: 'why? because', lit: 'a?b' });
    });

    it('a throwing write function keeps nothing and rejects with its error', async () => {
      const { store } = await fresh();
      await store.write((tx) => tx.run('INSERT INTO t (id) VALUES (1)'));
      const boom = new Error('boom');
      let effects = 0;
      await assert.rejects(
        store.write(async (tx) => {
          await tx.run('INSERT INTO t (id) VALUES (2)');
          tx.afterCommit(() => effects++);
          throw boom;
        }),
        (err) => err === boom,
      );
      assert.equal(await count(store), 1);
      assert.equal(effects, 0, 'no afterCommit effect on rollback');
      await store.write((tx) => tx.run('INSERT INTO t (id) VALUES (3)'));
      assert.deepEqual(await store.all('SELECT id FROM t ORDER BY id'), [{ id: 1 }, { id: 3 }]);
    });

    it('a failed statement aborts the transaction even when the function catches it', async () => {
      const { store } = await fresh([{ id: 'u-001', sql: 'CREATE TABLE u (id INTEGER PRIMARY KEY, v TEXT)' }]);
      await store.write((tx) => tx.run('INSERT INTO u (id, v) VALUES (1, ?)', ['a']));
      const err = await store
        .write(async (tx) => {
          await tx.run('INSERT INTO u (id, v) VALUES (2, ?)', ['b']);
          try {
            await tx.run('INSERT INTO u (id, v) VALUES (1, ?)', ['dup']);
          } catch {
            // Swallowed: the transaction is aborted all the same.
          }
          return 'caught';
        })
        .then(
          () => null,
          (e: unknown) => e,
        );
      assert.ok(err instanceof Error, 'the write rejects');
      assert.deepEqual(await store.all('SELECT id, v FROM u ORDER BY id'), [{ id: 1, v: 'a' }], 'nothing of it is kept');
      await assert.rejects(store.write((tx) => tx.run('INSERT INTO nope (x) VALUES (1)')));
    });

    it('statements the function issues together or leaves in flight are part of the transaction, in order', async () => {
      const { store } = await fresh([{ id: 'u-001', sql: 'CREATE TABLE u (id INTEGER PRIMARY KEY, v TEXT)' }]);
      // Issued together, run in the order issued: the read sees the insert before it.
      const seen = await store.write(async (tx) => {
        const [, row] = await Promise.all([tx.run('INSERT INTO u (id, v) VALUES (1, ?)', ['a']), tx.get('SELECT v FROM u WHERE id = 1')]);
        // Left in flight to the COMMIT: kept with it.
        tx.run('INSERT INTO u (id, v) VALUES (2, ?)', ['b']).catch(() => undefined);
        return row?.['v'];
      });
      assert.equal(seen, 'a');
      assert.deepEqual(await store.all('SELECT id, v FROM u ORDER BY id'), [
        { id: 1, v: 'a' },
        { id: 2, v: 'b' },
      ]);
      // One left in flight that fails: the write rejects with its error and keeps nothing.
      let effects = 0;
      const err = await store
        .write(async (tx) => {
          tx.afterCommit(() => effects++);
          await tx.run('INSERT INTO u (id, v) VALUES (3, ?)', ['c']);
          tx.run('INSERT INTO u (id, v) VALUES (1, ?)', ['dup']).catch(() => undefined);
          return 'returned';
        })
        .then(
          () => null,
          (e: unknown) => e,
        );
      assert.ok(err instanceof Error, 'the write rejects');
      assert.equal(effects, 0, 'no afterCommit effect');
      assert.deepEqual(
        (await store.all('SELECT id FROM u ORDER BY id')).map((r) => r['id']),
        [1, 2],
        'nothing of it is kept',
      );
    });

    it('refuses a nested write, transaction control, and a transaction used after it ended', async () => {
      const { store } = await fresh();
      let inner: Promise<unknown> | undefined;
      await store.write(async (tx) => {
        await tx.run('INSERT INTO t (id) VALUES (2)');
        inner = store
          .write((tx2) => tx2.run('INSERT INTO t (id) VALUES (3)'))
          .then(
            () => 'committed',
            (err: unknown) => err,
          );
      });
      const err = await inner;
      assert.ok(err instanceof TypeError && /nested/.test(err.message), String(err));
      await assert.rejects(
        store.write(async (tx) => {
          await tx.run('INSERT INTO t (id) VALUES (4)');
          await tx.run('COMMIT');
        }),
        (e) => e instanceof TypeError && /"COMMIT" is not allowed/.test(e.message),
      );
      let leaked: Parameters<Parameters<Store['write']>[0]>[0] | undefined;
      await store.write(async (tx) => {
        leaked = tx;
      });
      await assert.rejects(leaked!.run('INSERT INTO t (id) VALUES (5)'), (e) => e instanceof TypeError && /after it ended/.test(e.message));
      assert.deepEqual(await store.all('SELECT id FROM t'), [{ id: 2 }]);
    });

    it('a write that returns rows (INSERT … RETURNING through tx.get) is kept like any write', async () => {
      const p = await place();
      const m = [{ id: 'seq-001', sql: 'CREATE TABLE a (seq INTEGER PRIMARY KEY AUTOINCREMENT, x TEXT NOT NULL)' }];
      const store = await open(p, m);
      const first = await store.write((tx) => tx.get('INSERT INTO a (x) VALUES (?) RETURNING seq', ['one']));
      const second = await store.write((tx) => tx.all('INSERT INTO a (x) VALUES (?), (?) RETURNING seq', ['two', 'three']));
      assert.deepEqual(first, { seq: 1 });
      assert.deepEqual(second, [{ seq: 2 }, { seq: 3 }]);
      await store.close();
      const again = await open(p, m);
      assert.deepEqual(await again.all('SELECT seq, x FROM a ORDER BY seq'), [
        { seq: 1, x: 'one' },
        { seq: 2, x: 'two' },
        { seq: 3, x: 'three' },
      ]);
      assert.deepEqual(await again.write((tx) => tx.get('INSERT INTO a (x) VALUES (?) RETURNING seq', ['four'])), { seq: 4 });
    });

    it('readers outside an open transaction never see its uncommitted writes', async () => {
      const { store } = await fresh();
      const gate = deferred();
      const inserted = deferred();
      const w = store.write(async (tx) => {
        await tx.run('INSERT INTO t (id) VALUES (1)');
        inserted.resolve();
        await gate.promise;
      });
      await inserted.promise;
      let seen: unknown = 'pending';
      const r = store.get('SELECT COUNT(*) AS n FROM t').then((row) => {
        seen = row?.['n'];
      });
      for (let i = 0; i < 20; i++) await new Promise((res) => setImmediate(res));
      assert.ok(seen === 'pending' || seen === 0, `a reader saw ${String(seen)} before the commit`);
      gate.resolve();
      await w;
      await r;
      assert.equal(await count(store), 1);
    });

    it('read-modify-write from 16 concurrent writers loses no update; afterCommit runs once per write', async () => {
      const { store } = await fresh([
        { id: 'c-001', sql: "CREATE TABLE c (k TEXT PRIMARY KEY, n INTEGER NOT NULL); INSERT INTO c (k, n) VALUES ('x', 0)" },
      ]);
      let effects = 0;
      await Promise.all(
        Array.from({ length: 16 }, () =>
          store.write(async (tx) => {
            const n = (await tx.get("SELECT n FROM c WHERE k = 'x'"))?.['n'];
            await tx.run("UPDATE c SET n = ? WHERE k = 'x'", [Number(n) + 1]);
            tx.afterCommit(() => effects++);
          }),
        ),
      );
      assert.deepEqual(await store.get("SELECT n FROM c WHERE k = 'x'"), { n: 16 });
      assert.equal(effects, 16);
    });

    it("onChange: this store's committed writes at once, with the tables written; nothing for a rollback or a read-only write", async () => {
      const { store } = await fresh([...T_MIGRATIONS, { id: 'test-002-u', sql: 'CREATE TABLE u (id INTEGER)' }]);
      const seen: { tables: string[]; remote: boolean }[] = [];
      const off = store.onChange((c) => seen.push({ tables: [...c.tables].sort(), remote: c.remote }));
      await store.write(async (tx) => {
        await tx.run('INSERT INTO t (id) VALUES (1)');
        await tx.run('INSERT INTO u (id) VALUES (1)');
      });
      assert.deepEqual(seen, [{ tables: ['t', 'u'], remote: false }], 'delivered before write() resolves');
      await assert.rejects(
        store.write(async (tx) => {
          await tx.run('DELETE FROM t');
          throw new Error('no');
        }),
      );
      await store.write((tx) => tx.get('SELECT COUNT(*) AS n FROM t'));
      await store.write((tx) => tx.run('UPDATE u SET id = 2'));
      off();
      await store.write((tx) => tx.run('DELETE FROM u'));
      assert.deepEqual(seen, [
        { tables: ['t', 'u'], remote: false },
        { tables: ['u'], remote: false },
      ]);
    });

    it('an afterCommit effect or a listener that throws does not turn a durable write into a failure', async () => {
      const notes: string[] = [];
      const p = await place();
      const s = await open(p, T_MIGRATIONS, { log: (m) => notes.push(m) });
      s.onChange(() => {
        throw new Error('listener bug');
      });
      let after = 0;
      const r = await s.write(async (tx) => {
        await tx.run('INSERT INTO t (id) VALUES (1)');
        tx.afterCommit(() => {
          throw new Error('effect bug');
        });
        tx.afterCommit(() => {
          after++;
        });
        return 'done';
      });
      assert.equal(r, 'done');
      assert.equal(after, 1, 'the effects after the throwing one still run');
      assert.equal(await count(s), 1);
      assert.ok(
        notes.some((n) => /afterCommit effect threw: effect bug/.test(n)),
        notes.join('\n'),
      );
      assert.ok(
        notes.some((n) => /change listener threw: listener bug/.test(n)),
        notes.join('\n'),
      );
    });

    it('refuses SQL outside the shared dialect, naming the portable spelling, and aborts the transaction', async () => {
      const { store } = await fresh();
      const refused: [string, RegExp][] = [
        ['INSERT OR IGNORE INTO t (id) VALUES (1)', /ON CONFLICT/],
        ['INSERT OR REPLACE INTO t (id) VALUES (1)', /ON CONFLICT/],
        ['SELECT IFNULL(v, ?) AS v FROM t', /COALESCE/],
        ['SELECT MAX(id, 3) AS m FROM t', /CASE WHEN/],
        ["SELECT json_extract(v, '$.a') AS a FROM t", /JSON is stored as TEXT/],
        ["SELECT datetime('now') AS d", /pass times and ids in/],
        ['SELECT random() AS r', /pass times and ids in/],
        ['SELECT rowid AS r FROM t ORDER BY rowid', /RETURNING/],
        ['SELECT CAST(v AS INTEGER) AS n FROM t', /BIGINT/],
        ['SELECT id AS keyId FROM t', /lower-case aliases/],
        ['SELECT v::text AS v FROM t', /CAST/],
      ];
      for (const [sql, why] of refused) {
        await assert.rejects(
          store.all(sql, sql.includes('?') ? ['x'] : []),
          (e: Error) => e instanceof TypeError && /not in the shared SQL dialect/.test(e.message) && why.test(e.message),
          sql,
        );
      }
      // Literals and comments are not code.
      assert.deepEqual(await store.get("SELECT 'INSERT OR IGNORE, IFNULL(a, b), rowid' AS s -- MAX(a, b)"), {
        s: 'INSERT OR IGNORE, IFNULL(a, b), rowid',
      });
      assert.deepEqual(await store.get('SELECT MAX(id) AS m, COALESCE(MIN(id), 0) AS z FROM t'), { m: null, z: 0 });
      await assert.rejects(
        store.write(async (tx) => {
          await tx.run('INSERT INTO t (id) VALUES (1)');
          await tx.run('INSERT OR IGNORE INTO t (id) VALUES (2)').catch(() => undefined);
        }),
        TypeError,
      );
      assert.equal(await count(store), 0, 'the refusal aborted the transaction');
      await assert.rejects(
        openStore((await place()).config, {
          migrations: [{ id: 'x-001', sql: 'CREATE TABLE w (id TEXT PRIMARY KEY) WITHOUT ROWID' }],
          log: () => undefined,
        }),
        /WITHOUT ROWID/,
      );
    });

    it('health is ok while open and store_closed after close; writes after close get 503', async () => {
      const { store } = await fresh();
      assert.deepEqual(await store.health(), { ok: true });
      await store.close();
      assert.deepEqual(await store.health(), { ok: false, reason: 'store_closed' });
      await assert.rejects(
        store.write((tx) => tx.run('INSERT INTO t (id) VALUES (1)')),
        { code: 'service_unavailable' },
      );
      await store.close(); // idempotent
    });

    describe('migrations', () => {
      it('applies each once, in order, records them, and notes a changed one without re-running it', async () => {
        const p = await place();
        const m1: Migration[] = [
          { id: 'b-001', sql: 'CREATE TABLE x (n INTEGER, label TEXT); INSERT INTO x (n) VALUES (1);' },
          { id: 'a-002', sql: "INSERT INTO x (n, label) VALUES (2, 'semi;colon')" },
        ];
        const s1 = await open(p, m1);
        await s1.close();
        const notes: string[] = [];
        const s2 = await open(p, [...m1, { id: 'c-003', sql: '-- a comment; with a semicolon\nINSERT INTO x (n) VALUES (3)' }], {
          log: (m) => notes.push(m),
        });
        assert.deepEqual(await s2.all('SELECT n, label FROM x ORDER BY n'), [
          { n: 1, label: null },
          { n: 2, label: 'semi;colon' },
          { n: 3, label: null },
        ]);
        assert.deepEqual(await s2.all('SELECT id, seq FROM _migrations ORDER BY seq'), [
          { id: 'b-001', seq: 1 },
          { id: 'a-002', seq: 2 },
          { id: 'c-003', seq: 3 },
        ]);
        assert.deepEqual(
          notes.filter((n) => /migration/.test(n)),
          [],
        );
        await s2.close();
        const s3 = await open(p, [{ id: 'b-001', sql: 'CREATE TABLE x (changed INTEGER)' }, m1[1]!, { id: 'c-003', sql: 'SELECT 1' }], {
          log: (m) => notes.push(m),
        });
        assert.ok(
          notes.some((n) => /migration b-001 was applied with different SQL/.test(n)),
          notes.join('\n'),
        );
        assert.equal(await count(s3, 'x'), 3, 'not re-run');
      });

      it('refuses to open a schema newer than the cell knows, naming the migrations', async () => {
        const p = await place();
        const s = await open(p, [...T_MIGRATIONS, { id: 'future-009', sql: 'CREATE TABLE f (n INTEGER)' }]);
        await s.close();
        await assert.rejects(
          openStore(p.config, { migrations: T_MIGRATIONS, log: () => undefined }),
          /^Error: store: the database schema is newer than this cell: it records migration\(s\) future-009 that this cell does not know/,
        );
      });

      it('a failing migration refuses the open, names itself, and leaves nothing applied', async () => {
        const p = await place();
        await assert.rejects(
          openStore(p.config, {
            migrations: [
              { id: 'ok-001', sql: 'CREATE TABLE y (n INTEGER)' },
              { id: 'bad-002', sql: 'CREATE TABLE y2 (n INTEGER); CREATE TABLE' },
            ],
            log: () => undefined,
          }),
          /^Error: store: migration bad-002 failed: /,
        );
        const s = await open(p, [{ id: 'ok-001', sql: 'CREATE TABLE y (n INTEGER)' }]);
        assert.deepEqual(await s.all('SELECT id FROM _migrations'), [{ id: 'ok-001' }]);
        await s.write((tx) => tx.run('CREATE TABLE y2 (n INTEGER)')); // bad-002's first statement did not stay
      });

      it('rejects duplicate and empty migration ids', async () => {
        const p = await place();
        await assert.rejects(
          openStore(p.config, {
            migrations: [
              { id: 'a', sql: 'SELECT 1' },
              { id: 'a', sql: 'SELECT 2' },
            ],
          }),
          /duplicate migration id a/,
        );
        await assert.rejects(openStore(p.config, { migrations: [{ id: '', sql: 'SELECT 1' }] }), TypeError);
      });

      it('DDL in SQLite spelling works on both engines: AUTOINCREMENT, INTEGER past 2^31, BLOB, REAL', async () => {
        const { store } = await fresh([
          {
            id: 'ddl-001',
            sql: 'CREATE TABLE d (seq INTEGER PRIMARY KEY AUTOINCREMENT, at INTEGER NOT NULL, body BLOB, score REAL DEFAULT 0.5)',
          },
        ]);
        await store.write(async (tx) => {
          await tx.run('INSERT INTO d (at, body) VALUES (?, ?)', [1_700_000_000_000, new Uint8Array([1])]);
          await tx.run('INSERT INTO d (at) VALUES (?)', [2 ** 45]);
        });
        assert.deepEqual(await store.all('SELECT seq, at, score FROM d ORDER BY seq'), [
          { seq: 1, at: 1_700_000_000_000, score: 0.5 },
          { seq: 2, at: 2 ** 45, score: 0.5 },
        ]);
      });
    });
  });
}
