/**
 * The real cell process (dist/cell.mjs) on PostgreSQL, on a server of this
 * file's own with fsync on:
 * - SIGKILL of the cell during 30 concurrent HTTP writers, 20 rounds: every
 *   write answered 201 is there after the cell comes back;
 * - the server crashes (`pg_ctl stop -m immediate`) during writes: the cell
 *   answers 503 `service_unavailable` with `retryable: true` meanwhile, and
 *   once the server is back it serves again by itself, with no acknowledged
 *   write lost.
 * Needs `node scripts/build.mjs` first (make test builds).
 */
import { strict as assert } from 'node:assert';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { startCellProcess, type CellProcess } from '../../helpers/cell-process.ts';
import { adminQuery, pgDatabase, pgUnavailable, startPgServer, type PgServer } from '../../helpers/postgres.ts';

const KEYS = '/api/public/v1/admin/api-keys';
const ROUNDS = 20;
const WRITERS = 30;

async function post(url: string, token: string, name: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const r = await request(url + KEYS, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name }),
  });
  return { status: r.statusCode, body: (await r.body.json()) as Record<string, unknown> };
}

/** 30 writers minting keys until stopped; collects the ids answered 201 and every other answer. */
function writers(cell: CellProcess, tag: string) {
  const acked: string[] = [];
  const refused: { status: number; body: Record<string, unknown> }[] = [];
  let stop = false;
  const done = Promise.all(
    Array.from({ length: WRITERS }, async (_, w) => {
      for (let n = 0; !stop; n++) {
        try {
          const r = await post(cell.url, cell.adminKey, `${tag}-${w}-${n}`);
          if (r.status === 201) acked.push(String(r.body.key_id));
          else refused.push(r);
        } catch {
          return; // the connection died with the process: that answer was never given
        }
      }
    }),
  );
  return {
    acked,
    refused,
    stop: async () => {
      stop = true;
      await done;
    },
  };
}

async function until(what: string, ok: () => boolean | Promise<boolean>, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('the cell on PostgreSQL: crashes of the cell and of the server', { skip: pgUnavailable() ?? false }, () => {
  let server: PgServer;
  before(async () => {
    server = await startPgServer({ durable: true });
  });
  after(() => server?.stop());

  it(`SIGKILL of the cell during ${WRITERS} concurrent writers, ${ROUNDS} rounds: no acknowledged write lost`, {
    timeout: 600_000,
  }, async () => {
    const db = await pgDatabase(server.url);
    let cell = await startCellProcess({ args: ['--store', db.url] });
    const dataDir = cell.dataDir;
    const acked: string[] = [];
    try {
      for (let r = 0; r < ROUNDS; r++) {
        const load = writers(cell, `r${r}`);
        await until(`round ${r}'s first acknowledgement`, () => load.acked.length > 0 || load.refused.length > 0, 30_000);
        await new Promise((res) => setTimeout(res, Math.floor(Math.random() * 200)));
        await cell.kill('SIGKILL');
        await load.stop();
        assert.deepEqual(load.refused.slice(0, 3), [], `round ${r}: a writer was refused before the kill`);
        acked.push(...load.acked);
        const rows = await adminQuery(db.url, 'SELECT id FROM api_keys');
        const present = new Set(rows.rows.map((x: { id: string }) => x.id));
        const missing = acked.filter((id) => !present.has(id));
        assert.deepEqual(missing, [], `round ${r}: ${missing.length} of ${acked.length} acknowledged keys lost`);
        cell = await startCellProcess({ dataDir, args: ['--store', db.url] });
      }
      // Every round waited for its first acknowledgement before the kill: each round was killed mid-load.
      assert.ok(acked.length >= ROUNDS, `only ${acked.length} writes acknowledged in ${ROUNDS} rounds`);
      // The restarted cell serves them, too.
      const sample = acked.filter((_, i) => i % Math.ceil(acked.length / 20) === 0);
      for (const id of sample) {
        const r = await request(`${cell.url}${KEYS}/${id}`, { headers: { authorization: `Bearer ${cell.adminKey}` } });
        assert.equal(r.statusCode, 200, `key ${id}`);
        await r.body.dump();
      }
    } finally {
      await cell.kill('SIGKILL');
      cell.cleanup();
      await db.drop();
    }
  });

  it('the server crashes during writes: 503 retryable meanwhile, the cell recovers by itself, nothing acknowledged lost', {
    timeout: 300_000,
  }, async () => {
    const db = await pgDatabase(server.url);
    // A gateway rate gate no writer reaches: 30 writers retry at once on every 503, and a slow restart of the
    // server must not turn the outage into 429s (the rate gate has tests of its own).
    const cell = await startCellProcess({
      args: ['--store', db.url, '--store-pool', '4', '--rate-capacity', '1000000', '--rate-refill', '100000'],
    });
    let serverDown = false;
    try {
      const load = writers(cell, 'before');
      await until('some acknowledged writes', () => load.acked.length >= 30, 30_000);
      await server.stopImmediate();
      serverDown = true;
      // Down: the cell is up and says so in the envelope, never a 500.
      const down = await post(cell.url, cell.adminKey, 'while-down').catch((e: unknown) => {
        throw new Error(`the cell did not answer while the server was down (${String(e)}):\n${cell.output().slice(-2000)}`);
      });
      assert.equal(down.status, 503, JSON.stringify(down.body));
      assert.equal(down.body.error, 'service_unavailable');
      assert.equal(down.body.retryable, true);
      assert.doesNotMatch(String(down.body.message), /ECONNREFUSED|postgres|pg_|socket/i, 'no internal text');
      await server.startAgain();
      serverDown = false;
      // Back: the writers' next requests succeed without restarting the cell.
      const before = load.acked.length;
      await until('writes acknowledged again', () => load.acked.length > before + 30, 60_000);
      await load.stop();
      const other = load.refused.filter((r) => r.status !== 503);
      assert.deepEqual(other.slice(0, 3), [], 'only 503 refusals while the server was down');
      // A commit cut off by the crash has an unknown outcome: a blind retry could apply it twice, so that
      // one refusal says retryable: false (details.reason commit_unknown); every other says retry.
      for (const r of load.refused) {
        const reason = (r.body.details as { reason?: string } | undefined)?.reason;
        assert.equal(r.body.retryable, reason !== 'commit_unknown', JSON.stringify(r.body));
      }
      const rows = await adminQuery(db.url, 'SELECT id FROM api_keys');
      const present = new Set(rows.rows.map((x: { id: string }) => x.id));
      const missing = load.acked.filter((id) => !present.has(id));
      assert.deepEqual(missing, [], `${missing.length} of ${load.acked.length} acknowledged keys lost`);
    } finally {
      await cell.kill('SIGKILL');
      if (serverDown) await server.startAgain();
      cell.cleanup();
      await db.drop();
    }
  });
});
