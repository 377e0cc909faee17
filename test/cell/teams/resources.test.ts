import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';

const A = '/api/public/v1/admin';
const T = `${A}/agent-teams`;
let t: InProcess;
before(async () => {
  t = await inProcessCell({ config: { agentQuota: 3 } });
});
after(async () => {
  await t.close();
});

const post = (path: string, body: unknown, token = t.adminKey) => t.request('POST', path, { token, body });
const get = (path: string, token = t.adminKey) => t.request('GET', path, { token });

test('skills of all eight kinds, definitions checked per kind', async () => {
  const defs: Record<string, unknown> = {
    prompt: { prompt: 'You write haiku.' },
    tool: { tool: 'calc' },
    chain: { steps: [{ skill_kind: 'prompt' }, { skill_kind: 'transformer', definition: { expr: 'input' } }] },
    model: {},
    evaluator: { prompt: 'grade it' },
    transformer: { expr: 'input.x + 1' },
    classifier: { labels: ['yes', 'no'] },
    extractor: { prompt: 'extract names' },
  };
  for (const [kind, definition] of Object.entries(defs)) {
    const r = await post(`${T}/skills`, { name: `s-${kind}`, skill_kind: kind, definition });
    assert.equal(r.status, 201, `${kind}: ${r.text}`);
  }
  const bad = [
    { name: 'b1', skill_kind: 'tool', definition: { tool: 'rm.rf' } },
    { name: 'b2', skill_kind: 'transformer', definition: { expr: 'input +' } },
    { name: 'b3', skill_kind: 'classifier', definition: { labels: ['one'] } },
    { name: 'b4', skill_kind: 'wizard' },
  ];
  for (const b of bad) {
    const r = await post(`${T}/skills`, b);
    assert.equal(r.status, 400, JSON.stringify(b));
  }
  const dup = await post(`${T}/skills`, { name: 's-model', skill_kind: 'model' });
  assert.equal(dup.status, 409);
  const list = await get(`${T}/skills`);
  assert.equal(list.body.skills.length, 8);
  const one = await get(`${T}/skills/${list.body.skills[0].skill_id}`);
  assert.equal(one.status, 200);
});

test('blueprints resolve skill:<name> references at authoring', async () => {
  const ok = await post(`${T}/blueprints`, {
    name: 'writer',
    role_label: 'Writer',
    system_prompt_ref: 'skill:s-prompt',
    required_skills: ['skill:s-prompt', 'skill:s-tool'],
    authority_template: { allowed_tools: ['calc'], clearance_level: 1 },
    scope: 'workspace',
  });
  assert.equal(ok.status, 201, ok.text);
  const unknown = await post(`${T}/blueprints`, { name: 'x', role_label: 'X', required_skills: ['skill:nope', 'skill:s-tool'] });
  assert.equal(unknown.status, 400);
  assert.equal(unknown.body.details.reason, 'unknown_skill');
  assert.deepEqual(unknown.body.details.refs, ['skill:nope']);
  const malformed = await post(`${T}/blueprints`, { name: 'x', role_label: 'X', required_skills: ['s-tool'] });
  assert.equal(malformed.body.details.reason, 'invalid_skill_ref');
  const badTool = await post(`${T}/blueprints`, { name: 'x', role_label: 'X', authority_template: { allowed_tools: ['shell'] } });
  assert.equal(badTool.body.details.reason, 'unknown_tool');
  const badContract = await post(`${T}/blueprints`, {
    name: 'x',
    role_label: 'X',
    authority_template: { governing_contract_id: 'ctr_00000000000000000000' },
  });
  assert.equal(badContract.body.details.reason, 'unknown_contract');
  const got = await get(`${T}/blueprints/${ok.body.blueprint_id}`);
  assert.deepEqual(got.body.authority_template, { allowed_tools: ['calc'], clearance_level: 1 });
});

