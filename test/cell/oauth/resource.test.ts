// Resource indicators (RFC 8707) at /oauth/token and for SATs: a token for a registered device names it
// (aud = edge:<device_id>); the cell refuses such tokens on its own API; unknown resources, unregistered
// devices and several resources are invalid_target; the device's tokens can still be revoked and introspected.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { basic, claimsOf, createService, form, registerClient } from '../../helpers/oauth.ts';
import { generateEd25519 } from '../../../bundles/codec.ts';

let t: InProcess;
let client: { client_id: string; client_secret?: string };
let device: string;
const A = '/api/public/v1/admin';

before(async () => {
  t = await inProcessCell();
  const svc = await createService(t, 'robot', ['admin']);
  client = await registerClient(t, { name: 'robot', scope: ['edge.read', 'oauth.clients.read'], subject_id: svc });
  const dev = await generateEd25519();
  const reg = await t.request('POST', `${A}/edge/devices`, { token: t.adminKey, body: { name: 'pump', public_jwk: dev.publicJwk } });
  assert.equal(reg.status, 201, reg.text);
  device = dev.kid;
});
after(async () => {
  await t.close();
});

const auth = () => basic(client.client_id, client.client_secret!);
const token = (fields: Record<string, string> | URLSearchParams) =>
  t.request('POST', '/oauth/token', {
    rawBody: new URLSearchParams(fields instanceof URLSearchParams ? fields : { grant_type: 'client_credentials', ...fields }).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...auth() },
  });

test('resource=edge:<device_id> gives aud = that device; the cell refuses the token on its own API', async () => {
  const r = await token({ resource: `edge:${device}` });
  assert.equal(r.status, 200, r.text);
  assert.equal(claimsOf(r.body.access_token).aud, `edge:${device}`);
  const use = await t.request('GET', `${A}/edge/devices`, { token: r.body.access_token });
  assert.equal(use.status, 401);
  assert.equal(use.body.details.reason, 'bad_audience');
});

test("no resource, or the cell's own API as resource, gives the cell's audience", async () => {
  const plain = await token({});
  const own = claimsOf(plain.body.access_token).aud;
  assert.match(own, /\/api\/public\/v1$/);
  const named = await token({ resource: own });
  assert.equal(named.status, 200, named.text);
  assert.equal(claimsOf(named.body.access_token).aud, own);
  assert.equal((await t.request('GET', `${A}/edge/devices`, { token: named.body.access_token })).status, 200);
});

test('invalid_target: another URL, an unregistered device, several resources', async () => {
  for (const resource of ['https://elsewhere.example/api', `edge:${'A'.repeat(43)}`, 'edge:short', `EDGE:${device}`]) {
    const r = await token({ resource });
    assert.equal(r.status, 400, resource);
    assert.equal(r.body.error, 'invalid_target', resource);
  }
  const two = new URLSearchParams([
    ['grant_type', 'client_credentials'],
    ['resource', `edge:${device}`],
    ['resource', `edge:${device}`],
  ]);
  const r = await token(two);
  assert.equal(r.status, 400);
  assert.equal(r.body.error, 'invalid_target');
});

test('a device token can be introspected and revoked at the cell, which issued it', async () => {
  const tk = (await token({ resource: `edge:${device}` })).body.access_token;
  const i1 = await form(t, '/oauth/introspect', { token: tk }, auth());
  assert.equal(i1.body.active, true);
  assert.equal(i1.body.aud, `edge:${device}`);
  assert.equal((await form(t, '/oauth/revoke', { token: tk }, auth())).status, 200);
  assert.deepEqual((await form(t, '/oauth/introspect', { token: tk }, auth())).body, { active: false });
});

test('SATs take a resource too; an unknown one is 400 invalid_target', async () => {
  const ok = await t.request('POST', `${A}/sats`, { token: t.adminKey, body: { scope: ['edge.read'], resource: `edge:${device}` } });
  assert.equal(ok.status, 201, ok.text);
  assert.equal(claimsOf(ok.body.access_token).aud, `edge:${device}`);
  assert.equal(claimsOf(ok.body.access_token).sat, true);
  const bad = await t.request('POST', `${A}/sats`, { token: t.adminKey, body: { scope: ['edge.read'], resource: 'edge:nobody' } });
  assert.equal(bad.status, 400);
  assert.equal(bad.body.details.reason, 'invalid_target');
});
