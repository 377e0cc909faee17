// Issue 20, rule 4: a SAT minted with a capped API key records the key as its root
// and dies with it, at the bearer path and at introspection; so does a SAT minted
// with that SAT (it inherits the root). A SAT minted with a key-less token is untouched.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inProcessCell } from '../../helpers/inproc.ts';
import { basic, claimsOf, createService, form, registerClient } from '../../helpers/oauth.ts';

const A = '/api/public/v1/admin';

test('a SAT minted with a narrow API key records the key as its root and is refused once the key is revoked', async () => {
  const t = await inProcessCell();
  try {
    const svc = await createService(t, 'sat-minter', ['jobs']);
    const k = await t.request('POST', `${A}/api-keys`, {
      token: t.adminKey,
      body: { name: 'narrow', owner_id: svc, scopes: ['iam.sats.write', 'system.orchestration.admin.read'] },
    });
    assert.equal(k.status, 201, k.text);
    // A resource server that introspects.
    const rs = await registerClient(t, {
      name: 'rs',
      scope: ['system.orchestration.admin.read'],
      subject_id: await createService(t, 'rs', ['viewer']),
    });
    const introspect = (token: string) => form(t, '/oauth/introspect', { token }, basic(rs.client_id, rs.client_secret!));
    // The owner's key-less token (a client the admin registered for it), for control.
    const own = await registerClient(t, { name: 'own', scope: ['iam.sats.write', 'system.orchestration.admin.read'], subject_id: svc });
    const ownTok = await form(t, '/oauth/token', { grant_type: 'client_credentials' }, basic(own.client_id, own.client_secret!));
    assert.equal(ownTok.status, 200, ownTok.text);

    const mint = (token: string, scope = ['system.orchestration.admin.read']) => t.request('POST', `${A}/sats`, { token, body: { scope } });
    const sat = await mint(k.body.secret, ['iam.sats.write', 'system.orchestration.admin.read']);
    assert.equal(sat.status, 201, sat.text);
    assert.equal(claimsOf(sat.body.access_token).root, `api_key:${k.body.key_id}`, 'the key is the root');
    const chained = await mint(sat.body.access_token);
    assert.equal(chained.status, 201, chained.text);
    assert.equal(claimsOf(chained.body.access_token).root, `api_key:${k.body.key_id}`, 'a SAT minted with the SAT keeps the root');
    const control = await mint(ownTok.body.access_token);
    assert.equal(control.status, 201, control.text);
    assert.ok(!String(claimsOf(control.body.access_token).root).startsWith('api_key:'));

    const use = (token: string) => t.request('GET', `${A}/jobs/definitions`, { token });
    for (const s of [sat, chained, control]) {
      assert.equal((await use(s.body.access_token)).status, 200);
      const i = await introspect(s.body.access_token);
      assert.equal(i.status, 200, i.text);
      assert.equal(i.body.active, true);
    }

    assert.equal((await t.request('POST', `${A}/api-keys/${k.body.key_id}/revoke`, { token: t.adminKey })).status, 200);
    for (const s of [sat, chained]) {
      const dead = await use(s.body.access_token);
      assert.equal(dead.status, 401, dead.text);
      assert.equal(dead.body.details.reason, 'revoked');
      assert.deepEqual((await introspect(s.body.access_token)).body, { active: false });
    }
    assert.equal((await use(control.body.access_token)).status, 200, 'the SAT minted with the key-less token lives on');
    assert.equal((await introspect(control.body.access_token)).body.active, true);
  } finally {
    await t.close();
  }
});