test('minting an agent creates a principal; quota and caller authority gate it, with audit records', async () => {
  const bps = await get(`${T}/blueprints`);
  const bp = bps.body.blueprints[0].blueprint_id;
  const a = await post(`${T}/agents`, { source: 'blueprint', blueprint_id: bp });
  assert.equal(a.status, 201, a.text);
  assert.match(a.body.agent_id, /^agt_/);
  assert.equal(a.body.system_prompt, 'You write haiku.');
  assert.deepEqual(a.body.authority, { allowed_tools: ['calc'], clearance_level: 1 });
  const principal = await get(`${A}/principals/${a.body.agent_id}`);
  assert.equal(principal.status, 200, principal.text);
  assert.equal(principal.body.kind, 'agent');
  const agentKey = await post(`${A}/api-keys`, { owner_id: a.body.agent_id, name: 'agent-key' });
  assert.equal(agentKey.status, 201, agentKey.text);
  const asAgent = await get(`${A}/ai/tool-registry`, agentKey.body.secret);
  assert.equal(asAgent.status, 200, 'an agent principal owns a working key (role agent: catalog.read)');
  assert.equal((await get(`${T}/agents`, agentKey.body.secret)).status, 403);

  // A caller with agent_teams.write but neither agent_teams.agents.write nor iam.principals.write.
  const role = await post(`${A}/roles`, { name: 'teamster', permissions: ['agent_teams.read', 'agent_teams.write', 'catalog'] });
  assert.equal(role.status, 201, role.text);
  const user = await post(`${A}/principals`, { kind: 'service', name: 'teamster-svc', roles: ['teamster'] });
  assert.equal(user.status, 201, user.text);
  const key = await post(`${A}/api-keys`, { owner_id: user.body.id, name: 'k' });
  assert.equal(key.status, 201, key.text);
  const refused = await post(`${T}/agents`, { source: 'blueprint', blueprint_id: bp }, key.body.secret);
  assert.equal(refused.status, 403);
  assert.equal(refused.body.details.reason, 'cannot_create_principal');
  assert.equal(refused.body.details.required_permission, 'agent_teams.agents.write');

  // The built-in operator role completes the agent-teams path: it mints agents (agent_teams.agents.write,
  // through agent_teams) without the right to create other principals.
  const op = await post(`${A}/principals`, {
    kind: 'service',
    name: 'op-svc',
    roles: ['operator'],
    authority: { allowed_tools: ['calc'], clearance_level: 1 },
  });
  assert.equal(op.status, 201, op.text);
  const opKey = (await post(`${A}/api-keys`, { owner_id: op.body.id, name: 'op' })).body.secret;
  const byOp = await post(`${T}/agents`, { source: 'blueprint', blueprint_id: bp }, opKey);
  assert.equal(byOp.status, 201, byOp.text);
  assert.equal((await post(`${A}/principals`, { kind: 'service', name: 'op-made' }, opKey)).status, 403, 'but no other principal');
  await post(`${T}/agents/${byOp.body.agent_id}/budget-ledger`, { budget_limit: 10 }, opKey);
  assert.equal(
    (await t.request('DELETE', `${T}/agents/${byOp.body.agent_id}`, { token: opKey })).status,
    200,
    'and deletes the agent it minted',
  );

  const b2 = await post(`${T}/agents`, { source: 'scratch', role_label: 'Critic', authority_template: { allowed_tools: ['clock.now'] } });
  assert.equal(b2.status, 201, b2.text);
  const b3 = await post(`${T}/agents`, { source: 'scratch', role_label: 'Critic' });
  assert.equal(b3.status, 201);
  const over = await post(`${T}/agents`, { source: 'scratch', role_label: 'One too many' });
  assert.equal(over.status, 409);
  assert.equal(over.body.details.reason, 'agent_quota_reached');
  assert.equal(over.body.details.quota, 3);

  const audit = await get(`${A}/audit?limit=50`);
  const entries = JSON.stringify(audit.body);
  assert.match(entries, /cannot_create_principal/);
  assert.match(entries, /agent_quota_reached/);
});

test('budget ledgers: register, read, 404 for unknown agent', async () => {
  const agents = await get(`${T}/agents`);
  // Agents of the earlier tests share one creation time: the list's order among them is their random ids.
  const id = agents.body.agents.find((a: { has_budget_ledger: boolean }) => !a.has_budget_ledger).agent_id;
  assert.equal((await get(`${T}/agents/${id}/budget-ledger`)).status, 404);
  const l = await post(`${T}/agents/${id}/budget-ledger`, { budget_limit: 1000 });
  assert.equal(l.status, 200, l.text);
  assert.equal(l.body.available, 1000);
  assert.equal((await get(`${T}/agents/${id}`)).body.has_budget_ledger, true);
  assert.equal((await post(`${T}/agents/agt_00000000000000000000/budget-ledger`, { budget_limit: 1 })).status, 404);
});

test('contracts: CEL rules parsed at authoring', async () => {
  const ok = await post(`${T}/contracts`, {
    name: 'no-big-sums',
    rules: [{ name: 'small', expr: 'tool != "calc" || size(args.expression) < 20' }],
  });
  assert.equal(ok.status, 201, ok.text);
  const bad = await post(`${T}/contracts`, { name: 'bad', rules: [{ name: 'r', expr: 'tool ==' }] });
  assert.equal(bad.status, 400);
  assert.equal(bad.body.details.field, 'rules.0.expr');
  const undeclared = await post(`${T}/contracts`, { name: 'bad', rules: [{ name: 'r', expr: 'secret == 1' }] });
  assert.equal(undeclared.status, 400);
  assert.equal((await get(`${T}/contracts/${ok.body.contract_id}`)).body.rules[0].name, 'small');
  assert.equal((await get(`${T}/contracts`)).body.contracts.length, 1);
});
