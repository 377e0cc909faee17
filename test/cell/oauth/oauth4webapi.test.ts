// An independent client (oauth4webapi 3.8, nobody here wrote it) drives the real
// cell process (`node dist/cell.mjs serve`): discovery, client_credentials with
// and without DPoP, validateJwtAccessToken, introspection, revocation, and the
// device flow with polling. Needs `node scripts/build.mjs` first (make test builds).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as oauth from 'oauth4webapi';
import { startCellProcess, type CellProcess } from '../../helpers/cell-process.ts';

const insecure = { [oauth.allowInsecureRequests]: true } as const;
let cell: CellProcess;
let as: oauth.AuthorizationServer;

async function api(method: string, path: string, body?: unknown, token = cell.adminKey) {
  const r = await fetch(cell.url + path, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: r.status, body: (await r.json().catch(() => undefined)) as any };
}

before(async () => {
  cell = await startCellProcess({ args: ['--cell-id', 'cell-e2e'] });
});
after(async () => {
  await cell.stop();
  cell.cleanup();
});

test('discovery: RFC 8414 metadata processed by oauth4webapi with issuer service://<cell id>', async () => {
  const res = await fetch(`${cell.url}/.well-known/oauth-authorization-server`);
  as = await oauth.processDiscoveryResponse(new URL('service://cell-e2e'), res);
  assert.equal(as.issuer, 'service://cell-e2e');
  assert.equal(as.token_endpoint, `${cell.url}/oauth/token`);
  assert.deepEqual(as.code_challenge_methods_supported, ['S256']);
});

test('client_credentials without and with DPoP; validateJwtAccessToken; introspection; revocation', async () => {
  const svc = await api('POST', '/api/public/v1/admin/principals', { kind: 'service', name: 'e2e-robot', roles: ['viewer'] });
  assert.equal(svc.status, 201);
  const reg = await api('POST', '/api/public/v1/admin/oauth/clients', {
    name: 'e2e',
    scope: ['oauth.clients.read', 'audit.read'],
    subject_id: svc.body.id,
  });
  assert.equal(reg.status, 201);
  const client: oauth.Client = { client_id: reg.body.client_id };
  const auth = oauth.ClientSecretBasic(reg.body.client_secret);

  // plain bearer
  const r1 = await oauth.clientCredentialsGrantRequest(as, client, auth, { scope: 'oauth.clients.read' }, insecure);
  const t1 = await oauth.processClientCredentialsResponse(as, client, r1);
  assert.equal(t1.token_type, 'bearer');
  assert.equal(t1.scope, 'oauth.clients.read');
  const res1 = await oauth.protectedResourceRequest(
    t1.access_token,
    'GET',
    new URL(`${cell.url}/api/public/v1/admin/oauth/clients`),
    undefined,
    undefined,
    insecure,
  );
  assert.equal(res1.status, 200);

  // the certified client validates our JWT access token (RFC 9068) against /oauth/jwks.json
  const claims = await oauth.validateJwtAccessToken(
    as,
    new Request(`${cell.url}/x`, { headers: { authorization: `Bearer ${t1.access_token}` } }),
    `${cell.url}/api/public/v1`,
    insecure,
  );
  assert.equal(claims.sub, svc.body.id);
  assert.equal(claims.client_id, client.client_id);

  // DPoP-bound
  const keyPair = await oauth.generateKeyPair('Ed25519');
  const DPoP = oauth.DPoP(client, keyPair);
  const r2 = await oauth.clientCredentialsGrantRequest(as, client, auth, { scope: 'oauth.clients.read' }, { ...insecure, DPoP });
  const t2 = await oauth.processClientCredentialsResponse(as, client, r2);
  assert.equal(t2.token_type, 'dpop');
  const res2 = await oauth.protectedResourceRequest(
    t2.access_token,
    'GET',
    new URL(`${cell.url}/api/public/v1/admin/oauth/clients`),
    undefined,
    undefined,
    { ...insecure, DPoP },
  );
  assert.equal(res2.status, 200, await res2.clone().text());
  // the bound token alone, without its proof, is refused
  const bare = await fetch(`${cell.url}/api/public/v1/admin/oauth/clients`, { headers: { authorization: `DPoP ${t2.access_token}` } });
  assert.equal(bare.status, 401);

  // introspection and revocation
  const i1 = await oauth.processIntrospectionResponse(
    as,
    client,
    await oauth.introspectionRequest(as, client, auth, t1.access_token, insecure),
  );
  assert.equal(i1.active, true);
  assert.equal(i1.sub, svc.body.id);
  await oauth.processRevocationResponse(await oauth.revocationRequest(as, client, auth, t1.access_token, insecure));
  const i2 = await oauth.processIntrospectionResponse(
    as,
    client,
    await oauth.introspectionRequest(as, client, auth, t1.access_token, insecure),
  );
  assert.deepEqual(i2, { active: false });
  const after = await fetch(`${cell.url}/api/public/v1/admin/oauth/clients`, { headers: { authorization: `Bearer ${t1.access_token}` } });
  assert.equal(after.status, 401);
  assert.equal(((await after.json()) as { error: string }).error, 'unauthorized');
});

