// client_credentials, the bearer path, introspection, revocation, SATs (in-process, injected clock).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { basic, claimsOf, createService, form, registerClient } from '../../helpers/oauth.ts';

let t: InProcess;
let client: { client_id: string; client_secret?: string };
let svc: string;

before(async () => {
  t = await inProcessCell();
  svc = await createService(t, 'robot', ['viewer']);
  client = await registerClient(t, { name: 'robot', scope: ['oauth.clients.read', 'iam.principals.read', 'audit.read'], subject_id: svc });
});
after(async () => {
  await t.close();
});

async function token(fields: Record<string, string> = {}, auth = basic(client.client_id, client.client_secret!)) {
  return form(t, '/oauth/token', { grant_type: 'client_credentials', ...fields }, auth);
}

test('metadata and jwks are public and name the endpoints', async () => {
  const m = await t.request('GET', '/.well-known/oauth-authorization-server');
  assert.equal(m.status, 200);
  assert.equal(m.body.issuer, 'service://cell-test');
  assert.deepEqual(m.body.code_challenge_methods_supported, ['S256']);
  assert.ok(m.body.dpop_signing_alg_values_supported.includes('Ed25519'));
  assert.ok(m.body.dpop_signing_alg_values_supported.includes('EdDSA'));
  assert.equal(m.body.authorization_response_iss_parameter_supported, true);
  const j = await t.request('GET', '/oauth/jwks.json');
  assert.equal(j.body.keys.length, 1);
  assert.equal(j.body.keys[0].crv, 'Ed25519');
  assert.equal(j.body.keys[0].d, undefined);
});

test('client_credentials issues an at+jwt narrowed to the subject authority', async () => {
  const r = await token();
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.token_type, 'Bearer');
  assert.equal(r.body.expires_in, 600);
  const [h] = r.body.access_token.split('.');
  assert.equal(JSON.parse(Buffer.from(h, 'base64url').toString()).typ, 'at+jwt');
  const c = claimsOf(r.body.access_token);
  assert.equal(c.iss, 'service://cell-test');
  assert.equal(c.sub, svc);
  assert.equal(c.client_id, client.client_id);
  assert.equal(c.aud, 'http://127.0.0.1:8080/api/public/v1');
  assert.equal(c.exp - c.iat, 600);
  assert.equal(r.body.scope, 'audit.read iam.principals.read oauth.clients.read');
  const ok = await t.request('GET', '/api/public/v1/admin/oauth/clients', { token: r.body.access_token });
  assert.equal(ok.status, 200, ok.text);
});

test('scope escalation in a token request: never wider than the subject and client', async () => {
  const narrowed = await token({ scope: 'oauth iam.keys.write' });
  assert.equal(narrowed.status, 200);
  assert.equal(narrowed.body.scope, 'oauth.clients.read'); // viewer has oauth.clients.read only; iam.keys.write is not granted
  const none = await token({ scope: 'iam.keys.write' });
  assert.equal(none.status, 400);
  assert.equal(none.body.error, 'invalid_scope');
  const r = await t.request('GET', '/api/public/v1/admin/principals', { token: narrowed.body.access_token });
  assert.equal(r.status, 403);
  assert.equal(r.body.error, 'forbidden');
});

test('client authentication: wrong secret, unknown client, client_secret_post', async () => {
  const bad = await token({}, basic(client.client_id, 'ocs_wrong'));
  assert.equal(bad.status, 401);
  assert.equal(bad.body.error, 'invalid_client');
  const unknown = await token({}, basic('ocl_00000000000000000000', 'x'));
  assert.equal(unknown.status, 401);
  const post = await form(t, '/oauth/token', {
    grant_type: 'client_credentials',
    client_id: client.client_id,
    client_secret: client.client_secret!,
  });
  assert.equal(post.status, 200);
  const noGrant = await form(t, '/oauth/token', { client_id: client.client_id, client_secret: client.client_secret! });
  assert.equal(noGrant.body.error, 'invalid_request');
  const unsupported = await token({ grant_type: 'password' });
  assert.equal(unsupported.body.error, 'unsupported_grant_type');
});

