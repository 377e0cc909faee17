// The life of a registered OAuth client over HTTP (in process, both engines): list with total,
// get without a secret, rotate the secret (the old one stops, the new one works, shown once),
// delete (its tokens stop on the bearer path and in introspection, its pending codes go), and
// who may do which: the client's whole scope and its subject must be within the caller
// (403 wider_than_caller, audited, nothing changed), built-in clients are the cell's own (409).
// Also: tls_client_auth and certificate-bound tokens exist only on a cell with a client CA.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { basic, createService, form, registerClient } from '../../helpers/oauth.ts';

const C = '/api/public/v1/admin/oauth/clients';
let t: InProcess;
let svc: string;
/** A confidential client that introspects (a resource server). */
let rs: { client_id: string; client_secret?: string };

before(async () => {
  t = await inProcessCell();
  svc = await createService(t, 'robot', ['viewer']);
  rs = await registerClient(t, { name: 'resource-server', scope: ['audit.read'] });
});
after(async () => {
  await t?.close();
});

async function robot(scope = ['oauth.clients.read', 'audit.read']) {
  return registerClient(t, { name: 'robot', scope, subject_id: svc });
}

async function tokenFor(c: { client_id: string; client_secret?: string }, secret = c.client_secret!) {
  return form(t, '/oauth/token', { grant_type: 'client_credentials' }, basic(c.client_id, secret));
}

async function introspect(token: string) {
  return form(t, '/oauth/introspect', { token }, basic(rs.client_id, rs.client_secret!));
}

/** An API key of a new service holding a custom role with exactly `permissions`. */
async function keyWith(name: string, permissions: string[]): Promise<{ key: string; id: string }> {
  const role = await t.request('POST', '/api/public/v1/admin/roles', { token: t.adminKey, body: { name, permissions } });
  assert.equal(role.status, 201, role.text);
  const id = await createService(t, `${name}-svc`, [name]);
  const k = await t.request('POST', '/api/public/v1/admin/api-keys', { token: t.adminKey, body: { name, owner_id: id } });
  assert.equal(k.status, 201, k.text);
  return { key: k.body.secret as string, id };
}

test('list pages with total; get answers one client, never a secret or its hash', async () => {
  const a = await robot();
  const all = await t.request('GET', `${C}?limit=1000`, { token: t.adminKey });
  assert.equal(all.status, 200, all.text);
  const n = Number((await t.row('SELECT COUNT(*) AS n FROM oauth_clients'))!['n']);
  assert.equal(all.body.total, n);
  assert.equal(all.body.clients.length, n);
  const page = await t.request('GET', `${C}?limit=1&offset=1`, { token: t.adminKey });
  assert.deepEqual([page.body.clients.length, page.body.total, page.body.limit, page.body.offset], [1, n, 1, 1]);
  for (const q of ['limit=0', 'limit=1001', 'offset=-1'])
    assert.equal((await t.request('GET', `${C}?${q}`, { token: t.adminKey })).status, 400, q);

  const one = await t.request('GET', `${C}/${a.client_id}`, { token: t.adminKey });
  assert.equal(one.status, 200, one.text);
  assert.deepEqual(
    one.body,
    all.body.clients.find((c: { client_id: string }) => c.client_id === a.client_id),
  );
  assert.equal(one.body.client_secret, undefined);
  const hash = (await t.row('SELECT secret_hash FROM oauth_clients WHERE client_id = ?', [a.client_id]))!['secret_hash'] as string;
  assert.ok(!one.text.includes(hash) && !one.text.includes(a.client_secret!));
  assert.deepEqual(one.body.scope, ['audit.read', 'oauth.clients.read']);

  const missing = await t.request('GET', `${C}/ocl_nosuchclient`, { token: t.adminKey });
  assert.equal(missing.status, 404);
  assert.equal(missing.body.error, 'not_found');
  assert.equal((await t.request('GET', `${C}/${encodeURIComponent('bad id!')}`, { token: t.adminKey })).status, 400);
  assert.equal((await t.request('GET', `${C}/${a.client_id}`)).status, 401);
  const blind = await keyWith('blind', ['audit.read']);
  assert.equal((await t.request('GET', `${C}/${a.client_id}`, { token: blind.key })).status, 403);
});

