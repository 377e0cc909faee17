/**
 * The PostgreSQL server crashing under the store, on a server of this file's
 * own with fsync on (`startPgServer({ durable: true })`): while it is down
 * the store answers 503 `connection_lost` and its health says so; when it is
 * back, reads, writes and notifications resume without reopening the store;
 * `pg_ctl restart -m immediate` during 30 concurrent writers loses no
 * acknowledged write.
 */
import { strict as assert } from 'node:assert';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { openStore } from '../../../cell/store/open.ts';
import type { Change } from '../../../cell/store/types.ts';
import { pgDatabase, pgUnavailable, startPgServer, type PgServer } from '../../helpers/postgres.ts';
import { startWriter, T_MIGRATIONS } from './_util.ts';

async function until(what: string, ok: () => boolean | Promise<boolean>, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('PostgreSQL store: the server crashes', { skip: pgUnavailable() ?? false }, () => {
  let server: PgServer;
  before(async () => {
    server = await startPgServer({ durable: true });
  });
  after(() => server?.stop());

  it('while the server is down: 503 connection_lost, health says so; once back, everything resumes by itself', {
    timeout: 120_000,
  }, async () => {
    const db = await pgDatabase(server.url);
    const a = await openStore({ engine: 'postgres', url: db.url, poolSize: 3 }, { migrations: T_MIGRATIONS, log: () => undefined });
    const b = await openStore({ engine: 'postgres', url: db.url, poolSize: 3 }, { migrations: T_MIGRATIONS, log: () => undefined });
    try {
      await a.write((tx) => tx.run('INSERT INTO t (id) VALUES (1)'));
      await server.stopImmediate();
      const lost = { code: 'service_unavailable', details: { reason: 'connection_lost' }, retryable: true };
      const shape = (e: unknown) => ({
        code: (e as { code?: unknown }).code,
        details: (e as { details?: unknown }).details,
        retryable: (e as { retryable?: unknown }).retryable,
      });
      assert.deepEqual(shape(await a.write((tx) => tx.run('INSERT INTO t (id) VALUES (2)')).catch((e: unknown) => e)), lost);
      assert.deepEqual(shape(await a.get('SELECT COUNT(*) AS n FROM t').catch((e: unknown) => e)), lost);
      assert.deepEqual(await a.health(), { ok: false, reason: 'connection_lost' });
      await server.startAgain();
      await until('the store to be healthy again', async () => (await a.health()).ok && (await b.health()).ok, 30_000);
      const heard: Change[] = [];
      b.onChange((c) => heard.push(c));
      await a.write((tx) => tx.run('INSERT INTO t (id) VALUES (3)'));
      assert.deepEqual(await b.all('SELECT id FROM t ORDER BY id'), [{ id: 1 }, { id: 3 }]);
      await until("b to hear a's write after the restart", () => heard.some((c) => c.remote && c.tables.has('t')), 2000);
    } finally {
      await a.close();
      await b.close();
      await db.drop();
    }
  });

  it('pg_ctl restart -m immediate during 30 concurrent writers: 503 meanwhile, recovers by itself, 0 acknowledged writes lost', {
    timeout: 180_000,
  }, async () => {
    const db = await pgDatabase(server.url);
    const w = await startWriter(db.url, 'x', 30);
    try {
      await until('first acknowledgements', () => w.acked().length >= 50, 30_000);
      for (let i = 0; i < 3; i++) {
        await server.restartImmediate();
        const base = w.acked().length;
        await until(`writes after restart ${i + 1}`, () => w.acked().length >= base + 50, 30_000).catch((e: Error) => {
          throw new Error(`${e.message}; writer stderr: ${w.stderr().slice(-2000)}`);
        });
      }
    } finally {
      await w.kill();
    }
    const acked = w.acked();
    const refused = w.refused();
    assert.ok(refused.length > 0, 'the writer saw refusals while the server was down');
    const reasons = new Set(refused.map((r) => r.reason));
    for (const r of reasons) assert.ok(r === 'connection_lost' || r === 'commit_unknown', `unexpected refusal: ${r}`);
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    try {
      const present = new Set((await c.query('SELECT id FROM acks')).rows.map((x: { id: string }) => x.id));
      const missing = acked.filter((id) => !present.has(id));
      assert.deepEqual(missing.slice(0, 10), [], `${missing.length} of ${acked.length} acknowledged writes lost`);
      for (const id of acked) {
        if (Number(id.split('-')[2]) % 3 === 0) assert.ok(present.has(`${id}-pair`), `${id}: half a transaction`);
      }
      process.stdout.write(
        `# pg restart test: ${acked.length} acknowledged, ${refused.length} refused (${[...reasons].join(', ')}) over 3 immediate restarts\n`,
      );
    } finally {
      await c.end();
      await db.drop();
    }
  });
});