test('introspection: active with claims; exactly {"active":false} for revoked, expired, malformed, foreign', async () => {
  const auth = basic(client.client_id, client.client_secret!);
  const a = (await token()).body.access_token;
  const i = await form(t, '/oauth/introspect', { token: a }, auth);
  assert.equal(i.status, 200);
  assert.equal(i.body.active, true);
  assert.equal(i.body.sub, svc);
  const noAuth = await form(t, '/oauth/introspect', { token: a });
  assert.equal(noAuth.status, 401);

  const inactive: string[] = [];
  // revoked
  assert.equal((await form(t, '/oauth/revoke', { token: a }, auth)).status, 200);
  inactive.push((await form(t, '/oauth/introspect', { token: a }, auth)).text);
  const bearer = await t.request('GET', '/api/public/v1/admin/oauth/clients', { token: a });
  assert.equal(bearer.status, 401);
  assert.equal(bearer.body.details.reason, 'revoked');
  // malformed
  inactive.push((await form(t, '/oauth/introspect', { token: 'not-a-token' }, auth)).text);
  // foreign: our claims, someone else's signature
  const parts = (await token()).body.access_token.split('.');
  inactive.push((await form(t, '/oauth/introspect', { token: `${parts[0]}.${parts[1]}.${'A'.repeat(86)}` }, auth)).text);
  // expired
  const b = (await token()).body.access_token;
  t.clock.advance(601_000);
  inactive.push((await form(t, '/oauth/introspect', { token: b }, auth)).text);
  assert.equal((await t.request('GET', '/api/public/v1/admin/oauth/clients', { token: b })).status, 401);
  for (const body of inactive) assert.equal(body, '{"active":false}');
});

test('revocation is idempotent and a no-op for unknown tokens', async () => {
  const auth = basic(client.client_id, client.client_secret!);
  const a = (await token()).body.access_token;
  assert.equal((await form(t, '/oauth/revoke', { token: a }, auth)).status, 200);
  assert.equal((await form(t, '/oauth/revoke', { token: a }, auth)).status, 200);
  assert.equal((await form(t, '/oauth/revoke', { token: 'garbage' }, auth)).status, 200);
  assert.equal((await form(t, '/oauth/revoke', { token: 'garbage' })).status, 401);
});

test('an API key serves as the client secret: owner is the subject, key scopes cap the token', async () => {
  const k = await t.request('POST', '/api/public/v1/admin/api-keys', {
    token: t.adminKey,
    body: { name: 'as-client', scopes: ['catalog.read', 'audit.read'] },
  });
  assert.equal(k.status, 201, k.text);
  const keyId = k.body.key_id ?? k.body.id;
  const r = await token({ scope: 'audit.read iam.keys.write' }, basic(keyId, k.body.secret));
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.scope, 'audit.read');
  assert.equal(claimsOf(r.body.access_token).client_id, keyId);
  const wrongId = await token({}, basic('key_00000000000000000000', k.body.secret));
  assert.equal(wrongId.status, 401);
});

test('a demoted subject loses authority at once', async () => {
  const sub2 = await createService(t, 'demotable', ['viewer']);
  const c2 = await registerClient(t, { name: 'demotable', scope: ['audit.read'], subject_id: sub2 });
  const a = (await token({}, basic(c2.client_id, c2.client_secret!))).body.access_token;
  assert.equal((await t.request('GET', '/api/public/v1/admin/audit', { token: a })).status, 200);
  // change the subject's roles directly in the store (role editing is the IAM module's)
  await t.core.store.write((tx) => tx.run('UPDATE principals SET roles = ? WHERE id = ?', [JSON.stringify(['agent']), sub2]));
  assert.equal((await t.request('GET', '/api/public/v1/admin/audit', { token: a })).status, 403);
});

