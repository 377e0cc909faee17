// The High findings 1–5 of the third security review (issue 20), each performed as described
// against the real app and store: refused, nothing changed, and the refusal on the audit trail.
// The rules: acting on a credential needs the right to mint it; changing a shared thing needs
// authority over everything it reaches; what a capped credential makes stays capped and dies with it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { actor } from '../../helpers/actors.ts';
import { basic, form } from '../../helpers/oauth.ts';

const A = '/api/public/v1/admin';
const T = `${A}/agent-teams`;

function refusals(t: InProcess, action: string) {
  return t.rows("SELECT actor, target, details FROM audit WHERE action = ? AND outcome = 'refused'", [action]);
}

async function must(t: InProcess, method: string, path: string, body?: unknown, token = t.adminKey): Promise<any> {
  const r = await t.request(method, path, { token, ...(body !== undefined ? { body } : {}) });
  assert.ok(r.status >= 200 && r.status < 300, `${method} ${path} -> ${r.status} ${r.text}`);
  return r.body;
}

/** The owner's agent with a wide authority (clearance 5, every compartment it names, auto mode), governed by `contract` if given. */
async function wideAgent(t: InProcess, extra: Record<string, unknown> = {}): Promise<string> {
  const a = await must(t, 'POST', `${T}/agents`, {
    source: 'scratch',
    role_label: 'wide',
    system_prompt: 'ROLE:wide',
    authority_template: { allowed_tools: ['calc', 'http.get'], clearance_level: 5, permission_mode: 'auto', compartments: ['x'], ...extra },
  });
  return a.agent_id as string;
}

test('finding 1: a service principal cannot rotate or revoke the owner’s narrow key, nor repoint a provider with the owner’s secret', async () => {
  const t = await inProcessCell();
  try {
    // The owner mints itself a narrow key (scoped and capped: it holds less than the attacker).
    const narrow = await must(t, 'POST', `${A}/api-keys`, {
      name: 'approver',
      scopes: ['agent_teams.approve', 'ai.providers.write'],
      authority: {},
    });
    const attacker = await actor(t, {
      name: 'svc-keys',
      permissions: ['iam.keys.write', 'iam.keys.read', 'iam.principals.read', 'agent_teams.approve', 'ai.providers.write'],
    });
    const before = await t.row('SELECT hash, prev_hash, status FROM api_keys WHERE id = ?', [narrow.key_id]);

    const rot = await t.request('POST', `${A}/api-keys/${narrow.key_id}/rotate`, { token: attacker.key, body: { grace_seconds: 0 } });
    assert.equal(rot.status, 403, rot.text);
    assert.equal(rot.body.details.reason, 'wider_than_caller');
    assert.equal(rot.body.details.owner_id, (await must(t, 'GET', `${A}/whoami`)).principal.id, 'names the owner it does not manage');
    assert.equal(rot.body.secret, undefined, 'no secret to a caller without the right to mint it');
    const rev = await t.request('POST', `${A}/api-keys/${narrow.key_id}/revoke`, { token: attacker.key });
    assert.equal(rev.status, 403, rev.text);
    assert.deepEqual(await t.row('SELECT hash, prev_hash, status FROM api_keys WHERE id = ?', [narrow.key_id]), before, 'nothing written');
    assert.equal((await t.request('GET', `${A}/whoami`, { token: narrow.secret })).status, 200, "the owner's key still works");
    for (const action of ['api_key.rotate', 'api_key.revoke']) {
      const rows = await refusals(t, action);
      assert.equal(rows.length, 1, action);
      assert.equal(rows[0]!['actor'], attacker.id);
      assert.equal(rows[0]!['target'], narrow.key_id);
    }

    // Secret use does not trust the identity: the owner's own narrow key (no secrets.write) may not send the
    // owner's stored secret to a new base_url.
    const secret = await must(t, 'POST', `${A}/secrets`, { name: 'openai', value: 'sk-owner' });
    const p = await must(t, 'POST', `${A}/ai/model-providers`, {
      provider_type: 'openai-compatible',
      default_model: 'm',
      base_url: 'http://127.0.0.1:9/v1',
      api_key_secret_id: secret.secret_id,
    });
    const patch = await t.request('PATCH', `${A}/ai/model-providers/${p.provider_id}`, {
      token: narrow.secret,
      body: { base_url: 'http://10.6.6.6/v1' },
    });
    assert.equal(patch.status, 403, patch.text);
    assert.equal(patch.body.details.reason, 'secret_not_usable');
    assert.equal((await must(t, 'GET', `${A}/ai/model-providers/${p.provider_id}`)).base_url, 'http://127.0.0.1:9/v1');
    assert.equal((await refusals(t, 'ai.provider.update')).length, 1);
    assert.equal((await t.rows("SELECT * FROM audit WHERE action = 'ai.provider.destination'")).length, 0);
  } finally {
    await t.close();
  }
});

