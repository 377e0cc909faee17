// Device authorization grant (RFC 8628): pending, slow_down, approval by the session's principal only, denied, expired.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { browserish, claimsOf, createUser, form, hiddenFields, registerClient, signIn } from '../../helpers/oauth.ts';

let t: InProcess;
let clientId: string;
let bob: string;

before(async () => {
  t = await inProcessCell();
  bob = await createUser(t, 'bob', ['viewer']);
  clientId = (
    await registerClient(t, {
      name: 'TV app',
      grant_types: ['urn:ietf:params:oauth:grant-type:device_code'],
      token_endpoint_auth_method: 'none',
      scope: ['oauth.clients.read', 'audit.read'],
    })
  ).client_id;
});
after(async () => {
  await t.close();
});

async function start() {
  const r = await form(t, '/oauth/device_authorization', { client_id: clientId, scope: 'audit.read' });
  assert.equal(r.status, 200, r.text);
  return r.body as {
    device_code: string;
    user_code: string;
    verification_uri: string;
    verification_uri_complete: string;
    interval: number;
    expires_in: number;
  };
}

const poll = (device_code: string) =>
  form(t, '/oauth/token', { grant_type: 'urn:ietf:params:oauth:grant-type:device_code', client_id: clientId, device_code });

async function decide(b: ReturnType<typeof browserish>, userCode: string, decision: string, extra: Record<string, string> = {}) {
  const page = await b.get(`/oauth/device?user_code=${encodeURIComponent(userCode)}`);
  assert.equal(page.status, 200, page.text);
  return b.post('/oauth/device', { ...hiddenFields(page.text), user_code: userCode, decision, ...extra });
}

test('device authorization returns a short user code, the verification URI and the interval', async () => {
  const d = await start();
  assert.match(d.user_code, /^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
  assert.equal(d.verification_uri, 'http://127.0.0.1:8080/oauth/device');
  assert.equal(d.interval, 5);
  assert.equal(d.expires_in, 600);
});

test('pending, slow_down when polled too fast, then the token for the approving session user', async () => {
  const d = await start();
  const p1 = await poll(d.device_code);
  assert.equal(p1.body.error, 'authorization_pending');
  const p2 = await poll(d.device_code);
  assert.equal(p2.body.error, 'slow_down');
  const b = await signIn(t, 'bob');
  const ok = await decide(b, d.user_code.toLowerCase().replace('-', ' '), 'approve');
  assert.equal(ok.status, 200);
  assert.match(ok.text, /Approved/);
  t.clock.advance(10_000);
  const r = await poll(d.device_code);
  assert.equal(r.status, 200, r.text);
  assert.equal(claimsOf(r.body.access_token).sub, bob);
  assert.equal(r.body.scope, 'audit.read');
  assert.equal((await poll(d.device_code)).body.error, 'invalid_grant');
});

test('attack: a device code approved with a forged identity in the body', async () => {
  const d = await start();
  // no session: the body's identity fields are ignored and the approval refused
  const anon = await form(t, '/oauth/device', {
    user_code: d.user_code,
    decision: 'approve',
    principal_id: 'owner',
    sub: 'owner',
    username: 'owner',
  });
  assert.equal(anon.status, 401);
  assert.equal((await poll(d.device_code)).body.error, 'authorization_pending');
  // bob's session + a forged identity in the body: the token is bob's, never the owner's
  const b = await signIn(t, 'bob');
  const r = await decide(b, d.user_code, 'approve', { principal_id: 'owner', sub: 'owner', username: 'owner' });
  assert.equal(r.status, 200);
  t.clock.advance(10_000);
  const tok = await poll(d.device_code);
  assert.equal(claimsOf(tok.body.access_token).sub, bob);
});

test('denied gives access_denied; expired gives expired_token; unknown code is refused', async () => {
  const d = await start();
  const b = await signIn(t, 'bob');
  await decide(b, d.user_code, 'deny');
  assert.equal((await poll(d.device_code)).body.error, 'access_denied');
  const e = await start();
  t.clock.advance(601_000);
  assert.equal((await poll(e.device_code)).body.error, 'expired_token');
  assert.equal((await poll('nope')).body.error, 'invalid_grant');
  const b2 = await signIn(t, 'bob');
  const page = await b2.get('/oauth/device');
  const r = await b2.post('/oauth/device', { ...hiddenFields(page.text), user_code: 'BBBB-BBBB', decision: 'approve' });
  assert.equal(r.status, 400);
});

test('device page without a session sends the user to sign in', async () => {
  const r = await browserish(t).get('/oauth/device?user_code=BCDF-GHJK');
  assert.equal(r.status, 303);
  assert.match(r.headers.get('location')!, /^\/oauth\/login\?return_to=%2Foauth%2Fdevice/);
});

test('sign out ends the session (a forged CSRF token cannot)', async () => {
  const b = await signIn(t, 'bob');
  const page = await b.get('/oauth/device');
  assert.equal(page.status, 200);
  assert.equal((await b.post('/oauth/logout', { csrf: 'forged' })).status, 403);
  assert.equal((await b.get('/oauth/device')).status, 200);
  const old = b.jar.get('cell_session')!;
  const out = await b.post('/oauth/logout', { csrf: hiddenFields(page.text)['csrf']! });
  assert.equal(out.status, 200);
  assert.equal((await b.get('/oauth/device')).status, 303);
  b.jar.set('cell_session', old); // the old cookie replayed: the session is gone server side too
  assert.equal((await b.get('/oauth/device')).status, 303);
});

test('a public client cannot introspect; dangerous redirect URI schemes are refused at registration', async () => {
  const r = await form(t, '/oauth/introspect', { client_id: clientId, token: 'x' });
  assert.equal(r.status, 401);
  assert.equal(r.body.error, 'invalid_client');
  const bad = await t.request('POST', '/api/public/v1/admin/oauth/clients', {
    token: t.adminKey,
    body: {
      name: 'evil',
      grant_types: ['authorization_code'],
      token_endpoint_auth_method: 'none',
      redirect_uris: ['javascript:alert(1)'],
      scope: ['audit.read'],
    },
  });
  assert.equal(bad.status, 400);
});
