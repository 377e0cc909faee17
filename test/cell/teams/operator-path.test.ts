/**
 * The built-in `operator` role completes the agent-teams path on its own key,
 * in process against a real HTTP server speaking Chat Completions: secret →
 * provider → skill → blueprint → agents → formation + billets → crew → run,
 * to a completed run. And what it cannot do on the way: create principals
 * other than agents, or mint an agent beyond its own ceiling.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startOpenAIServer, type FakeOpenAI } from '../../fixtures/openai-server.ts';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { A, T, ok, provider, roleOf, team, type Api } from '../../helpers/teams.ts';

let t: InProcess;
let ai: FakeOpenAI;
let op: Api;

const CEILING = {
  allowed_tools: ['calc', 'clock.now', 'kv.get', 'kv.put', 'http.get'],
  permission_mode: 'auto',
  clearance_level: 0,
  egress_allowlist: ['kv:*'],
  data_grant_ids: ['kv:*'],
};

before(async () => {
  t = await inProcessCell();
  ai = await startOpenAIServer({ apiKey: 'sk-operator' });
  const owner: Api = { request: t.request, token: t.adminKey };
  const p = await ok(owner, 'POST', `${A}/principals`, { kind: 'service', name: 'ops', roles: ['operator'], authority: CEILING });
  const key = await ok(owner, 'POST', `${A}/api-keys`, { name: 'ops', owner_id: p.id });
  op = { request: t.request, token: key.secret };
});
after(async () => {
  await t?.close();
  await ai?.close();
});

test('operator: secret, provider, skill, blueprint, agents, formation, crew and a completed run, all with its own key', async () => {
  await provider(op, ai, 'sk-operator');
  await ok(op, 'POST', `${T}/skills`, { name: 'ops-haiku', skill_kind: 'prompt', definition: { prompt: 'haiku' } });
  const bp = await ok(op, 'POST', `${T}/blueprints`, {
    name: 'ops-bp',
    role_label: 'helper',
    authority_template: { allowed_tools: ['calc'] },
  });
  const fromBlueprint = await ok(op, 'POST', `${T}/agents`, { source: 'blueprint', blueprint_id: bp.blueprint_id });
  assert.match(fromBlueprint.agent_id, /^agt_/);
  ai.setResponder((req) => ({ content: `${roleOf(req)} done` }));
  const tm = await team(op, 'sequential', [{ role: 'writer' }, { role: 'editor' }]);
  const run = await ok(op, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'go' });
  await t.modules.teams.teams.settled(run.run_id);
  const s = await ok(op, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`);
  assert.equal(s.state, 'completed', JSON.stringify(s.error));
  assert.equal(s.output, 'editor done');
  assert.equal(ai.requests.at(-1)!.authorization, 'Bearer sk-operator');
});

test('operator: no principal but agents, and no agent beyond its own ceiling', async () => {
  const svc = await op.request('POST', `${A}/principals`, { token: op.token, body: { kind: 'service', name: 'not-an-agent' } });
  assert.equal(svc.status, 403, svc.text);
  const wide = await op.request('POST', `${T}/agents`, {
    token: op.token,
    body: { source: 'scratch', role_label: 'wide', authority_template: { allowed_tools: ['calc'], clearance_level: 3 } },
  });
  assert.equal(wide.status, 403, wide.text);
  assert.equal(wide.body.details.reason, 'wider_than_caller');
});