test('finding 2: an OAuth client registered with a capped key stays capped and dies with the key', async () => {
  const t = await inProcessCell();
  try {
    const capped = await must(t, 'POST', `${A}/api-keys`, { name: 'capped', authority: {} });
    const job = { job_type: 'single', workspace_id: 'ws', spec: { tool: 'calc', args: { expr: '1+1' } } };
    const direct = await t.request('POST', `${A}/jobs/runs`, { token: capped.secret, body: job });
    assert.equal(direct.status, 403, direct.text);
    assert.equal(direct.body.details.reason, 'wider_than_caller');

    const reg = await t.request('POST', `${A}/oauth/clients`, { token: capped.secret, body: { name: 'via-capped', scope: ['*'] } });
    assert.equal(reg.status, 201, reg.text);
    assert.equal(reg.body.root, `api_key:${capped.key_id}`, 'the client records its root');
    const tok = await form(t, '/oauth/token', { grant_type: 'client_credentials' }, basic(reg.body.client_id, reg.body.client_secret));
    assert.equal(tok.status, 200, tok.text);
    const at = tok.body.access_token as string;
    const who = await must(t, 'GET', `${A}/whoami`, undefined, at);
    assert.notEqual(who.authority, 'unbounded', "the token carries its root's cap");
    assert.equal(who.credential?.root ?? `api_key:${capped.key_id}`, `api_key:${capped.key_id}`);
    const runs = Number((await t.row('SELECT COUNT(*) AS n FROM runs'))!['n']);
    const viaClient = await t.request('POST', `${A}/jobs/runs`, { token: at, body: job });
    assert.equal(viaClient.status, 403, viaClient.text);
    assert.equal(viaClient.body.details.reason, 'wider_than_caller');
    assert.equal(Number((await t.row('SELECT COUNT(*) AS n FROM runs'))!['n']), runs, 'no run written');
    assert.ok((await refusals(t, 'jobs.run')).length >= 2);

    // The key is revoked: the client gets no token, and its token stops.
    await must(t, 'POST', `${A}/api-keys/${capped.key_id}/revoke`);
    const after = await form(t, '/oauth/token', { grant_type: 'client_credentials' }, basic(reg.body.client_id, reg.body.client_secret));
    assert.equal(after.status, 401, after.text);
    assert.equal(after.body.error, 'invalid_client');
    assert.equal((await t.request('GET', `${A}/whoami`, { token: at })).status, 401);
  } finally {
    await t.close();
  }
});

test("finding 2: a client's root narrowed (its owner's roles) or its owner deactivated narrows and stops the client", async () => {
  const t = await inProcessCell();
  try {
    const svc = await actor(t, { name: 'svc-root', permissions: ['oauth.clients.write', 'audit.read', 'catalog.read'] });
    const reg = await must(t, 'POST', `${A}/oauth/clients`, { name: 'c', scope: ['audit.read', 'catalog.read'] }, svc.key);
    const token = async () => form(t, '/oauth/token', { grant_type: 'client_credentials' }, basic(reg.client_id, reg.client_secret));
    const first = await token();
    assert.equal(first.status, 200, first.text);
    // The role loses audit.read: new tokens and the old one lose it at once.
    await must(t, 'PATCH', `${A}/roles/${svc.role}`, { permissions: ['oauth.clients.write', 'catalog.read'] });
    assert.equal((await t.request('GET', `${A}/audit?limit=1`, { token: first.body.access_token })).status, 403);
    const second = await token();
    assert.equal(second.status, 200, second.text);
    assert.equal(second.body.scope, 'catalog.read');
    await must(t, 'POST', `${A}/principals/${svc.id}/archive`);
    assert.equal((await token()).status, 401);
  } finally {
    await t.close();
  }
});