test('rotate: the new secret is shown once and works; the old one stops; issued tokens live on', async () => {
  const a = await robot();
  const before = await tokenFor(a);
  assert.equal(before.status, 200, before.text);
  const r = await t.request('POST', `${C}/${a.client_id}/rotate`, { token: t.adminKey });
  assert.equal(r.status, 200, r.text);
  assert.match(r.body.client_secret, /^ocs_/);
  assert.notEqual(r.body.client_secret, a.client_secret);
  assert.equal(r.body.client_id, a.client_id);
  const stored = (await t.row('SELECT secret_hash FROM oauth_clients WHERE client_id = ?', [a.client_id]))!['secret_hash'];
  assert.equal(stored, createHash('sha256').update(r.body.client_secret).digest('hex'));

  const old = await tokenFor(a, a.client_secret);
  assert.equal(old.status, 401);
  assert.equal(old.body.error, 'invalid_client');
  assert.equal((await tokenFor(a, r.body.client_secret)).status, 200);
  // Rotation is not revocation: a token already issued still verifies until it expires.
  assert.equal((await t.request('GET', C, { token: before.body.access_token })).status, 200);
  assert.equal((await t.request('GET', `${C}/${a.client_id}`, { token: t.adminKey })).body.client_secret, undefined);
  const audit = await t.row("SELECT outcome FROM audit WHERE action = 'oauth.client.rotate' AND target = ?", [a.client_id]);
  assert.equal(audit?.['outcome'], 'ok');

  assert.equal((await t.request('POST', `${C}/ocl_nosuchclient/rotate`, { token: t.adminKey })).status, 404);
  const pub = await registerClient(t, {
    name: 'cli',
    grant_types: ['urn:ietf:params:oauth:grant-type:device_code'],
    token_endpoint_auth_method: 'none',
    scope: ['audit.read'],
  });
  const none = await t.request('POST', `${C}/${pub.client_id}/rotate`, { token: t.adminKey });
  assert.equal(none.status, 409);
  assert.equal(none.body.details.reason, 'no_client_secret');
});

test('delete: the client’s tokens stop on the bearer path and in introspection; its pending codes go', async () => {
  const a = await robot();
  const tok = (await tokenFor(a)).body.access_token as string;
  assert.equal((await t.request('GET', C, { token: tok })).status, 200);
  assert.equal((await introspect(tok)).body.active, true);
  const dev = await registerClient(t, {
    name: 'tv',
    grant_types: ['urn:ietf:params:oauth:grant-type:device_code'],
    token_endpoint_auth_method: 'none',
    scope: ['audit.read'],
  });
  const started = await form(t, '/oauth/device_authorization', { client_id: dev.client_id });
  assert.equal(started.status, 200, started.text);

  const d = await t.request('DELETE', `${C}/${a.client_id}`, { token: t.adminKey });
  assert.equal(d.status, 200, d.text);
  assert.equal(d.body.client_id, a.client_id);
  const refused = await t.request('GET', C, { token: tok });
  assert.equal(refused.status, 401);
  assert.equal(refused.body.details.reason, 'revoked');
  assert.deepEqual((await introspect(tok)).body, { active: false });
  assert.equal((await tokenFor(a)).status, 401);
  assert.equal((await t.request('GET', `${C}/${a.client_id}`, { token: t.adminKey })).status, 404);
  assert.equal((await t.request('DELETE', `${C}/${a.client_id}`, { token: t.adminKey })).status, 404);

  const gone = await t.request('DELETE', `${C}/${dev.client_id}`, { token: t.adminKey });
  assert.equal(gone.status, 200);
  assert.equal(Number((await t.row('SELECT COUNT(*) AS n FROM oauth_device_codes WHERE client_id = ?', [dev.client_id]))!['n']), 0);
  const audit = await t.row("SELECT details FROM audit WHERE action = 'oauth.client.delete' AND target = ?", [dev.client_id]);
  assert.equal(JSON.parse(audit!['details'] as string).device_codes_deleted, 1);
  // Polling the deleted client's device code: the client no longer authenticates.
  const poll = await form(t, '/oauth/token', {
    grant_type: 'urn:ietf:params:oauth:grant-type:device_code',
    client_id: dev.client_id,
    device_code: started.body.device_code,
  });
  assert.equal(poll.body.error, 'invalid_client');
});

