// A formation's `purpose` and `input_schema` (docs/agent-teams.md): authored and changed like its
// other fields (a new version), checked when authored (400 invalid_input_schema), outside the
// graph (its hash does not move), and the input of every run of its crews is checked against the
// schema before anything is written (400 invalid_input).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { T, crewFixture, ok, team, type Api } from '../../helpers/teams.ts';
import type { InProcess } from '../../helpers/inproc.ts';
import type { FakeOpenAI } from '../../fixtures/openai-server.ts';

let t: InProcess;
let ai: FakeOpenAI;
let api: Api;
before(async () => {
  ({ t, ai, api } = await crewFixture());
  ai.setResponder(() => ({ content: 'done' }));
});
after(async () => {
  await ai.close();
  await t.close();
});

const SCHEMA = { type: 'object', properties: { city: { type: 'string', minLength: 2 } }, required: ['city'], additionalProperties: false };

test('purpose and input_schema are formation fields outside the graph', async () => {
  const tm = await team(api, 'sequential', [{ role: 'w' }]);
  const before_ = await ok(api, 'GET', `${T}/formations/${tm.formation}/graph?crew_id=${tm.crew}`);
  const v = await ok(api, 'PATCH', `${T}/formations/${tm.formation}`, { purpose: 'Plans a trip.', input_schema: SCHEMA });
  assert.equal(v.purpose, 'Plans a trip.');
  assert.deepEqual(v.input_schema, SCHEMA);
  // The crew upgrades to the version; its graph hash is the one it had.
  await ok(api, 'POST', `${T}/crews/${tm.crew}/upgrade`, {});
  const after_ = await ok(api, 'GET', `${T}/formations/${tm.formation}/graph?crew_id=${tm.crew}`);
  assert.equal(after_.graph_hash, before_.graph_hash);

  const runs = async () => (await ok(api, 'GET', `${T}/crews/${tm.crew}/runs`)).total as number;
  const n = await runs();
  const bad = await t.request('POST', `${T}/crews/${tm.crew}/runs`, { token: t.adminKey, body: { input: { city: 'X', extra: 1 } } });
  assert.equal(bad.status, 400);
  assert.equal(bad.body.details.reason, 'invalid_input');
  assert.deepEqual(bad.body.details.problems, ['input.city: shorter than minLength', 'input.extra: not allowed']);
  assert.equal(await runs(), n, 'a refused input writes no run');
  const good = await t.request('POST', `${T}/crews/${tm.crew}/runs`, { token: t.adminKey, body: { input: { city: 'Oslo' } } });
  assert.equal(good.status, 201, good.text);

  // Removing the schema (a new version, and an upgrade) takes any input again.
  await ok(api, 'PATCH', `${T}/formations/${tm.formation}`, { input_schema: null });
  await ok(api, 'POST', `${T}/crews/${tm.crew}/upgrade`, {});
  assert.equal((await t.request('POST', `${T}/crews/${tm.crew}/runs`, { token: t.adminKey, body: { input: 7 } })).status, 201);
});

test('an input_schema outside the subset is refused when authored', async () => {
  const made = await t.request('POST', `${T}/formations`, {
    token: t.adminKey,
    body: { name: 'bad', input_schema: { type: 'object', properties: { a: { pattern: '.*' } } } },
  });
  assert.equal(made.status, 400);
  assert.equal(made.body.details.reason, 'invalid_input_schema');
  assert.equal(made.body.details.path, 'input_schema.properties.a.pattern');
  const f = await ok(api, 'POST', `${T}/formations`, { name: 'good' });
  const patched = await t.request('PATCH', `${T}/formations/${f.formation_id}`, {
    token: t.adminKey,
    body: { input_schema: { type: 'thing' } },
  });
  assert.equal(patched.status, 400);
  assert.equal(patched.body.details.reason, 'invalid_input_schema');
});
