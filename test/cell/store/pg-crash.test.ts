/**
 * Crash test on the PostgreSQL engine: a child process writes with 30
 * concurrent writers and prints every id the store acknowledged; it is
 * SIGKILLed at a random moment, 20 rounds. After each kill every id
 * acknowledged so far (in any round) must be in the database, with its pair
 * row when the transaction wrote two. (The server's own crashes:
 * pg-restart.test.ts.)
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import { pgDatabase, pgUnavailable } from '../../helpers/postgres.ts';
import { startWriter } from './_util.ts';

const ROUNDS = 20;
/** Acknowledgements a round waits for before its kill. */
const MIN_ACKED = 8;

describe('PostgreSQL store: crash safety of the cell', { skip: pgUnavailable() ?? false }, () => {
  let drop: (() => Promise<void>) | undefined;
  after(() => drop?.());

  it(`every acknowledged write survives SIGKILL of the writing process (30 writers, ${ROUNDS} rounds)`, { timeout: 300_000 }, async () => {
    const db = await pgDatabase();
    drop = db.drop;
    const acked: string[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const w = await startWriter(db.url, `r${r}`, 30);
      // Killed while writing: after its first acknowledgements (a busy machine writes few per 200 ms), at a random moment.
      const deadline = Date.now() + 30_000;
      while (w.acked().length < MIN_ACKED && w.refused().length === 0 && Date.now() < deadline)
        await new Promise((res) => setTimeout(res, 5));
      const ms = Math.floor(Math.random() * 200);
      await new Promise((res) => setTimeout(res, ms));
      await w.kill();
      const got = w.acked();
      acked.push(...got);
      assert.deepEqual(w.refused().slice(0, 3), [], `round ${r}: the writer was refused`);
      const c = new pg.Client({ connectionString: db.url });
      await c.connect();
      try {
        const present = new Set((await c.query('SELECT id FROM acks')).rows.map((x: { id: string }) => x.id));
        const missing = acked.filter((id) => !present.has(id));
        assert.deepEqual(
          missing.slice(0, 10),
          [],
          `round ${r} (killed ${ms} ms after the first acknowledgement): ${missing.length} acknowledged ids missing`,
        );
        for (const id of got) {
          if (Number(id.split('-')[2]) % 3 === 0) assert.ok(present.has(`${id}-pair`), `${id}: half a transaction`);
        }
      } finally {
        await c.end();
      }
    }
    assert.ok(acked.length >= ROUNDS * MIN_ACKED, `the writer acknowledged only ${acked.length} writes in ${ROUNDS} rounds`);
    process.stdout.write(`# pg crash test: ${acked.length} acknowledged writes over ${ROUNDS} kills\n`);
  });
});