test('authority: the caller manages the client’s subject and holds its whole scope, else 403 and nothing changes', async () => {
  const a = await robot();
  const tok = (await tokenFor(a)).body.access_token as string;
  const ops = (id: string) =>
    [
      ['POST', `${C}/${id}/rotate`],
      ['DELETE', `${C}/${id}`],
    ] as const;
  // Holds the write permission and the client's scope, but its subject (a viewer) holds more than the caller.
  const scoped = await keyWith('clients-audit', ['oauth.clients.read', 'oauth.clients.write', 'audit.read']);
  for (const [method, path] of ops(a.client_id)) {
    const r = await t.request(method, path, { token: scoped.key });
    assert.equal(r.status, 403, `${method} ${r.text}`);
    assert.equal(r.body.details.reason, 'wider_than_caller');
  }
  // Nothing changed: the old secret still works, the token still verifies; the refusals are audited.
  assert.equal((await tokenFor(a)).status, 200);
  assert.equal((await t.request('GET', C, { token: tok })).status, 200);
  const refusals = async (actor: string) =>
    (await t.rows("SELECT action FROM audit WHERE actor = ? AND outcome = 'refused' ORDER BY action", [actor])).map((x) => x['action']);
  assert.deepEqual(await refusals(scoped.id), ['oauth.client.delete', 'oauth.client.rotate']);

  // The subject's own key, scoped narrower than the client: it can neither take the client's secret nor delete it.
  const b = await registerClient(t, { name: 'own', scope: ['audit.read', 'oauth.clients.read'], subject_id: scoped.id });
  const k = await t.request('POST', '/api/public/v1/admin/api-keys', {
    token: t.adminKey,
    body: { name: 'narrow', owner_id: scoped.id, scopes: ['oauth.clients.write'] },
  });
  assert.equal(k.status, 201, k.text);
  for (const [method, path] of ops(b.client_id)) {
    const r = await t.request(method, path, { token: k.body.secret });
    assert.equal(r.status, 403, `${method} ${r.text}`);
    assert.equal(r.body.details.reason, 'wider_than_caller');
    assert.ok(r.body.details.exceeds.permissions.includes('audit.read'), r.text);
  }
  assert.equal((await tokenFor(b)).status, 200);
  // Without oauth.clients.write: 403 before anything else.
  const reader = await keyWith('clients-reader', ['oauth.clients.read', 'audit.read']);
  for (const [method, path] of ops(b.client_id)) assert.equal((await t.request(method, path, { token: reader.key })).status, 403);
  // The subject with its whole authority: it may rotate and delete its own client.
  assert.equal((await t.request('POST', `${C}/${b.client_id}/rotate`, { token: scoped.key })).status, 200);
  assert.equal((await t.request('DELETE', `${C}/${b.client_id}`, { token: scoped.key })).status, 200);
  assert.equal((await tokenFor(b)).status, 401);
});

test('a built-in client is the cell’s own: 409 builtin_client on rotate and delete', async () => {
  await t.modules.oauth.api.ensureBuiltInClient({
    clientId: 'test-console',
    name: 'Console',
    redirectUris: ['http://127.0.0.1/cb'],
    scope: ['*'],
  });
  for (const [method, path] of [
    ['POST', `${C}/test-console/rotate`],
    ['DELETE', `${C}/test-console`],
  ] as const) {
    const r = await t.request(method, path, { token: t.adminKey });
    assert.equal(r.status, 409, r.text);
    assert.equal(r.body.details.reason, 'builtin_client');
  }
  assert.equal((await t.request('GET', `${C}/test-console`, { token: t.adminKey })).body.created_by, 'system');
});

test('without a client CA: no tls_client_auth, no certificate-bound tokens advertised, tls_client_auth refused', async () => {
  const m = await t.request('GET', '/.well-known/oauth-authorization-server');
  assert.equal(m.status, 200);
  assert.equal(m.body.tls_client_certificate_bound_access_tokens, undefined);
  assert.equal(m.body.mtls_endpoint_aliases, undefined);
  for (const k of [
    'token_endpoint_auth_methods_supported',
    'introspection_endpoint_auth_methods_supported',
    'revocation_endpoint_auth_methods_supported',
  ])
    assert.ok(!m.body[k].includes('tls_client_auth'), k);
  assert.deepEqual(m.body.token_endpoint_auth_methods_supported, ['client_secret_basic', 'client_secret_post', 'none']);
  const r = await t.request('POST', C, {
    token: t.adminKey,
    body: { name: 'x', scope: ['audit.read'], token_endpoint_auth_method: 'tls_client_auth', tls_client_auth_subject_dn: 'CN=x' },
  });
  assert.equal(r.status, 400);
  assert.equal(r.body.details.reason, 'mtls_unavailable');
});

test('the curated document names the client authentication of the protocol endpoints, as the metadata does', async () => {
  const m = (await t.request('GET', '/.well-known/oauth-authorization-server')).body;
  const doc = (await t.request('GET', '/api/public/v1/openapi.json')).body;
  const expected: [string, string[]][] = [
    ['/oauth/token', m.token_endpoint_auth_methods_supported],
    ['/oauth/device_authorization', m.token_endpoint_auth_methods_supported],
    ['/oauth/introspect', m.introspection_endpoint_auth_methods_supported],
    ['/oauth/revoke', m.revocation_endpoint_auth_methods_supported],
  ];
  for (const [path, methods] of expected) {
    const op = doc.paths[path].post;
    assert.deepEqual(op['x-client-authentication'], methods, path);
    for (const method of methods) assert.ok(op.description.includes(`\`${method}\``), `${path} describes ${method}`);
    assert.ok(!op.description.includes('tls_client_auth'), `${path}: no mTLS without a client CA`);
    assert.deepEqual(op.security, [], `${path} takes no bearer credential`);
    assert.ok(op.requestBody.content['application/x-www-form-urlencoded'].schema.properties.client_id, path);
  }
  assert.match(doc.paths['/oauth/introspect'].post.description, /Public clients \(`none`\) are refused/);
  for (const p of [`${C}/{client_id}`, `${C}/{client_id}/rotate`]) assert.ok(doc.paths[p], p);
  assert.ok(doc.paths[`${C}/{client_id}`].delete && doc.paths[`${C}/{client_id}`].get);
  assert.ok(doc.components.schemas.OAuthClientList.properties.total);
});
