/**
 * A store outage in the middle of a crew run asks no model twice (issue 22's
 * `pg_ctl restart` scenario, made deterministic), PostgreSQL, the real cell
 * process. The test holds a table the next step reads in an exclusive lock and
 * ends the cell's connections that wait on it, so that read meets a lost
 * connection at a known point:
 * - after the next call's reservation (its intent) is committed, before its request leaves (the
 *   secret read; the secret is rotated first, so that the cell's cache of it
 *   is empty and the call must read it): the call waits for the store; it was
 *   never in flight, so it is not re-issued;
 * - while the previous step's answer is held back, unwritten, and written with
 *   the next call's reservation (whose statement reads the budget ledger):
 *   the write is made again in place until the store answers, so the answer
 *   is kept and not asked again, and the next call leaves once it is.
 * Needs `node scripts/build.mjs` first.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startOpenAIServer, type FakeOpenAI } from '../fixtures/openai-server.ts';
import { startGroup, type Group } from '../helpers/group.ts';
import { lockTable, pgUnavailable } from '../helpers/postgres.ts';
import { A, T, ok, provider, roleOf, team, type Api } from '../helpers/teams.ts';
import { crewRunEnded, httpApi, until, verifiedJournal } from './_runs.ts';

const skip = pgUnavailable() ?? false;

describe('a store outage during a crew run', { skip, timeout: 120_000 }, () => {
  let g: Group;
  let ai: FakeOpenAI;
  before(async () => {
    ai = await startOpenAIServer({ apiKey: 'sk-fake' });
    g = await startGroup(1);
  });
  after(async () => {
    await g?.stop();
    await ai?.close();
  });

  /**
   * Runs a two-step crew; while s1's answer is returned, `before` runs, then
   * `table` is locked and every connection of the cell that waits on it is
   * ended until `seen` appears in the cell's output (then the lock is let go).
   * Answers the run as it ended.
   */
  async function runThroughOutage(table: string, seen: RegExp, before?: (api: Api, providerId: string) => Promise<void>) {
    const cell = g.cells[0]!;
    const api = httpApi(cell.url, g.adminKey);
    const providerId = await provider(api, ai);
    const tm = await team(api, 'sequential', [{ role: 's1' }, { role: 's2' }]);
    const asked = ai.requests.length;
    let ended = 0;
    let outage: Promise<void> = Promise.resolve();
    ai.setResponder(async (req) => {
      const role = roleOf(req);
      if (role === 's1' && ended === 0) {
        await before?.(api, providerId);
        const lock = await lockTable(g.db.url, table);
        outage = (async () => {
          try {
            await until(`the cell to log ${seen}`, async () => {
              ended += await lock.endWaiters();
              return seen.test(cell.output()) ? true : undefined;
            });
          } finally {
            await lock.release();
          }
        })();
      }
      return { content: `${role} done` };
    });
    const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'task' });
    const done = await crewRunEnded(api, tm.crew, run.run_id, 90_000);
    await outage;
    // At least once; a write whose statements left with their COMMIT (one round trip) is not tried again
    // by the store on a fresh connection (it asks the server whether it committed) but by the drive.
    assert.ok(ended >= 1, `the cell's waiting connections were ended (${ended})`);
    assert.equal(done.state, 'completed', JSON.stringify(done.error));
    assert.equal(done.output, 's2 done');
    assert.equal(done.flags.reissued, undefined, 'no call flagged re-issued');
    const calls = ai.requests.slice(asked).map((r) => roleOf(r.body));
    assert.deepEqual(calls, ['s1', 's2'], 'each model asked once');
    const { records, verdict } = await verifiedJournal(api, cell.url, run.run_id);
    assert.deepEqual(verdict, { ok: true });
    assert.ok(!records.some((r) => (r.data as { reissued?: unknown } | null)?.reissued === true));
    const steps = records.filter((r) => r.kind === 'step').map((r) => r.step_id);
    assert.equal(new Set(steps).size, steps.length, `no step recorded twice (${steps.join(',')})`);
    return cell;
  }

  test('before a call leaves (its secret read): the call waits for the store and is not re-issued', async () => {
    // The secret rotated (to the same value): the cell's cache of it is emptied, so s2's call reads it.
    const rotate = async (api: Api, providerId: string) => {
      const p = await ok(api, 'GET', `${A}/ai/model-providers/${providerId}`);
      await ok(api, 'POST', `${A}/secrets/${p.api_key_secret_id}/rotate`, { value: 'sk-fake' });
    };
    const cell = await runThroughOutage('ai_secrets', /a call of a run waits for the store before it leaves/, rotate);
    assert.doesNotMatch(cell.output(), /store unreachable during a run/);
  });

  test('while an answer is held back (written with the next reservation, which reads the ledger): it is kept', async () => {
    const cell = await runThroughOutage('team_ledgers', /a run write was refused for now; writing it again/);
    assert.match(cell.output(), /a run write was refused for now; writing it again/);
  });
});