/** Signs in through /oauth/login with fetch and returns the session cookie header. */
async function login(name: string, password: string, returnTo: string): Promise<string> {
  const page = await fetch(`${cell.url}/oauth/login?return_to=${encodeURIComponent(returnTo)}`);
  const csrfCookie = page.headers
    .getSetCookie()
    .map((c) => c.split(';')[0])
    .join('; ');
  const csrf = /name="csrf" value="([^"]+)"/.exec(await page.text())![1]!;
  const r = await fetch(`${cell.url}/oauth/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: csrfCookie },
    body: new URLSearchParams({ username: name, password, csrf, return_to: returnTo }),
  });
  assert.equal(r.status, 303);
  return r.headers
    .getSetCookie()
    .map((c) => c.split(';')[0])
    .join('; ');
}

test('device flow: device authorization, polling (pending), approval in a signed-in session, token', async () => {
  const user = await api('POST', '/api/public/v1/admin/principals', {
    kind: 'user',
    name: 'dora',
    roles: ['viewer'],
    password: 'a long enough password',
  });
  assert.equal(user.status, 201);
  const reg = await api('POST', '/api/public/v1/admin/oauth/clients', {
    name: 'e2e-tv',
    grant_types: ['urn:ietf:params:oauth:grant-type:device_code'],
    token_endpoint_auth_method: 'none',
    scope: ['audit.read'],
  });
  const client: oauth.Client = { client_id: reg.body.client_id, token_endpoint_auth_method: 'none' };
  const d = await oauth.processDeviceAuthorizationResponse(
    as,
    client,
    await oauth.deviceAuthorizationRequest(as, client, oauth.None(), { scope: 'audit.read' }, insecure),
  );
  assert.match(d.user_code, /^[A-Z]{4}-[A-Z]{4}$/);
  await assert.rejects(
    oauth.processDeviceCodeResponse(as, client, await oauth.deviceCodeGrantRequest(as, client, oauth.None(), d.device_code, insecure)),
    (e: unknown) => e instanceof oauth.ResponseBodyError && e.error === 'authorization_pending',
  );
  const cookie = await login('dora', 'a long enough password', '/oauth/device');
  const page = await fetch(`${cell.url}/oauth/device?user_code=${d.user_code}`, { headers: { cookie } });
  const csrf = /name="csrf" value="([^"]+)"/.exec(await page.text())![1]!;
  const ok = await fetch(`${cell.url}/oauth/device`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
    body: new URLSearchParams({ csrf, user_code: d.user_code, decision: 'approve', principal_id: 'owner' }),
  });
  assert.equal(ok.status, 200);
  // poll at the advertised interval, bounded
  let tok: oauth.TokenEndpointResponse | undefined;
  for (let i = 0; i < 3 && !tok; i++) {
    await new Promise((r) => setTimeout(r, (d.interval ?? 5) * 1000 + 100));
    try {
      tok = await oauth.processDeviceCodeResponse(
        as,
        client,
        await oauth.deviceCodeGrantRequest(as, client, oauth.None(), d.device_code, insecure),
      );
    } catch (e) {
      if (!(e instanceof oauth.ResponseBodyError) || e.error !== 'authorization_pending') throw e;
    }
  }
  assert.ok(tok);
  assert.equal(JSON.parse(Buffer.from(tok.access_token.split('.')[1]!, 'base64url').toString()).sub, user.body.id);
});
