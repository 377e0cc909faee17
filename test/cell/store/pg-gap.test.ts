/**
 * Notification gaps on the PostgreSQL engine, and the cache that follows the
 * store (cell/store/change-cache.ts): a lost LISTEN connection is reported at
 * once (`gap: 'lost'`) and again when it is back (`gap: 'resumed'`); one that
 * stops answering without an error (its backend SIGSTOPped: a half-open
 * connection) is found by the probe; a cache reads through for the whole gap;
 * a write with `{ notify: false }` is heard locally only.
 */
import { strict as assert } from 'node:assert';
import { afterEach, describe, it } from 'node:test';
import { ChangeCache } from '../../../cell/store/change-cache.ts';
import { openStore } from '../../../cell/store/open.ts';
import type { PostgresStore } from '../../../cell/store/postgres.ts';
import type { Change, Store } from '../../../cell/store/types.ts';
import { adminQuery, pgDatabase, pgServerUrl, pgUnavailable, type PgDatabase } from '../../helpers/postgres.ts';
import { T_MIGRATIONS } from './_util.ts';

const skip = pgUnavailable() ?? false;

async function until(what: string, cond: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('ChangeCache (no server)', () => {
  /** A store that only delivers changes the test emits. */
  function fakeStore() {
    const ls = new Set<(c: Change) => void>();
    return {
      store: {
        onChange: (l: (c: Change) => void) => {
          ls.add(l);
          return () => ls.delete(l);
        },
      } satisfies Pick<Store, 'onChange'>,
      emit: (c: Change) => {
        for (const l of ls) l(c);
      },
    };
  }

  it('empties on a change to its tables, refuses a value read before it, ignores other tables', () => {
    const f = fakeStore();
    const c = new ChangeCache<string, number>(f.store, ['a'], 10);
    c.set('k', 1, c.generation);
    assert.equal(c.get('k'), 1);
    f.emit({ tables: new Set(['b']), remote: true });
    assert.equal(c.get('k'), 1, 'another table does not touch it');
    const before = c.generation;
    f.emit({ tables: new Set(['a']), remote: true });
    assert.equal(c.get('k'), undefined);
    c.set('k', 1, before);
    assert.equal(c.get('k'), undefined, 'a value read before the change is not kept');
  });

  it('holds and keeps nothing between a gap lost and resumed', () => {
    const f = fakeStore();
    const c = new ChangeCache<string, number>(f.store, ['a'], 10);
    c.set('k', 1, c.generation);
    f.emit({ tables: new Set(['a', 'b']), remote: true, gap: 'lost' });
    assert.equal(c.following, false);
    assert.equal(c.get('k'), undefined);
    c.set('k', 2, c.generation);
    assert.equal(c.get('k'), undefined, 'nothing is kept while deaf');
    f.emit({ tables: new Set(['a', 'b']), remote: true, gap: 'resumed' });
    assert.equal(c.following, true);
    c.set('k', 3, c.generation);
    assert.equal(c.get('k'), 3);
    c.close();
    f.emit({ tables: new Set(['a']), remote: true });
    assert.equal(c.get('k'), 3, 'closed: no longer follows');
  });
});

describe('PostgreSQL notification gaps', { skip }, () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  async function database(): Promise<PgDatabase> {
    const db = await pgDatabase();
    cleanups.push(() => db.drop());
    return db;
  }
  async function open(url: string): Promise<PostgresStore> {
    const s = (await openStore(
      { engine: 'postgres', url, poolSize: 2 },
      { migrations: T_MIGRATIONS, log: () => undefined },
    )) as PostgresStore;
    cleanups.push(() => s.close());
    return s;
  }
  it('a LISTEN connection terminated: `lost` at once, then `resumed`; a cache reads through in between', async () => {
    const db = await database();
    const store = await open(db.url);
    const other = await open(db.url);
    const heard: Change[] = [];
    store.onChange((c) => heard.push(c));
    const cache = new ChangeCache<string, number>(store, ['t'], 10);
    cache.set('k', 1, cache.generation);
    const r = await adminQuery(
      await pgServerUrl(),
      `SELECT pg_terminate_backend(pid) AS t FROM pg_stat_activity WHERE datname = '${db.name}' AND application_name = 'agent-cell-listen'`,
    );
    assert.equal(r.rows.length, 2, 'both stores listen');
    await until('the loss to be reported', () => heard.some((c) => c.gap === 'lost'), 5000);
    const lost = heard.find((c) => c.gap === 'lost')!;
    assert.ok(lost.tables.has('t'), 'the loss names every table');
    // Whatever was cached may be stale now, and the cache keeps nothing until the connection is back.
    assert.equal(cache.get('k'), undefined);
    await until('the connection to come back', () => heard.some((c) => c.gap === 'resumed'), 10_000);
    assert.ok(heard.findIndex((c) => c.gap === 'lost') < heard.findIndex((c) => c.gap === 'resumed'));
    cache.set('k', 2, cache.generation);
    assert.equal(cache.get('k'), 2);
    const n = heard.length;
    await other.write((tx) => tx.run('INSERT INTO t (id) VALUES (1)'));
    await until('a remote change after the reconnect', () => heard.length > n, 2000);
    assert.equal(cache.get('k'), undefined, "the other store's write empties the cache again");
  });

  it('a LISTEN connection that stops answering without an error (half-open) is found by the probe', { timeout: 60_000 }, async () => {
    const db = await database();
    const store = await open(db.url);
    const heard: { at: number; change: Change }[] = [];
    store.onChange((c) => heard.push({ at: Date.now(), change: c }));
    const r = await adminQuery(
      await pgServerUrl(),
      `SELECT pid FROM pg_stat_activity WHERE datname = '${db.name}' AND application_name = 'agent-cell-listen'`,
    );
    const pid = Number(r.rows[0]?.pid);
    assert.ok(pid > 0, 'the LISTEN backend');
    // The backend stops answering: the socket stays open, no error, no end.
    process.kill(pid, 'SIGSTOP');
    const stoppedAt = Date.now();
    try {
      await until('the probe to declare the connection lost', () => heard.some((h) => h.change.gap === 'lost'), 10_000);
      const lostAt = heard.find((h) => h.change.gap === 'lost')!.at;
      // Probe every 1 s, answer due within 2 s: found within about 3 s (bound generous for a loaded machine).
      assert.ok(lostAt - stoppedAt < 6000, `found after ${lostAt - stoppedAt} ms`);
      assert.equal((await store.health()).reason, 'notifications_lost');
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    await until('a new connection', () => heard.some((h) => h.change.gap === 'resumed'), 10_000);
    assert.equal((await store.health()).ok, true);
  });

  it('a write with notify false is heard by its own store only', async () => {
    const db = await database();
    const a = await open(db.url);
    const b = await open(db.url);
    const atA: Change[] = [];
    const atB: Change[] = [];
    a.onChange((c) => atA.push(c));
    b.onChange((c) => atB.push(c));
    await a.write((tx) => tx.run('INSERT INTO t (id) VALUES (1)'), { notify: false });
    assert.deepEqual(
      atA.map((c) => [...c.tables]),
      [['t']],
      'this store hears it',
    );
    await a.write((tx) => tx.run('INSERT INTO t (id) VALUES (2)'));
    await until('b to hear the notified write', () => atB.length > 0, 2000);
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(atB.length, 1, 'b heard only the write that notified');
  });
});
