/**
 * The lifecycle of Agent Teams resources and model providers over HTTP:
 * PATCH where a field can change (immutable fields refused by name), DELETE
 * refused with 409 in_use naming the users while something uses the
 * resource, and the authority gates of changing an agent.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { FakeOpenAI } from '../../fixtures/openai-server.ts';
import { actor } from '../../helpers/actors.ts';
import type { InProcess } from '../../helpers/inproc.ts';
import { A, T, type Api, crewFixture, ok, team } from '../../helpers/teams.ts';

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

const req = (method: string, path: string, body?: unknown, token = t.adminKey) =>
  t.request(method, path, { token, ...(body !== undefined ? { body } : {}) });

test('skills, blueprints, agents: changed in place; deleted only when nothing uses them', async () => {
  const skill = await ok(api, 'POST', `${T}/skills`, { name: 'lc-haiku', skill_kind: 'prompt', definition: { prompt: 'haiku' } });
  const sid = skill.skill_id as string;
  // A change is checked for the skill's kind, as at creation; name and kind cannot change.
  const changed = await ok(api, 'PATCH', `${T}/skills/${sid}`, { definition: { prompt: 'limerick' }, model_preference: 'small' });
  assert.equal(changed.definition.prompt, 'limerick');
  assert.equal((await ok(api, 'GET', `${T}/skills/${sid}`)).model_preference, 'small');
  let r = await req('PATCH', `${T}/skills/${sid}`, { name: 'other' });
  assert.equal(r.status, 400);
  assert.equal(r.body.details.reason, 'immutable_field');
  assert.equal(r.body.details.field, 'name');
  const tool = await ok(api, 'POST', `${T}/skills`, { name: 'lc-tool', skill_kind: 'tool', definition: { tool: 'calc' } });
  r = await req('PATCH', `${T}/skills/${tool.skill_id}`, { definition: { tool: 'rm.rf' } });
  assert.equal(r.status, 400, r.text);
  assert.equal((await ok(api, 'GET', `${T}/skills/${tool.skill_id}`)).definition.tool, 'calc', 'a refused change writes nothing');
  assert.equal((await req('PATCH', `${T}/skills/skl_00000000000000000000`, { model_preference: 'x' })).status, 404);

  const bp = await ok(api, 'POST', `${T}/blueprints`, {
    name: 'lc-writer',
    role_label: 'Writer',
    required_skills: ['skill:lc-haiku'],
    authority_template: { allowed_tools: ['calc'], clearance_level: 1 },
  });
  r = await req('DELETE', `${T}/skills/${sid}`);
  assert.equal(r.status, 409, r.text);
  assert.equal(r.body.details.reason, 'in_use');
  assert.deepEqual(r.body.details.used_by.blueprints, [bp.blueprint_id]);
  assert.match(r.body.message, new RegExp(bp.blueprint_id));

  const bp2 = await ok(api, 'PATCH', `${T}/blueprints/${bp.blueprint_id}`, { role_label: 'Poet', required_skills: [] });
  assert.equal(bp2.role_label, 'Poet');
  r = await req('PATCH', `${T}/blueprints/${bp.blueprint_id}`, { required_skills: ['skill:nope'] });
  assert.equal(r.status, 400, r.text);
  const minted = await ok(api, 'POST', `${T}/agents`, { source: 'blueprint', blueprint_id: bp.blueprint_id });
  // The skill is free now; the blueprint is not (an agent was minted from it).
  await ok(api, 'DELETE', `${T}/skills/${sid}`, undefined, [200]);
  assert.equal((await req('GET', `${T}/skills/${sid}`)).status, 404);
  r = await req('DELETE', `${T}/blueprints/${bp.blueprint_id}`);
  assert.equal(r.status, 409);
  assert.deepEqual(r.body.details.used_by, { agents: [minted.agent_id] });

  // An agent bound by a crew cannot be deleted; the refusal names the crew.
  const tm = await team(api, 'sequential', [{ role: 'lc-seat', cap: { allowed_tools: ['calc'] } }]);
  r = await req('DELETE', `${T}/agents/${tm.agents['lc-seat']}`);
  assert.equal(r.status, 409);
  assert.deepEqual(r.body.details.used_by, { crews: [tm.crew] });

  // Deleting an agent soft-deletes its principal; the blueprint stays in use until the principal is purged.
  const gone = await ok(api, 'DELETE', `${T}/agents/${minted.agent_id}`, undefined, [200]);
  assert.equal(gone.agent_id, minted.agent_id);
  assert.equal((await ok(api, 'GET', `${A}/principals/${minted.agent_id}`)).status, 'deleted');
  assert.equal((await req('DELETE', `${T}/blueprints/${bp.blueprint_id}`)).status, 409);
  await ok(api, 'POST', `${A}/principals/${minted.agent_id}/purge`, {}, [200]);
  assert.equal((await req('DELETE', `${T}/agents/${minted.agent_id}`)).status, 404, 'a purged agent is gone');
  await ok(api, 'DELETE', `${T}/blueprints/${bp.blueprint_id}`, undefined, [200]);
  assert.equal((await req('GET', `${T}/blueprints/${bp.blueprint_id}`)).status, 404);
});

test('contracts: rules changed and parsed again; deleted only when no blueprint, agent or formation names it', async () => {
  const k = await ok(api, 'POST', `${T}/contracts`, { name: 'lc-small', rules: [{ name: 'small', expr: 'tool != "calc"' }] });
  const id = k.contract_id as string;
  let r = await req('PATCH', `${T}/contracts/${id}`, { rules: [{ name: 'r', expr: 'tool ==' }] });
  assert.equal(r.status, 400);
  assert.equal(r.body.details.field, 'rules.0.expr');
  const k2 = await ok(api, 'PATCH', `${T}/contracts/${id}`, { name: 'lc-smaller', rules: [{ name: 'none', expr: 'false' }] });
  assert.equal(k2.name, 'lc-smaller');
  assert.equal((await ok(api, 'GET', `${T}/contracts/${id}`)).rules[0].name, 'none');

  const f = await ok(api, 'POST', `${T}/formations`, { name: 'lc-governed' });
  const b = await ok(api, 'POST', `${T}/formations/${f.formation_id}/billets`, {
    role_label: 'g',
    required_skills: [],
    authority_cap: { allowed_tools: ['calc'], governing_contract_id: id },
  });
  const ag = await ok(api, 'POST', `${T}/agents`, {
    source: 'scratch',
    role_label: 'g',
    authority_template: { allowed_tools: ['calc'], governing_contract_id: id },
  });
  r = await req('DELETE', `${T}/contracts/${id}`);
  assert.equal(r.status, 409, r.text);
  assert.equal(r.body.details.reason, 'in_use');
  assert.deepEqual(r.body.details.used_by, { blueprints: [], agents: [ag.agent_id], formations: [f.formation_id] });

  // Removing the billet makes a new version, but the old version still names the contract.
  await ok(api, 'DELETE', `${T}/formations/${f.formation_id}/billets/${b.billet_id}`, undefined, [200]);
  await ok(api, 'PATCH', `${T}/agents/${ag.agent_id}`, { authority_template: { allowed_tools: ['calc'] } });
  r = await req('DELETE', `${T}/contracts/${id}`);
  assert.equal(r.status, 409);
  assert.deepEqual(r.body.details.used_by, { blueprints: [], agents: [], formations: [f.formation_id] });
  await ok(api, 'DELETE', `${T}/formations/${f.formation_id}`, undefined, [200]);
  await ok(api, 'DELETE', `${T}/contracts/${id}`, undefined, [200]);
  assert.equal((await req('GET', `${T}/contracts/${id}`)).status, 404);
});

test("changing an agent: needs agents.write and all of the agent's authority; a new authority within the caller's", async () => {
  const a = await ok(api, 'POST', `${T}/agents`, {
    source: 'scratch',
    role_label: 'lc-agent',
    authority_template: { allowed_tools: ['calc', 'clock.now'], clearance_level: 2 },
  });
  const id = a.agent_id as string;
  // agent_teams.write alone does not manage agent principals.
  const teamster = await actor(t, { permissions: ['agent_teams.read', 'agent_teams.write'] });
  let r = await req('PATCH', `${T}/agents/${id}`, { role_label: 'x' }, teamster.key);
  assert.equal(r.status, 403);
  assert.equal(r.body.details.reason, 'cannot_manage_agent');
  assert.equal((await req('DELETE', `${T}/agents/${id}`, undefined, teamster.key)).status, 403);
  r = await req('PATCH', `${T}/agents/agt_00000000000000000000`, { role_label: 'x' }, teamster.key);
  assert.equal(r.status, 403, 'the permission is judged before the agent is looked up');
  // A manager of agents holding less than the agent cannot touch it, nor grant more than it holds.
  const narrow = await actor(t, {
    permissions: ['agent_teams', 'catalog.read'],
    authority: { allowed_tools: ['calc'], clearance_level: 1 },
  });
  r = await req('PATCH', `${T}/agents/${id}`, { role_label: 'x' }, narrow.key);
  assert.equal(r.status, 403, r.text);
  assert.equal(r.body.details.reason, 'wider_than_caller');
  const mine = await ok({ ...api, token: narrow.key }, 'POST', `${T}/agents`, {
    source: 'scratch',
    role_label: 'mine',
    authority_template: { allowed_tools: ['calc'], clearance_level: 1 },
  });
  r = await req('PATCH', `${T}/agents/${mine.agent_id}`, { authority_template: { allowed_tools: ['calc', 'clock.now'] } }, narrow.key);
  assert.equal(r.status, 403, r.text);
  assert.equal(r.body.details.reason, 'wider_than_caller');
  assert.deepEqual((await ok(api, 'GET', `${A}/principals/${mine.agent_id}`)).authority.allowed_tools, ['calc'], 'nothing written');
  const narrowed = await ok({ ...api, token: narrow.key }, 'PATCH', `${T}/agents/${mine.agent_id}`, {
    authority_template: { allowed_tools: ['calc'], clearance_level: 0 },
    system_prompt: 'be brief',
  });
  assert.equal(narrowed.system_prompt, 'be brief');
  // The new authority is the principal's ceiling.
  assert.equal((await ok(api, 'GET', `${A}/principals/${mine.agent_id}`)).authority.clearance_level, 0);

  r = await req('PATCH', `${T}/agents/${id}`, { source: 'blueprint' });
  assert.equal(r.status, 400);
  assert.equal(r.body.details.reason, 'immutable_field');
  r = await req('PATCH', `${T}/agents/${id}`, { provider_id: 'prv_00000000000000000000' });
  assert.equal(r.status, 400);
  assert.equal(r.body.details.reason, 'unknown_provider');
  r = await req('PATCH', `${T}/agents/${id}`, { authority_template: { allowed_tools: ['rm.rf'] } });
  assert.equal(r.status, 400, r.text);
  assert.equal((await req('PATCH', `${T}/agents/agt_00000000000000000000`, { role_label: 'x' })).status, 404);
  assert.equal((await t.request('PATCH', `${T}/agents/${id}`, { body: { role_label: 'x' } })).status, 401);
});

test('model providers: changed (type immutable); deleted only when no agent names it', async () => {
  const secret = await ok(api, 'POST', `${A}/secrets`, { name: 'lc-key', value: 'sk-fake' });
  const p = await ok(api, 'POST', `${A}/ai/model-providers`, {
    provider_type: 'openai-compatible',
    name: 'lc-provider',
    default_model: 'fake-model',
    base_url: `${ai.url}/v1`,
    api_key_secret_id: secret.secret_id,
  });
  const id = p.provider_id as string;
  const changed = await ok(api, 'PATCH', `${A}/ai/model-providers/${id}`, { default_model: 'other-model', max_retries: 1 });
  assert.equal(changed.default_model, 'other-model');
  let r = await req('PATCH', `${A}/ai/model-providers/${id}`, { provider_type: 'anthropic' });
  assert.equal(r.status, 400);
  assert.equal(r.body.details.reason, 'immutable_field');
  // Pointing the bound secret elsewhere needs the caller's own right to the secret.
  const writer = await actor(t, { permissions: ['ai.providers.write', 'ai.providers.read'] });
  r = await req('PATCH', `${A}/ai/model-providers/${id}`, { base_url: 'http://127.0.0.1:9/v1' }, writer.key);
  assert.equal(r.status, 403, r.text);
  assert.equal((await ok(api, 'GET', `${A}/ai/model-providers/${id}`)).base_url, `${ai.url}/v1`, 'nothing written');

  const ag = await ok(api, 'POST', `${T}/agents`, { source: 'scratch', role_label: 'lc-p', provider_id: id, authority_template: {} });
  r = await req('DELETE', `${A}/ai/model-providers/${id}`);
  assert.equal(r.status, 409, r.text);
  assert.equal(r.body.details.reason, 'in_use');
  assert.deepEqual(r.body.details.used_by, { agents: [ag.agent_id] });
  await ok(api, 'PATCH', `${T}/agents/${ag.agent_id}`, { provider_id: null });
  await ok(api, 'DELETE', `${A}/ai/model-providers/${id}`, undefined, [200]);
  assert.equal((await req('GET', `${A}/ai/model-providers/${id}`)).status, 404);
  assert.equal((await req('DELETE', `${A}/ai/model-providers/${id}`)).status, 404);
});

test('every lifecycle, version, upgrade, run-graph and cancel operation is in the curated document', async () => {
  const doc = (await t.request('GET', '/api/public/v1/openapi.json')).body as { paths: Record<string, Record<string, unknown>> };
  const P = '/api/public/v1/admin/agent-teams';
  const expected: [string, string][] = [
    ['patch', '/api/public/v1/admin/ai/model-providers/{provider_id}'],
    ['delete', '/api/public/v1/admin/ai/model-providers/{provider_id}'],
    ...['skills/{skill_id}', 'blueprints/{blueprint_id}', 'agents/{agent_id}', 'contracts/{contract_id}'].flatMap(
      (p): [string, string][] => [
        ['patch', `${P}/${p}`],
        ['delete', `${P}/${p}`],
      ],
    ),
    ['patch', `${P}/formations/{formation_id}`],
    ['delete', `${P}/formations/{formation_id}`],
    ['get', `${P}/formations/{formation_id}/versions`],
    ['get', `${P}/formations/{formation_id}/versions/{version}`],
    ['patch', `${P}/formations/{formation_id}/billets/{billet_id}`],
    ['delete', `${P}/formations/{formation_id}/billets/{billet_id}`],
    ['patch', `${P}/crews/{crew_id}`],
    ['delete', `${P}/crews/{crew_id}`],
    ['post', `${P}/crews/{crew_id}/upgrade`],
    ['get', `${P}/crews/{crew_id}/runs/{run_id}/graph`],
    ['post', `${P}/crews/{crew_id}/runs/{run_id}/cancel`],
  ];
  const missing = expected.filter(([m, p]) => !doc.paths[p]?.[m]).map(([m, p]) => `${m} ${p}`);
  assert.deepEqual(missing, []);
});
