/**
 * What only the PostgreSQL engine has: the dialect rendering (`?` → `$n`,
 * DDL types), serialization-failure retries, concurrent openers under the
 * migration advisory lock, notifications between stores and processes, and
 * connections that die under it (pg_terminate_backend on the run's server;
 * whole-server restarts are in pg-restart.test.ts, on a server of its own).
 */
import { strict as assert } from 'node:assert';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, it } from 'node:test';
import { openStore } from '../../../cell/store/open.ts';
import type { PostgresStore } from '../../../cell/store/postgres.ts';
import { StatementNames, renderMigration, splitStatements, toNumbered } from '../../../cell/store/internal/pg-sql.ts';
import type { Change, Migration, Store } from '../../../cell/store/types.ts';
import { adminQuery, pgDatabase, pgServerUrl, pgUnavailable, type PgDatabase } from '../../helpers/postgres.ts';
import { deferred, T_MIGRATIONS } from './_util.ts';

const WRITER = fileURLToPath(new URL('../../fixtures/store-writer.ts', import.meta.url));
const skip = pgUnavailable() ?? false;

describe('PostgreSQL dialect rendering (no server)', () => {
  it('numbers `?` placeholders outside literals, quoted identifiers and comments', () => {
    assert.deepEqual(toNumbered('SELECT a FROM t WHERE b = ? AND c IN (?, ?)'), {
      text: 'SELECT a FROM t WHERE b = $1 AND c IN ($2, $3)',
      count: 3,
    });
    assert.deepEqual(toNumbered("SELECT '?', 'it''s ?', \"q?\" FROM t WHERE x = ? -- why?\n AND y = ? /* ? */"), {
      text: "SELECT '?', 'it''s ?', \"q?\" FROM t WHERE x = $1 -- why?\n AND y = $2 /* ? */",
      count: 2,
    });
    assert.deepEqual(toNumbered('SELECT 1'), { text: 'SELECT 1', count: 0 });
  });

  it('names statements with parameters once each, up to a bound; others run unnamed', () => {
    const names = new StatementNames(5);
    const of = (sql: string) => names.of(toNumbered(sql));
    const a = of('SELECT a FROM t WHERE b = ?');
    assert.equal(a, 'cs1');
    assert.equal(of('SELECT a FROM t WHERE b = ?'), a, 'the same text, the same name');
    assert.equal(of('SELECT a FROM t WHERE c = ?'), 'cs2');
    assert.equal(of('SELECT 1'), undefined, 'no parameters: the simple protocol, unnamed');
    // Texts built from data (n placeholders) stop getting names at the bound; named ones keep theirs.
    const got = Array.from({ length: 6 }, (_, i) =>
      of(
        `SELECT a FROM t WHERE b IN (${Array(i + 1)
          .fill('?')
          .join(', ')})`,
      ),
    );
    assert.deepEqual(got, ['cs3', 'cs4', 'cs5', undefined, undefined, undefined]);
    assert.equal(of('SELECT a FROM t WHERE c = ?'), 'cs2');
    assert.equal(of('SELECT a FROM t WHERE d = ?'), undefined, 'past the bound: unnamed');
  });

  it('splits scripts at semicolons outside literals and comments, and maps DDL types', () => {
    assert.deepEqual(splitStatements("CREATE TABLE a (x TEXT DEFAULT ';'); -- c;\nINSERT INTO a VALUES ('1;2');\n\n"), [
      "CREATE TABLE a (x TEXT DEFAULT ';')",
      "-- c;\nINSERT INTO a VALUES ('1;2')",
    ]);
    assert.deepEqual(
      renderMigration(
        "CREATE TABLE e (seq INTEGER PRIMARY KEY AUTOINCREMENT, n INTEGER NOT NULL, b BLOB, r REAL, s TEXT DEFAULT 'INTEGER', real_name TEXT); ALTER TABLE e ADD COLUMN m integer; INSERT INTO e (n) VALUES (1)",
      ),
      [
        "CREATE TABLE e (seq BIGSERIAL PRIMARY KEY, n BIGINT NOT NULL, b BYTEA, r DOUBLE PRECISION, s TEXT DEFAULT 'INTEGER', real_name TEXT)",
        'ALTER TABLE e ADD COLUMN m BIGINT',
        'INSERT INTO e (n) VALUES (1)',
      ],
    );
    assert.throws(() => renderMigration('CREATE TABLE w (id TEXT PRIMARY KEY) WITHOUT ROWID'), /WITHOUT ROWID is SQLite-only/);
  });
});