test('SATs: narrowed scope, sat claim, wildcard and escalation refused', async () => {
  const r = await t.request('POST', '/api/public/v1/admin/sats', {
    token: t.adminKey,
    body: { scope: ['oauth.clients.read'], ttl_seconds: 120 },
  });
  assert.equal(r.status, 201, r.text);
  const c = claimsOf(r.body.access_token);
  assert.equal(c.sat, true);
  assert.equal(c.exp - c.iat, 120);
  assert.equal((await t.request('GET', '/api/public/v1/admin/oauth/clients', { token: r.body.access_token })).status, 200);
  assert.equal((await t.request('GET', '/api/public/v1/admin/audit', { token: r.body.access_token })).status, 403);
  const wild = await t.request('POST', '/api/public/v1/admin/sats', { token: t.adminKey, body: { scope: ['*'] } });
  assert.equal(wild.status, 400);
  // a SAT cannot mint a wider SAT
  const wider = await t.request('POST', '/api/public/v1/admin/sats', { token: r.body.access_token, body: { scope: ['audit.read'] } });
  assert.equal(wider.status, 403);
  const tooLong = await t.request('POST', '/api/public/v1/admin/sats', {
    token: t.adminKey,
    body: { scope: ['audit.read'], ttl_seconds: 7200 },
  });
  assert.equal(tooLong.status, 400);
});

test('signing key rotation: old tokens keep verifying during the overlap', async () => {
  const before = (await token()).body.access_token;
  const rot = await t.request('POST', '/api/public/v1/admin/oauth/signing-keys/rotate', { token: t.adminKey });
  assert.equal(rot.status, 200);
  assert.equal(rot.body.published.length, 2);
  const afterTok = (await token()).body.access_token;
  assert.notEqual(
    JSON.parse(Buffer.from(before.split('.')[0], 'base64url').toString()).kid,
    JSON.parse(Buffer.from(afterTok.split('.')[0], 'base64url').toString()).kid,
  );
  assert.equal((await t.request('GET', '/api/public/v1/admin/oauth/clients', { token: before })).status, 200);
  assert.equal((await t.request('GET', '/api/public/v1/admin/oauth/clients', { token: afterTok })).status, 200);
  // after the overlap (longest token lifetime + 60 s) the retired key leaves the key set
  t.clock.advance((3600 + 61) * 1000);
  await t.modules.oauth.api.refreshKeyring();
  const jwks = await t.request('GET', '/oauth/jwks.json');
  assert.equal(jwks.body.keys.length, 1);
  assert.equal(jwks.body.keys[0].kid, rot.body.kid);
});

test("a token obtained with an API key keeps the key's rpm ceiling and dies with the key", async () => {
  const k = await t.request('POST', '/api/public/v1/admin/api-keys', {
    token: t.adminKey,
    body: { name: 'rpm2', scopes: ['oauth.clients.read'], rate_limit_rpm: 2 },
  });
  assert.equal(k.status, 201, k.text);
  const keyId = k.body.key_id ?? k.body.id;
  const a = (await token({}, basic(keyId, k.body.secret))).body.access_token;
  const b = (await token({}, basic(keyId, k.body.secret))).body.access_token;
  assert.equal((await t.request('GET', '/api/public/v1/admin/oauth/clients', { token: a })).status, 200);
  assert.equal((await t.request('GET', '/api/public/v1/admin/oauth/clients', { token: b })).status, 200);
  const third = await t.request('GET', '/api/public/v1/admin/oauth/clients', { token: a });
  assert.equal(third.status, 429); // two tokens share the key's bucket
  const sat = await t.request('POST', '/api/public/v1/admin/sats', { token: k.body.secret, body: { scope: ['oauth.clients.read'] } });
  assert.equal(sat.status, 403); // the key lacks iam.sats.write
  const rev = await t.request('POST', `/api/public/v1/admin/api-keys/${keyId}/revoke`, { token: t.adminKey });
  assert.equal(rev.status, 200, rev.text);
  t.clock.advance(61_000);
  const dead = await t.request('GET', '/api/public/v1/admin/oauth/clients', { token: b });
  assert.equal(dead.status, 401);
  assert.equal(dead.body.details.reason, 'revoked');
});