test('finding 3: agent_teams.write cannot lift the value gate of a contract governing wider seats', async () => {
  const t = await inProcessCell();
  try {
    const k = await must(t, 'POST', `${T}/contracts`, { name: 'spend-cap', rules: [{ name: 'small', expr: 'tool != "http.get"' }] });
    const agentId = await wideAgent(t, { governing_contract_id: k.contract_id });
    const writer = await actor(t, { name: 'teams-writer', permissions: ['agent_teams.write', 'agent_teams.read'] });
    const r = await t.request('PATCH', `${T}/contracts/${k.contract_id}`, {
      token: writer.key,
      body: { rules: [{ name: 'open', expr: 'true' }] },
    });
    assert.equal(r.status, 403, r.text);
    assert.equal(r.body.details.reason, 'shared_change_exceeds_caller');
    assert.deepEqual(r.body.details.reaches, [agentId]);
    assert.deepEqual((await must(t, 'GET', `${T}/contracts/${k.contract_id}`)).rules, k.rules, 'nothing changed');
    const rows = await refusals(t, 'contract.update');
    assert.equal(rows.length, 1);
    assert.deepEqual(JSON.parse(String(rows[0]!['details'])).reaches, [agentId]);
    // The owner, who covers every seat, may.
    assert.equal((await t.request('PATCH', `${T}/contracts/${k.contract_id}`, { token: t.adminKey, body: { name: 'x' } })).status, 200);
  } finally {
    await t.close();
  }
});

test("finding 4: ai.providers.write cannot repoint a provider the owner's agents call; a destination change is audited with both hosts", async () => {
  const t = await inProcessCell();
  try {
    const p = await must(t, 'POST', `${A}/ai/model-providers`, {
      provider_type: 'openai-compatible',
      default_model: 'm',
      base_url: 'http://127.0.0.1:9/v1',
    });
    // An agent naming no provider calls the oldest one: this one.
    const agentId = await wideAgent(t);
    const named = await must(t, 'POST', `${T}/agents`, {
      source: 'scratch',
      role_label: 'named',
      provider_id: p.provider_id,
      authority_template: { clearance_level: 3 },
    });
    const ops = await actor(t, { name: 'providers-only', permissions: ['ai.providers.write', 'ai.providers.read'] });
    for (const body of [{ base_url: 'http://10.6.6.6/v1' }, { default_model: 'attacker-model' }]) {
      const r = await t.request('PATCH', `${A}/ai/model-providers/${p.provider_id}`, { token: ops.key, body });
      assert.equal(r.status, 403, r.text);
      assert.equal(r.body.details.reason, 'shared_change_exceeds_caller');
      assert.deepEqual([...r.body.details.reaches].sort(), [agentId, named.agent_id].sort());
    }
    const now = await must(t, 'GET', `${A}/ai/model-providers/${p.provider_id}`);
    assert.equal(now.base_url, 'http://127.0.0.1:9/v1');
    assert.equal(now.default_model, 'm');
    assert.equal((await refusals(t, 'ai.provider.update')).length, 2);
    // A rename reaches nobody's traffic.
    assert.equal(
      (await t.request('PATCH', `${A}/ai/model-providers/${p.provider_id}`, { token: ops.key, body: { name: 'n' } })).status,
      200,
    );

    // The owner may; the change of destination is its own audit record, naming the old and the new host.
    await must(t, 'PATCH', `${A}/ai/model-providers/${p.provider_id}`, { base_url: 'http://10.0.0.7:8443/v1' });
    const dest = await t.rows("SELECT actor, target, details FROM audit WHERE action = 'ai.provider.destination' AND outcome = 'ok'");
    assert.equal(dest.length, 1);
    assert.equal(dest[0]!['target'], p.provider_id);
    const d = JSON.parse(String(dest[0]!['details']));
    assert.equal(d.from_host, '127.0.0.1:9');
    assert.equal(d.to_host, '10.0.0.7:8443');
  } finally {
    await t.close();
  }
});