describe('PostgreSQL engine', { skip }, () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  async function database(): Promise<PgDatabase> {
    const db = await pgDatabase();
    cleanups.push(() => db.drop());
    return db;
  }
  async function open(
    url: string,
    migrations: readonly Migration[] = T_MIGRATIONS,
    extra: { poolSize?: number; log?: (m: string) => void } = {},
  ): Promise<PostgresStore> {
    const s = await openStore(
      { engine: 'postgres', url, ...(extra.poolSize ? { poolSize: extra.poolSize } : {}) },
      { migrations, log: extra.log ?? (() => undefined) },
    );
    cleanups.push(() => s.close());
    return s;
  }
  /** What each of two stores hears (its change listener), in order. */
  function hearing(a: Pick<Store, 'onChange'>, b: Pick<Store, 'onChange'>): [Change[], Change[]] {
    const heard: [Change[], Change[]] = [[], []];
    a.onChange((c) => heard[0].push(c));
    b.onChange((c) => heard[1].push(c));
    return heard;
  }
  /** Ends every other session on the database (as a server restart would, without one). */
  async function terminateSessions(db: PgDatabase): Promise<number> {
    const r = await adminQuery(
      await pgServerUrl(),
      `SELECT pg_terminate_backend(pid) AS t FROM pg_stat_activity WHERE datname = '${db.name}' AND pid <> pg_backend_pid()`,
    );
    return r.rowCount ?? 0;
  }
  async function until(what: string, ok: () => boolean | Promise<boolean>, ms = 5000): Promise<void> {
    const end = Date.now() + ms;
    while (!(await ok())) {
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  it('runs a write function again after a serialization failure; its afterCommit effect runs once', async () => {
    const db = await database();
    const store = await open(
      db.url,
      [{ id: 'c-001', sql: "CREATE TABLE c (k TEXT PRIMARY KEY, n INTEGER NOT NULL); INSERT INTO c (k, n) VALUES ('x', 0)" }],
      { poolSize: 4 },
    );
    const N = 4;
    let calls = 0;
    let effects = 0;
    let firstReads = 0;
    const allRead = deferred();
    await Promise.all(
      Array.from({ length: N }, () =>
        store.write(async (tx) => {
          const first = calls++ < N;
          const n = (await tx.get("SELECT n FROM c WHERE k = 'x'"))?.['n'];
          // The first run of each waits until all have read: their updates must conflict.
          if (first && ++firstReads === N) allRead.resolve();
          if (first) await allRead.promise;
          await tx.run("UPDATE c SET n = ? WHERE k = 'x'", [Number(n) + 1]);
          tx.afterCommit(() => effects++);
        }),
      ),
    );
    assert.deepEqual(await store.get("SELECT n FROM c WHERE k = 'x'"), { n: N });
    assert.equal(effects, N, 'one effect per committed write');
    assert.ok(store.stats.retries >= N - 1, `retries: ${store.stats.retries}`);
    assert.equal(calls, N + store.stats.retries);
  });

  it('prepares a statement with parameters once per connection: same answers, errors and a later ADD COLUMN included', async () => {
    const db = await database();
    const store = await open(db.url, [{ id: 'p-001', sql: 'CREATE TABLE p (k TEXT PRIMARY KEY, n INTEGER NOT NULL)' }], { poolSize: 1 });
    const prepared = await store.write(async (tx) => {
      await tx.run('INSERT INTO p (k, n) VALUES (?, ?)', ['a', 1]);
      await tx.run('INSERT INTO p (k, n) VALUES (?, ?)', ['b', 2]);
      // The insert was prepared on this transaction's connection, under its name, with its text.
      return tx.all('SELECT name, statement FROM pg_prepared_statements ORDER BY name');
    });
    assert.ok(
      prepared.some((r) => r['statement'] === 'INSERT INTO p (k, n) VALUES ($1, $2)' && /^cs\d+$/.test(String(r['name']))),
      JSON.stringify(prepared),
    );
    // A prepared statement whose execution fails (a duplicate key) leaves the next use working.
    await assert.rejects(
      store.write((tx) => tx.run('INSERT INTO p (k, n) VALUES (?, ?)', ['a', 9])),
      /duplicate key/,
    );
    await store.write((tx) => tx.run('INSERT INTO p (k, n) VALUES (?, ?)', ['c', 3]));
    assert.deepEqual(await store.get('SELECT n FROM p WHERE k = ?', ['c']), { n: 3 });
    // A migration of another cell adding a column: statements naming their columns keep working.
    await adminQuery(db.url, 'ALTER TABLE p ADD COLUMN extra TEXT');
    assert.deepEqual(await store.get('SELECT n FROM p WHERE k = ?', ['c']), { n: 3 });
    await store.write((tx) => tx.run('INSERT INTO p (k, n) VALUES (?, ?)', ['d', 4]));
    assert.deepEqual(await store.all('SELECT k FROM p WHERE n > ? ORDER BY k', [1]), [{ k: 'b' }, { k: 'c' }, { k: 'd' }]);
  });

  it('statements issued in one tick go in one batch: each its own answer, the first failure aborts the transaction and skips the rest', async () => {
    const db = await database();
    const store = await open(db.url, [{ id: 'b-001', sql: 'CREATE TABLE q (k TEXT PRIMARY KEY, n INTEGER NOT NULL)' }], {
      poolSize: 1,
    });
    const INSERT = 'INSERT INTO q (k, n) VALUES (?, ?) RETURNING n';
    const COUNT = 'SELECT COUNT(*) AS c FROM q WHERE n >= ?';
    const BUMP = 'UPDATE q SET n = n + ? WHERE k = ?';
    // Each text's first use on the connection goes alone (it is parsed then); later ones can go in a batch.
    await store.write(async (tx) => {
      await tx.get(INSERT, ['w', 0]);
      await tx.get(COUNT, [0]);
      await tx.run(BUMP, [1, 'w']);
    });
    const before = store.stats.batched;
    const [a, b, c, d, e] = await store.write((tx) =>
      Promise.all([
        tx.get(INSERT, ['a', 1]),
        tx.get(INSERT, ['b', 2]),
        tx.run(BUMP, [10, 'a']),
        tx.get(COUNT, [2]),
        // A text the connection has not parsed yet goes alone, behind the batch before it: answers still in order.
        tx.all(`SELECT k FROM q WHERE k IN (${['a', 'b', 'zz'].map(() => '?').join(', ')}) ORDER BY k`, ['a', 'b', 'zz']),
      ]),
    );
    assert.deepEqual([a, b, c, d], [{ n: 1 }, { n: 2 }, { changes: 1 }, { c: 2 }], 'each statement its own answer, in order');
    assert.deepEqual(e, [{ k: 'a' }, { k: 'b' }]);
    assert.ok(store.stats.batched - before >= 4, `batched: ${store.stats.batched - before}`);

    // A duplicate key in the middle: the statements before it ran, it failed, the ones after it were skipped,
    // and the transaction kept nothing.
    const settled: PromiseSettledResult<unknown>[] = [];
    await assert.rejects(
      store.write(async (tx) => {
        settled.push(
          ...(await Promise.allSettled([tx.get(INSERT, ['x', 5]), tx.get(INSERT, ['a', 6]), tx.get(INSERT, ['y', 7]), tx.get(COUNT, [0])])),
        );
      }),
      (err: Error & { code?: string }) => err.code === '23505',
    );
    assert.deepEqual(
      settled.map((r) => r.status),
      ['fulfilled', 'rejected', 'rejected', 'rejected'],
    );
    assert.equal((settled[1] as PromiseRejectedResult).reason.code, '23505');
    assert.equal((settled[2] as PromiseRejectedResult).reason.name, 'StatementSkipped');
    assert.equal((settled[3] as PromiseRejectedResult).reason.name, 'StatementSkipped');
    assert.deepEqual(await store.all("SELECT k FROM q WHERE k IN ('x', 'y')"), [], 'nothing of the aborted transaction kept');

    // A write function that throws right after issuing statements: they run inside its transaction and roll back.
    await assert.rejects(
      store.write(async (tx) => {
        void tx.get(INSERT, ['p', 8]).catch(() => undefined);
        void tx.get(INSERT, ['r', 9]).catch(() => undefined);
        throw new Error('changed my mind');
      }),
      /changed my mind/,
    );
    // The one connection goes on: the same statements, in a batch again, commit.
    await store.write((tx) => Promise.all([tx.get(INSERT, ['x', 5]), tx.get(INSERT, ['y', 7])]));
    assert.deepEqual(await store.all('SELECT k, n FROM q ORDER BY k'), [
      { k: 'a', n: 11 },
      { k: 'b', n: 2 },
      { k: 'w', n: 1 },
      { k: 'x', n: 5 },
      { k: 'y', n: 7 },
    ]);
  });

  it('a connection that dies in the middle of a batch: nothing half-kept, the write runs again on a fresh connection', async () => {
    const db = await database();
    const store = await open(db.url, T_MIGRATIONS, { poolSize: 2 });
    const INSERT = 'INSERT INTO t (id) VALUES (?)';
    // The server ends the session running it (57P01), in the middle of the batch, on the first run only.
    const DIE = 'SELECT pg_terminate_backend(pg_backend_pid()) WHERE ? = 1';
    await store.write(async (tx) => {
      await tx.run(INSERT, [0]);
      await tx.get(DIE, [0]);
    });
    let calls = 0;
    const settled: PromiseSettledResult<unknown>[][] = [];
    await store.write(async (tx) => {
      calls++;
      const all = await Promise.allSettled([tx.run(INSERT, [calls]), tx.get(DIE, [calls]), tx.run(INSERT, [calls * 10])]);
      settled.push(all);
      const failed = all.find((r) => r.status === 'rejected');
      if (failed) throw failed.reason;
    });
    assert.equal(calls, 2);
    assert.deepEqual(
      settled[0]!.map((r) => r.status),
      ['fulfilled', 'rejected', 'rejected'],
    );
    assert.deepEqual(await store.all('SELECT id FROM t ORDER BY id'), [{ id: 0 }, { id: 2 }, { id: 20 }]);
  });

  it('gives up a write that keeps conflicting with 503 write_conflict (retryable)', async () => {
    const db = await database();
    const m = [{ id: 'c-001', sql: "CREATE TABLE c (k TEXT PRIMARY KEY, n INTEGER NOT NULL); INSERT INTO c (k, n) VALUES ('x', 0)" }];
    await (await open(db.url, m)).close();
    const store = await openStore({ engine: 'postgres', url: db.url }, { migrations: m, log: () => undefined });
    cleanups.push(() => store.close());
    // A second connection keeps changing the row between our read and our write.
    const other = await open(db.url, m);
    const err = await store
      .write(async (tx) => {
        await tx.get("SELECT n FROM c WHERE k = 'x'");
        await other.write((t2) => t2.run("UPDATE c SET n = n + 1 WHERE k = 'x'"));
        await tx.run("UPDATE c SET n = n + 100 WHERE k = 'x'");
      })
      .then(
        () => null,
        (e: unknown) => e,
      );
    assert.ok(err && typeof err === 'object');
    assert.deepEqual(
      {
        code: (err as { code?: string }).code,
        details: (err as { details?: unknown }).details,
        retryable: (err as { retryable?: boolean }).retryable,
      },
      { code: 'service_unavailable', details: { reason: 'write_conflict' }, retryable: true },
    );
    assert.equal(store.stats.retries, 29, 'tried 30 times');
    assert.deepEqual(await store.get("SELECT n FROM c WHERE k = 'x'"), { n: 30 });
  });

  it('six cells starting at once on a new database apply each migration once (advisory lock)', async () => {
    const db = await database();
    const m: Migration[] = [
      { id: 'm-001', sql: 'CREATE TABLE runs (id INTEGER PRIMARY KEY, at INTEGER)' },
      { id: 'm-002', sql: 'INSERT INTO runs (id, at) VALUES (1, 100)' },
      { id: 'm-003', sql: 'CREATE TABLE counter (n INTEGER); INSERT INTO counter (n) VALUES (1)' },
    ];
    const stores = await Promise.all(Array.from({ length: 6 }, () => open(db.url, m, { poolSize: 2 })));
    assert.deepEqual(await stores[0]!.all('SELECT id, seq FROM _migrations ORDER BY seq'), [
      { id: 'm-001', seq: 1 },
      { id: 'm-002', seq: 2 },
      { id: 'm-003', seq: 3 },
    ]);
    assert.deepEqual(await stores[3]!.get('SELECT COUNT(*) AS n FROM counter'), { n: 1 });
    assert.deepEqual(await stores[5]!.get('SELECT COUNT(*) AS n FROM runs'), { n: 1 });
  });

  for (const notify of ['in-transaction', 'after-commit'] as const)
    it(`another store on the same database sees this one's changes as remote within a second, and not its own twice (notify ${notify})`, async () => {
      const db = await database();
      const a = await openStore({ engine: 'postgres', url: db.url, notify }, { migrations: T_MIGRATIONS, log: () => undefined });
      cleanups.push(() => a.close());
      const b = await open(db.url);
      const [atA, atB] = hearing(a, b);
      const t0 = Date.now();
      await a.write((tx) => tx.run('INSERT INTO t (id) VALUES (1)'));
      await until("b to hear of a's write", () => atB.length > 0, 1000);
      assert.ok(Date.now() - t0 < 1000);
      assert.deepEqual(
        atB.map((c) => ({ tables: [...c.tables], remote: c.remote })),
        [{ tables: ['t'], remote: true }],
      );
      await new Promise((r) => setTimeout(r, 100));
      assert.deepEqual(
        atA.map((c) => ({ tables: [...c.tables], remote: c.remote })),
        [{ tables: ['t'], remote: false }],
        'its own notification is not delivered again',
      );
      await assert.rejects(
        a.write(async (tx) => {
          await tx.run('INSERT INTO t (id) VALUES (2)');
          throw new Error('rolled back');
        }),
      );
      await new Promise((r) => setTimeout(r, 200));
      assert.equal(atB.length, 1, 'a rolled-back transaction notifies nobody');
    });

  it("batched notifications: several writes' tables reach another store in one change within a second", async () => {
    const db = await database();
    const a = await open(db.url);
    const b = await open(db.url);
    const [atA, atB] = hearing(a, b);
    const t0 = Date.now();
    await Promise.all([1, 2, 3].map((id) => a.write((tx) => tx.run('INSERT INTO t (id) VALUES (?)', [id]), { notify: 'batched' })));
    assert.equal(atA.length, 3, 'this store hears each commit at once');
    await until("b to hear of a's writes", () => atB.length > 0, 1000);
    assert.ok(Date.now() - t0 < 1000);
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(
      atB.map((c) => ({ tables: [...c.tables], remote: c.remote })),
      [{ tables: ['t'], remote: true }],
      'one notification for the three commits',
    );
    await assert.rejects(
      a.write(
        async (tx) => {
          await tx.run('INSERT INTO t (id) VALUES (9)');
          throw new Error('rolled back');
        },
        { notify: 'batched' },
      ),
    );
    await new Promise((r) => setTimeout(r, 400));
    assert.equal(atB.length, 1, 'a rolled-back transaction notifies nobody');
  });

  it('subjects: a notification names the keys its writes declared, and none once one write declared none or a bad key', async () => {
    const db = await database();
    const a = await open(db.url);
    const b = await open(db.url);
    const [atA, atB] = hearing(a, b);
    const heard = async (n: number): Promise<Change> => {
      await until(`b to hear notification ${n}`, () => atB.length >= n, 2000);
      return atB[n - 1]!;
    };
    // Batched writes naming their keys: one notification naming all of them.
    await Promise.all(
      ['run_1', 'run_2'].map((k, i) =>
        a.write((tx) => tx.run('INSERT INTO t (id) VALUES (?)', [i + 1]), { notify: 'batched', subjects: [k] }),
      ),
    );
    // The two commits may land in either order.
    assert.deepEqual(
      atA.map((c) => [...(c.subjects ?? [])].join()).sort(),
      ['run_1', 'run_2'],
      'this store hears each commit with its subjects',
    );
    assert.deepEqual([...((await heard(1)).subjects ?? ['(none)'])].sort(), ['run_1', 'run_2']);
    // A batched write without subjects: the notification that covers it names none (any key), whether or
    // not the other write of the interval shares it (a slow machine may split them).
    await Promise.all([
      a.write((tx) => tx.run('INSERT INTO t (id) VALUES (3)'), { notify: 'batched', subjects: ['run_3'] }),
      a.write((tx) => tx.run('INSERT INTO t (id) VALUES (4)'), { notify: 'batched' }),
    ]);
    await heard(2);
    await new Promise((r) => setTimeout(r, 500));
    const second = atB.slice(1);
    assert.ok(second.some((c) => c.subjects === undefined));
    assert.ok(second.every((c) => c.subjects === undefined || [...c.subjects].join() === 'run_3'));
    // A key that is not an identifier is never put in the notification's text.
    const n = atB.length;
    await a.write((tx) => tx.run('INSERT INTO t (id) VALUES (5)'), { subjects: ["x'); DROP TABLE t; --"] });
    const bad = await heard(n + 1);
    assert.equal(bad.subjects, undefined);
    assert.deepEqual([...bad.tables], ['t']);
    // An immediate notification carries its subjects too.
    await a.write((tx) => tx.run('INSERT INTO t (id) VALUES (6)'), { subjects: ['run_6'] });
    assert.deepEqual([...((await heard(n + 2)).subjects ?? [])], ['run_6']);
    assert.deepEqual(await b.get('SELECT COUNT(*) AS n FROM t'), { n: 6 });
  });

  it("a write made by another process reaches this store's listeners within a second", { timeout: 60_000 }, async () => {
    const db = await database();
    const m = [{ id: 'crash-001-acks', sql: 'CREATE TABLE acks (id TEXT PRIMARY KEY, pad TEXT)' }];
    const store = await open(db.url, m);
    const heard: { at: number; tables: string[]; remote: boolean }[] = [];
    store.onChange((c) => heard.push({ at: Date.now(), tables: [...c.tables], remote: c.remote }));
    const child = spawn(process.execPath, ['--import', 'tsx', WRITER, db.url, 'x', '1', '0', '1'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    const exited = new Promise((r) => child.once('exit', r));
    try {
      await until('the child to acknowledge a write', () => /\nx-0-0\n/.test(out), 30_000).catch((e: Error) => {
        throw new Error(`${e.message}: ${err}`);
      });
      const ackedAt = Date.now();
      await until('the remote change', () => heard.length > 0, 1000);
      assert.deepEqual(heard[0]!.tables, ['acks']);
      assert.equal(heard[0]!.remote, true);
      assert.ok(heard[0]!.at - ackedAt < 1000);
    } finally {
      child.kill('SIGKILL');
      await exited;
    }
  });

  it('connections killed under it: reads and writes go on, the listener comes back and reports the gap', async () => {
    const db = await database();
    const notes: string[] = [];
    const store = await open(db.url, T_MIGRATIONS, { log: (m) => notes.push(m) });
    const other = await open(db.url);
    const heard: Change[] = [];
    store.onChange((c) => heard.push(c));
    await store.write((tx) => tx.run('INSERT INTO t (id) VALUES (1)'));
    assert.ok((await terminateSessions(db)) >= 2);
    // The pool drops dead idle connections; a read on one that died unseen is tried once more.
    assert.deepEqual(await store.get('SELECT COUNT(*) AS n FROM t'), { n: 1 });
    await store.write((tx) => tx.run('INSERT INTO t (id) VALUES (2)'));
    await until('the listener to reconnect', async () => (await store.health()).ok, 5000);
    await until('the gap to be reported', () => heard.some((c) => c.remote && c.tables.has('t')), 5000);
    assert.ok(
      notes.some((n) => /change-notification connection to PostgreSQL re-established/.test(n)),
      notes.join('\n'),
    );
    const before = heard.length;
    await other.write((tx) => tx.run('INSERT INTO t (id) VALUES (3)'));
    await until('a remote change after the reconnect', () => heard.length > before, 2000);
  });

  it('a connection lost in the middle of a write function: nothing half-kept, the function runs again on a fresh connection', async () => {
    const db = await database();
    const store = await open(db.url, T_MIGRATIONS, { poolSize: 2 });
    const inside = deferred();
    const gate = deferred();
    let calls = 0;
    const w = store.write(async (tx) => {
      calls++;
      await tx.run('INSERT INTO t (id) VALUES (?)', [calls]);
      if (calls === 1) {
        inside.resolve();
        await gate.promise;
      }
      await tx.run('INSERT INTO t (id) VALUES (?)', [calls * 10]);
    });
    await inside.promise;
    await terminateSessions(db);
    gate.resolve();
    await w;
    assert.equal(calls, 2);
    assert.deepEqual(await store.all('SELECT id FROM t ORDER BY id'), [{ id: 2 }, { id: 20 }]);
  });

  it('a URL that is not postgres:// and an unreachable server are refused with clear messages', async () => {
    await assert.rejects(
      openStore({ engine: 'postgres', url: 'mysql://x@127.0.0.1/db' }, { migrations: [] }),
      /must start with postgres:\/\//,
    );
    await assert.rejects(
      openStore({ engine: 'postgres', url: 'postgres://u:secret@127.0.0.1:1/nodb' }, { migrations: [], log: () => undefined }),
      (e: Error) => /^store: cannot reach PostgreSQL at 127\.0\.0\.1:1\/nodb/.test(e.message) && !e.message.includes('secret'),
    );
  });
});
