/**
 * A conflict is never an outage (issue 21), PostgreSQL, the real cell
 * process: while a crew run drives, a competing transaction holds the run's
 * row, and the database answers the step record's writes with serialization
 * failures (SQLSTATE 40001, injected by a trigger) more times than the store
 * retries one write. The run completes without a re-drive: one claim (every
 * record of epoch 1), no takeover, no call asked twice, the journal verifies;
 * the store counted its retries. Needs `node scripts/build.mjs` first.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { startOpenAIServer, type FakeOpenAI } from '../fixtures/openai-server.ts';
import { startGroup, type Group } from '../helpers/group.ts';
import { adminQuery, pgUnavailable } from '../helpers/postgres.ts';
import { T, ok, provider, roleOf, team } from '../helpers/teams.ts';
import { crewRunEnded, httpApi, metric, metricsUrl, until, verifiedJournal } from './_runs.ts';

const skip = pgUnavailable() ?? false;
/** More than the store's own attempts at one write (30): one failure reaches the driver, which writes again. */
const INJECTED = 35;

describe('serialization failures and a held row during a run', { skip, timeout: 90_000 }, () => {
  let g: Group;
  let ai: FakeOpenAI;
  before(async () => {
    ai = await startOpenAIServer({ apiKey: 'sk-fake' });
    g = await startGroup(1, { args: () => ['--metrics-port', '0'] });
  });
  after(async () => {
    await g?.stop();
    await ai?.close();
  });

  test('the run completes without a re-drive: one epoch, no takeover, no call twice', async () => {
    const cell = g.cells[0]!;
    const api = httpApi(cell.url, g.adminKey);
    await provider(api, ai);
    const tm = await team(api, 'sequential', [{ role: 's1' }, { role: 's2' }]);
    // The step records' transactions fail with 40001 INJECTED times (a sequence counts outside the rollback).
    await adminQuery(
      g.db.url,
      `CREATE SEQUENCE injected_conflicts;
       CREATE FUNCTION inject_conflict() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         IF NEW.kind = 'step' AND nextval('injected_conflicts') <= ${INJECTED} THEN
           RAISE EXCEPTION 'injected serialization failure' USING ERRCODE = '40001';
         END IF;
         RETURN NEW;
       END $$;
       CREATE TRIGGER inject_conflict BEFORE INSERT ON journal FOR EACH ROW EXECUTE FUNCTION inject_conflict();`,
    );
    const holder = new pg.Client({ connectionString: g.db.url });
    await holder.connect();
    let held: Promise<unknown> = Promise.resolve();
    let runId = '';
    let heldRuns = 0;
    ai.setResponder(async (req) => {
      const role = roleOf(req);
      if (role === 's1') {
        await until('the run id', async () => (runId.startsWith('run_') ? true : undefined));
        heldRuns++;
        // While s1's answer is on its way, a competing transaction holds the run's row for a second.
        const id = runId;
        held = (async () => {
          await holder.query('BEGIN');
          await holder.query('SELECT run_id FROM runs WHERE run_id = $1 FOR UPDATE', [id]);
          await new Promise((r) => setTimeout(r, 1000));
          await holder.query('COMMIT');
        })();
        await new Promise((r) => setTimeout(r, 100));
      }
      return { content: `${role} done` };
    });
    const retriesBefore = await metric(metricsUrl(cell), 'cell_store_write_retries_total');
    const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'task' });
    runId = run.run_id;
    const done = await crewRunEnded(api, tm.crew, run.run_id, 60_000);
    await held;
    await holder.end();
    assert.equal(heldRuns, 1, 'the competing transaction held the row while the run drove');
    assert.equal(done.state, 'completed', JSON.stringify(done.error));
    assert.equal(done.output, 's2 done');
    assert.equal(done.flags.reissued, undefined);
    for (const role of ['s1', 's2']) assert.equal(ai.requests.filter((r) => roleOf(r.body) === role).length, 1, `${role} asked once`);
    const used = Number((await adminQuery(g.db.url, 'SELECT last_value AS n FROM injected_conflicts')).rows[0].n);
    assert.ok(used >= INJECTED, `the failures were injected (${used})`);
    const { records, verdict } = await verifiedJournal(api, cell.url, run.run_id);
    assert.deepEqual(verdict, { ok: true });
    assert.ok(!records.some((r) => r.kind === 'taken_over'));
    assert.deepEqual(
      [...new Set(records.filter((r) => r.kind !== 'run_requested').map((r) => (r as { epoch?: number }).epoch))],
      [1],
      'one claim, one epoch',
    );
    const url = metricsUrl(cell);
    assert.ok((await metric(url, 'cell_store_write_retries_total', { sqlstate: '40001' })) - retriesBefore >= INJECTED - 1);
    assert.equal(await metric(url, 'cell_run_takeovers_total'), 0);
    assert.match(cell.output(), /a run write was refused for now; writing it again/);
    assert.doesNotMatch(cell.output(), /store unreachable during a run/);
  });
});