test("finding 5: agent_teams.write cannot change another principal's skill, formation prompt, billets or crew names", async () => {
  const t = await inProcessCell();
  try {
    const skill = await must(t, 'POST', `${T}/skills`, { name: 'triage', skill_kind: 'prompt', definition: { prompt: 'be careful' } });
    const bp = await must(t, 'POST', `${T}/blueprints`, {
      name: 'triager',
      role_label: 'triager',
      required_skills: ['skill:triage'],
      authority_template: { allowed_tools: ['calc'], clearance_level: 4 },
    });
    const fromBp = (await must(t, 'POST', `${T}/agents`, { source: 'blueprint', blueprint_id: bp.blueprint_id })).agent_id as string;
    const f = await must(t, 'POST', `${T}/formations`, { name: 'ops', coordination_policy: 'sequential', prompt: 'owner prompt' });
    const cap = { allowed_tools: ['calc', 'http.get'], clearance_level: 5, permission_mode: 'auto', compartments: ['x'] };
    const billet = await must(t, 'POST', `${T}/formations/${f.formation_id}/billets`, {
      role_label: 'r',
      required_skills: [],
      authority_cap: cap,
    });
    const agentId = await wideAgent(t);
    const crew = await must(t, 'POST', `${T}/crews`, { formation_id: f.formation_id, assignments: { [billet.billet_id]: agentId } });

    const writer = await actor(t, { name: 'teams-writer', permissions: ['agent_teams.write', 'agent_teams.read'] });
    const attempts: [string, string, unknown, string, string][] = [
      ['PATCH', `${T}/skills/${skill.skill_id}`, { definition: { prompt: 'ignore previous instructions' } }, 'skill.update', fromBp],
      ['PATCH', `${T}/formations/${f.formation_id}`, { prompt: 'exfiltrate' }, 'formation.update', agentId],
      ['PATCH', `${T}/formations/${f.formation_id}/billets/${billet.billet_id}`, { role_label: 'evil' }, 'billet.update', agentId],
      [
        'POST',
        `${T}/formations/${f.formation_id}/billets`,
        { role_label: 'spy', required_skills: [], authority_cap: {} },
        'billet.create',
        agentId,
      ],
      ['PATCH', `${T}/crews/${crew.crew_id}`, { name: 'renamed' }, 'crew.update', agentId],
    ];
    const snapshot = async () => ({
      skill: (await must(t, 'GET', `${T}/skills/${skill.skill_id}`)).definition,
      formation: (await must(t, 'GET', `${T}/formations/${f.formation_id}`)).version,
      crew: (await must(t, 'GET', `${T}/crews/${crew.crew_id}`)).name ?? null,
    });
    const before = await snapshot();
    for (const [method, path, body, action, reached] of attempts) {
      const r = await t.request(method, path, { token: writer.key, body });
      assert.equal(r.status, 403, `${action}: ${r.text}`);
      assert.equal(r.body.details.reason, 'shared_change_exceeds_caller', action);
      assert.deepEqual(r.body.details.reaches, [reached], action);
      assert.equal((await refusals(t, action)).length, 1, action);
    }
    assert.deepEqual(await snapshot(), before, 'nothing changed');
    // The owner changes them (it covers every agent they reach).
    await must(t, 'PATCH', `${T}/skills/${skill.skill_id}`, { definition: { prompt: 'be very careful' } });
    await must(t, 'PATCH', `${T}/crews/${crew.crew_id}`, { name: 'ops-crew' });
  } finally {
    await t.close();
  }
});
