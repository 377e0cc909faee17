// Security round 3, finding 9: a key holding only system.orchestration.admin.read
// read an owner's crew run through /admin/jobs/runs/{id} (200) but got 403 from
// the crew route. docs/security.md says that permission reads every
// orchestration run, crew runs included: both routes now give the same answer,
// for the run, the crew's run list and the operators' run list. A key with
// neither permission gets 403 from both; the formation's graph stays behind
// agent_teams.read.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { InProcess } from '../../helpers/inproc.ts';
import type { FakeOpenAI } from '../../fixtures/openai-server.ts';
import { actor } from '../../helpers/actors.ts';
import { crewFixture, ok, team, T, type Api } from '../../helpers/teams.ts';

const A = '/api/public/v1/admin';
let t: InProcess;
let ai: FakeOpenAI;
let api: Api;
before(async () => {
  ({ t, ai, api } = await crewFixture());
});
after(async () => {
  await t.close();
  await ai.close();
});

async function finishedRun(): Promise<{ crew: string; run: string }> {
  const tm = await team(api, 'sequential', [{ role: 'a' }]);
  const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'go' });
  for (let i = 0; i < 400; i++) {
    const r = await t.request('GET', `${A}/jobs/runs/${run.run_id}`, { token: t.adminKey });
    if (['completed', 'failed', 'cancelled'].includes(r.body.state)) return { crew: tm.crew, run: run.run_id };
    await new Promise((res) => setTimeout(res, 10));
  }
  throw new Error('the run did not finish');
}

test("a jobs-only key reads the owner's crew run through the jobs route and the crew route alike", async () => {
  const { crew, run } = await finishedRun();
  const jobsOnly = await actor(t, { name: 'jobs-only', kind: 'service', permissions: ['system.orchestration.admin.read'] });
  const viaJobs = await t.request('GET', `${A}/jobs/runs/${run}`, { token: jobsOnly.key });
  const viaCrew = await t.request('GET', `${T}/crews/${crew}/runs/${run}`, { token: jobsOnly.key });
  assert.equal(viaJobs.status, 200, viaJobs.text);
  assert.equal(viaCrew.status, 200, viaCrew.text);
  for (const f of ['run_id', 'state', 'requester', 'graph_hash', 'crew_id', 'workspace_id', 'output']) {
    assert.deepEqual(viaCrew.body[f], viaJobs.body[f], f);
  }
  // The lists agree too: the run is in the crew's list and in the operators' list.
  const crewList = await t.request('GET', `${T}/crews/${crew}/runs`, { token: jobsOnly.key });
  assert.equal(crewList.status, 200, crewList.text);
  assert.ok(crewList.body.runs.some((r: { run_id: string }) => r.run_id === run));
  const all = await t.request('GET', `${T}/runs?limit=1000`, { token: jobsOnly.key });
  assert.equal(all.status, 200, all.text);
  assert.ok(all.body.runs.some((r: { run_id: string }) => r.run_id === run));
  // Reads only: it still cannot start, cancel or decide, nor read the formation's graph.
  assert.equal((await t.request('POST', `${T}/crews/${crew}/runs`, { token: jobsOnly.key, body: { input: 'x' } })).status, 403);
  assert.equal((await t.request('POST', `${T}/crews/${crew}/runs/${run}/cancel`, { token: jobsOnly.key })).status, 403);
  const graph = await t.request('GET', `${T}/crews/${crew}/runs/${run}/graph`, { token: jobsOnly.key });
  assert.equal(graph.status, 403);
  assert.equal(graph.body.details.required_permission, 'agent_teams.read');
});

test('a key with neither permission gets the same 403 from both routes; the document names both permissions', async () => {
  const { crew, run } = await finishedRun();
  const other = await actor(t, { name: 'other', kind: 'service', permissions: ['catalog.read'] });
  const viaJobs = await t.request('GET', `${A}/jobs/runs/${run}`, { token: other.key });
  const viaCrew = await t.request('GET', `${T}/crews/${crew}/runs/${run}`, { token: other.key });
  assert.equal(viaJobs.status, 403);
  assert.equal(viaCrew.status, 403);
  assert.equal(viaCrew.body.error, 'forbidden');
  assert.equal(viaCrew.body.details.required_permission, 'agent_teams.read');
  const doc = (await t.request('GET', '/api/public/v1/openapi.json')).body;
  for (const path of [`${T}/crews/{crew_id}/runs/{run_id}`, `${T}/crews/{crew_id}/runs`, `${T}/runs`]) {
    const op = doc.paths[path].get;
    assert.equal(op['x-required-permission'], 'agent_teams.read', path);
    assert.deepEqual(op['x-also-permitted'], ['system.orchestration.admin.read'], path);
  }
});
