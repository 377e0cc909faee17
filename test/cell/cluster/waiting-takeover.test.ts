/**
 * A waiting run's wake-up timer lives in the process of the cell that drove it
 * last. When that cell dies, a peer's takeover sweep drives the run once, so
 * the timer (or an approval's timeout) is acted on by a live cell instead of
 * waiting for the dead one to start again. Two in-process cells on one
 * PostgreSQL store, a manual clock, heartbeats called by the test; skipped on
 * the embedded engine.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startOpenAIServer } from '../../fixtures/openai-server.ts';
import { TEST_ENGINE } from '../../helpers/inproc.ts';
import { until, twoCells } from './_two-cells.ts';
import { ok, provider, team, T, type Api } from '../../helpers/teams.ts';

test('a run waiting on a timer set by a cell that died is woken by a peer', { skip: TEST_ENGINE !== 'postgres' }, async () => {
  const ai = await startOpenAIServer({ apiKey: 'sk-fake', respond: () => ({ content: 'done' }) });
  const { a, b, close } = await twoCells();
  try {
    const api: Api = { request: a.request, token: a.adminKey };
    await provider(api, ai);
    const tm = await team(api, 'sequential', [{ role: 'sleeper' }], { post: [{ kind: 'timer', config: { delay_ms: 60_000 } }] });
    const r = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'wake me' });
    await a.modules.teams.teams.settled(r.run_id);
    const waiting = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${r.run_id}`);
    assert.equal(waiting.state, 'waiting', JSON.stringify(waiting.error));
    assert.equal(waiting.coordinator, 'cell-a');

    // B's sweep leaves a run whose last driver is alive alone.
    await a.modules.cluster.cluster.tick();
    await b.modules.cluster.cluster.tick();
    assert.equal((await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${r.run_id}`)).coordinator, 'cell-a');

    // A stops (its timer with it); the timer falls due; B's next heartbeat sweeps the run up and drives it.
    await a.running.stop(); // the process ends; the database (which A's harness owns) stays for B
    a.clock.advance(61_000);
    await b.modules.cluster.cluster.tick();
    const apiB: Api = { request: b.request, token: a.adminKey };
    const done = await until('the run to complete on cell-b', async () => {
      await b.modules.teams.teams.settled(r.run_id);
      const s = await ok(apiB, 'GET', `${T}/crews/${tm.crew}/runs/${r.run_id}`);
      return s.state === 'completed' ? s : null;
    });
    assert.equal(done.coordinator, 'cell-b', 'woken by the peer');
    const journal = await ok(apiB, 'GET', `/api/public/v1/admin/jobs/runs/${r.run_id}/journal`);
    assert.equal(journal.records.at(-1).kind, 'run_finished', 'the journal ends with run_finished');
  } finally {
    await close();
    await ai.close();
  }
});
