// GET /admin/whoami over HTTP (in process, both engines): any authenticated
// caller learns its principal, credential, scopes, effective permissions and
// envelope ceiling, for API keys, OAuth tokens and SATs, and never a secret.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ALL_PERMISSIONS } from '../../../core/permissions.ts';
import { actor } from '../../helpers/actors.ts';
import { inProcessCell } from '../../helpers/inproc.ts';
import { basic, form } from '../../helpers/oauth.ts';

const A = '/api/public/v1/admin';
const WHOAMI = `${A}/whoami`;

test('the bootstrap owner key: everything, unbounded, no secret in the answer', async () => {
  const t = await inProcessCell();
  try {
    const r = await t.request('GET', WHOAMI, { token: t.adminKey });
    assert.equal(r.status, 200, r.text);
    const keyId = (await t.request('GET', `${A}/api-keys`, { token: t.adminKey })).body.keys[0].key_id;
    assert.equal(r.body.principal.name, 'owner');
    assert.equal(r.body.principal.kind, 'user');
    assert.equal(r.body.principal.status, 'active');
    assert.deepEqual(r.body.principal.roles, ['owner']);
    assert.deepEqual(r.body.credential, {
      kind: 'api_key',
      id: keyId,
      root: `api_key:${keyId}`,
      client_id: null,
      rate_limit_rpm: null,
      actors: [],
    });
    assert.deepEqual(r.body.role_permissions, ['*']);
    assert.deepEqual(r.body.scopes, []);
    assert.deepEqual(r.body.effective_permissions, ['*']);
    assert.deepEqual(r.body.granted_permissions, [...ALL_PERMISSIONS]);
    assert.equal(r.body.authority, 'unbounded');
    assert.ok(!r.text.includes(t.adminKey), 'never the secret');
    assert.ok(!r.text.includes('svck_live_'));
  } finally {
    await t.close();
  }
});

test('a narrow key: no permission needed; scopes, effective permissions and the envelope cap as the gateway sees them', async () => {
  const t = await inProcessCell();
  try {
    const nobody = await actor(t, { name: 'nobody' });
    const none = await t.request('GET', WHOAMI, { token: nobody.key });
    assert.equal(none.status, 200, 'a principal with no permission at all may ask who it is');
    assert.deepEqual(none.body.effective_permissions, []);
    assert.deepEqual(none.body.granted_permissions, []);
    assert.deepEqual(none.body.authority, {});

    const a = await actor(t, {
      name: 'ops',
      roles: ['viewer', 'jobs'],
      authority: { allowed_tools: ['calc', 'kv.get'], clearance_level: 2 },
      scopes: ['system.orchestration.admin.read', 'audit.read', 'iam.keys.write'],
      keyAuthority: { allowed_tools: ['calc'], clearance_level: 1 },
      rpm: 3,
    });
    const r = await t.request('GET', WHOAMI, { token: a.key });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.principal.id, a.id);
    assert.deepEqual(r.body.principal.roles, ['viewer', 'jobs']);
    assert.equal(r.body.credential.kind, 'api_key');
    assert.equal(r.body.credential.id, a.keyId);
    assert.equal(r.body.credential.rate_limit_rpm, 3);
    assert.deepEqual(r.body.scopes, ['system.orchestration.admin.read', 'audit.read', 'iam.keys.write']);
    assert.deepEqual([...r.body.effective_permissions].sort(), ['audit.read', 'iam.keys.write', 'system.orchestration.admin.read']);
    assert.deepEqual(r.body.granted_permissions, ['iam.keys.write', 'audit.read', 'system.orchestration.admin.read']);
    assert.deepEqual(r.body.authority.allowed_tools, ['calc']);
    assert.equal(r.body.authority.clearance_level, 1);

    // The key's own rpm applies (3 per minute: two more, then 429).
    assert.equal((await t.request('GET', WHOAMI, { token: a.key })).status, 200);
    assert.equal((await t.request('GET', WHOAMI, { token: a.key })).status, 200);
    const over = await t.request('GET', WHOAMI, { token: a.key });
    assert.equal(over.status, 429);
    assert.equal(over.body.error, 'rate_limited');
  } finally {
    await t.close();
  }
});

test('refusals: 401 without or with a bad credential, 403 from an address the key does not allow', async () => {
  const t = await inProcessCell();
  try {
    const anon = await t.request('GET', WHOAMI);
    assert.equal(anon.status, 401);
    assert.equal(anon.body.error, 'unauthorized');
    assert.equal((await t.request('GET', WHOAMI, { token: 'svck_live_' + 'A'.repeat(43) })).status, 401);
    const k = await t.request('POST', `${A}/api-keys`, { token: t.adminKey, body: { name: 'ip', allowed_ips: ['10.1.0.0/16'] } });
    assert.equal((await t.request('GET', WHOAMI, { token: k.body.secret, ip: '10.1.2.3' })).status, 200);
    const elsewhere = await t.request('GET', WHOAMI, { token: k.body.secret, ip: '192.0.2.1' });
    assert.equal(elsewhere.status, 403);
    assert.equal(elsewhere.body.details.reason, 'ip_not_allowed');
    const revoked = await t.request('POST', `${A}/api-keys/${k.body.key_id}/revoke`, { token: t.adminKey });
    assert.equal(revoked.status, 200);
    assert.equal((await t.request('GET', WHOAMI, { token: k.body.secret, ip: '10.1.2.3' })).status, 401);
  } finally {
    await t.close();
  }
});

test('an OAuth access token and a SAT: kind, jti, root and client as the bearer path judged them', async () => {
  const t = await inProcessCell();
  try {
    const svc = await actor(t, { name: 'robot', roles: ['viewer', 'jobs'] });
    const reg = await t.request('POST', `${A}/oauth/clients`, {
      token: t.adminKey,
      body: { name: 'c', scope: ['audit.read', 'oauth.clients.read'], subject_id: svc.id },
    });
    assert.equal(reg.status, 201, reg.text);
    const tok = await form(
      t,
      '/oauth/token',
      { grant_type: 'client_credentials', scope: 'audit.read' },
      basic(reg.body.client_id, reg.body.client_secret),
    );
    assert.equal(tok.status, 200, tok.text);
    const jti = JSON.parse(Buffer.from(tok.body.access_token.split('.')[1], 'base64url').toString()).jti;
    const r = await t.request('GET', WHOAMI, { token: tok.body.access_token });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.principal.id, svc.id);
    assert.deepEqual(r.body.credential, {
      kind: 'oauth',
      id: jti,
      root: `token:${jti}`,
      client_id: reg.body.client_id,
      rate_limit_rpm: null,
      actors: [],
    });
    assert.deepEqual(r.body.scopes, ['audit.read']);
    assert.deepEqual(r.body.effective_permissions, ['audit.read']);
    assert.deepEqual(r.body.authority, {});
    assert.ok(!r.text.includes(tok.body.access_token));

    const sat = await t.request('POST', `${A}/sats`, { token: svc.key, body: { scope: ['agent_teams.read'] } });
    assert.equal(sat.status, 201, sat.text);
    const s = await t.request('GET', WHOAMI, { token: sat.body.access_token });
    assert.equal(s.status, 200, s.text);
    assert.equal(s.body.credential.kind, 'sat');
    assert.equal(s.body.credential.id, sat.body.jti);
    assert.equal(s.body.credential.root, `api_key:${svc.keyId}`);
    assert.equal(s.body.credential.client_id, `sat:api_key:${svc.keyId}`);
    assert.deepEqual(s.body.granted_permissions, ['agent_teams.read']);
  } finally {
    await t.close();
  }
});
