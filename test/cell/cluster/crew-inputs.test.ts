/**
 * A run's start reads its crew, formation version and billets through a cache that follows the store
 * (TeamsContext.crewInputs): with two in-process cells on one PostgreSQL store, a crew upgraded on one
 * cell is what the next run starts from, on that cell at once and on the other once it hears the
 * change; a crew deleted on one cell is refused by the other's next start at once (its creating
 * transaction reads the crew again). Skipped on the embedded engine (one cell per store).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startOpenAIServer } from '../../fixtures/openai-server.ts';
import { TEST_ENGINE } from '../../helpers/inproc.ts';
import { twoCells, until } from './_two-cells.ts';
import { agent, ok, provider, team, T, type Api } from '../../helpers/teams.ts';

test('a crew changed on one cell is what the next run on either cell starts from; a deleted one is refused at once', {
  skip: TEST_ENGINE !== 'postgres',
  timeout: 120_000,
}, async () => {
  const ai = await startOpenAIServer({ apiKey: 'sk-fake', respond: () => ({ content: 'ok' }) });
  const { a, b, close } = await twoCells();
  try {
    const api: Api = { request: a.request, token: a.adminKey };
    const apiB: Api = { request: b.request, token: a.adminKey };
    await provider(api, ai);
    const tm = await team(api, 'sequential', [{ role: 'k1' }]);
    const crew = await ok(api, 'GET', `${T}/crews/${tm.crew}`);
    // Both cells start a run: each has the crew's inputs cached now.
    const r1 = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'go' });
    const r2 = await ok(apiB, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'go' });
    assert.equal(r1.formation_version, crew.formation_version);
    assert.equal(r2.formation_version, crew.formation_version);
    await a.modules.teams.teams.settled(r1.run_id);
    await b.modules.teams.teams.settled(r2.run_id);

    // A new formation version with a second billet, and the crew upgraded to it, on cell A.
    const b2 = await ok(api, 'POST', `${T}/formations/${tm.formation}/billets`, {
      role_label: 'k2',
      required_skills: [],
      authority_cap: { allowed_tools: [], clearance_level: 0 },
    });
    const k2 = await agent(api, 'k2', { allowed_tools: [], clearance_level: 0 });
    const up = await ok(api, 'POST', `${T}/crews/${tm.crew}/upgrade`, { assignments: { [b2.billet_id]: k2 } }, [200]);
    assert.equal(up.formation_version, crew.formation_version + 1);

    // Cell A starts from the upgrade at once.
    const r3 = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'go' });
    assert.equal(r3.formation_version, up.formation_version);
    assert.equal(r3.graph_hash, up.graph_hash);
    await a.modules.teams.teams.settled(r3.run_id);
    // Cell B once it has heard the change (a notification, well under a second): never the old graph after.
    const r4 = await until('cell B to start from the upgrade', async () => {
      const r = await ok(apiB, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'go' });
      await b.modules.teams.teams.settled(r.run_id);
      return r.formation_version === up.formation_version ? r : undefined;
    });
    assert.equal(r4.graph_hash, up.graph_hash);
    const r5 = await ok(apiB, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'go' });
    assert.equal(r5.formation_version, up.formation_version);
    await b.modules.teams.teams.settled(r5.run_id);

    // Deleted on cell A: cell B's next start is refused at once, whatever it still holds.
    await ok(api, 'DELETE', `${T}/crews/${tm.crew}`, undefined, [200, 204]);
    const gone = await apiB.request('POST', `${T}/crews/${tm.crew}/runs`, { token: a.adminKey, body: { input: 'go' } });
    assert.equal(gone.status, 404, gone.text);
    assert.equal(gone.body.error, 'not_found');
  } finally {
    await close();
    await ai.close();
  }
});
