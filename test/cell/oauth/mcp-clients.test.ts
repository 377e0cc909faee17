// What MCP clients look for in the cell's authorization server, in process: RFC 9728 metadata of the
// API and of /mcp and the 401s that point at it; tokens bound to /mcp (RFC 8707, in the forms clients
// write it) honoured there only; the resource named at the authorization endpoint consented to and
// kept with the code; dynamic registration (off by default; capped, rate-limited, named unverified,
// nothing without consent); refresh tokens rotated, reuse ending the grant, DPoP-bound; client ID
// metadata documents refused where they must be (the fetch itself: test/e2e/mcp-oauth.test.ts).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT } from 'jose';
import { pkceS256Challenge } from '../../../core/tokens/pkce.ts';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { basic, claimsOf, createService, createUser, form, hiddenFields, registerClient, signIn } from '../../helpers/oauth.ts';

const BASE = 'http://127.0.0.1:8080';
const MCP = `${BASE}/mcp`;
const API = `${BASE}/api/public/v1`;
const REDIRECT = 'http://127.0.0.1:9/cb';
const verifier = 'v'.repeat(20) + 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r';
const INIT = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } },
});
const MCP_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

let t: InProcess;
let dcr: InProcess;
before(async () => {
  t = await inProcessCell();
  dcr = await inProcessCell({ config: { dynamicRegistration: true } });
  for (const c of [t, dcr]) await createUser(c, 'ann', ['operator'], 'ann has a long password');
});
after(async () => {
  await t.close();
  await dcr.close();
});

const mcpInit = (c: InProcess, token: string | null, scheme = 'Bearer') =>
  c.request('POST', '/mcp', { rawBody: INIT, headers: { ...MCP_HEADERS, ...(token ? { authorization: `${scheme} ${token}` } : {}) } });

/** Login, consent (approve) and the redirect back, for a client; returns the redirect URL and the consent page. */
async function consent(c: InProcess, clientId: string, over: Record<string, string> = {}) {
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: REDIRECT,
    state: 's',
    code_challenge: await pkceS256Challenge(verifier),
    code_challenge_method: 'S256',
    ...over,
  });
  const url = `/oauth/authorize?${q}`;
  const b = await signIn(c, 'ann', 'ann has a long password', url);
  const page = await b.get(url);
  if (page.status !== 200) return { location: new URL(page.headers.get('location') ?? 'http://x/none'), page: page.text };
  const r = await b.post('/oauth/authorize', { ...hiddenFields(page.text), decision: 'approve' });
  assert.equal(r.status, 303, r.text);
  return { location: new URL(r.headers.get('location')!), page: page.text };
}

const redeem = (c: InProcess, clientId: string, code: string, over: Record<string, string> = {}, headers: Record<string, string> = {}) =>
  form(
    c,
    '/oauth/token',
    { grant_type: 'authorization_code', client_id: clientId, code, redirect_uri: REDIRECT, code_verifier: verifier, ...over },
    headers,
  );

test('RFC 9728 metadata of the API and of /mcp; every 401 points at the one of the resource asked', async () => {
  const mcp = await t.request('GET', '/.well-known/oauth-protected-resource/mcp');
  assert.equal(mcp.status, 200);
  assert.equal(mcp.body.resource, MCP);
  assert.deepEqual(mcp.body.authorization_servers, [BASE]);
  assert.deepEqual(mcp.body.scopes_supported, [
    'agent_teams.read',
    'agent_teams.write',
    'agent_teams.approve',
    'system.orchestration.admin.read',
  ]);
  assert.equal(mcp.body.dpop_bound_access_tokens_required, false);
  const api = await t.request('GET', '/.well-known/oauth-protected-resource/api/public/v1');
  assert.equal(api.body.resource, API);
  const as = await t.request('GET', '/.well-known/oauth-authorization-server');
  assert.equal(as.body.client_id_metadata_document_supported, true);
  assert.equal(as.body.registration_endpoint, undefined, 'dynamic registration is off by default');
  assert.ok(as.body.grant_types_supported.includes('refresh_token'));
  assert.equal(as.body.authorization_response_iss_parameter_supported, true);
  assert.deepEqual(as.body.code_challenge_methods_supported, ['S256']);

  const anon = await mcpInit(t, null);
  assert.equal(anon.status, 401);
  assert.match(
    anon.headers.get('www-authenticate')!,
    /^Bearer realm="cell", resource_metadata="http:\/\/127\.0\.0\.1:8080\/\.well-known\/oauth-protected-resource\/mcp", DPoP algs="/,
  );
  const anonApi = await t.request('GET', '/api/public/v1/admin/whoami');
  assert.match(
    anonApi.headers.get('www-authenticate')!,
    /resource_metadata="http:\/\/127\.0\.0\.1:8080\/\.well-known\/oauth-protected-resource\/api\/public\/v1"/,
  );
  const badToken = await mcpInit(t, 'eyJhbGciOiJFZERTQSJ9.e30.c2ln');
  assert.equal(badToken.status, 401);
  assert.match(badToken.headers.get('www-authenticate')!, /error="invalid_token".*resource_metadata=".*\/oauth-protected-resource\/mcp"/);
});

test('a token for /mcp (in the forms clients write it) is honoured there only; an API token is not one for /mcp', async () => {
  await createService(t, 'svc', ['operator']);
  const svc = await registerClient(t, {
    name: 'svc client',
    scope: ['agent_teams'],
    subject_id: (await t.request('GET', '/api/public/v1/admin/principals?limit=1000', { token: t.adminKey })).body.principals.find(
      (p: { name: string }) => p.name === 'svc',
    ).id,
  });
  const tokenFor = async (resource?: string) => {
    const r = await form(
      t,
      '/oauth/token',
      { grant_type: 'client_credentials', ...(resource !== undefined ? { resource } : {}) },
      basic(svc.client_id, svc.client_secret!),
    );
    return r;
  };
  for (const form_ of [MCP, `${MCP}/`, 'HTTP://127.0.0.1:8080/mcp']) {
    const r = await tokenFor(form_);
    assert.equal(r.status, 200, `${form_}: ${r.text}`);
    assert.equal(claimsOf(r.body.access_token).aud, MCP, form_);
  }
  const mcpTok = (await tokenFor(MCP)).body.access_token as string;
  assert.equal((await mcpInit(t, mcpTok)).status, 200);
  const atApi = await t.request('GET', '/api/public/v1/admin/whoami', { token: mcpTok });
  assert.equal(atApi.status, 401);
  assert.equal(atApi.body.details.reason, 'bad_audience');
  const apiTok = (await tokenFor()).body.access_token as string;
  assert.equal((await t.request('GET', '/api/public/v1/admin/whoami', { token: apiTok })).status, 200);
  const atMcp = await mcpInit(t, apiTok);
  assert.equal(atMcp.status, 401);
  assert.equal(atMcp.body.details.reason, 'bad_audience');
  for (const bad of [`${BASE}/mcpx`, `${MCP}?x=1`, `${MCP}#f`, `${BASE}/`]) {
    const r = await tokenFor(bad);
    assert.equal(r.status, 400, bad);
    assert.equal(r.body.error, 'invalid_target', bad);
  }
  // Introspection knows an MCP token as the cell's own.
  const i = await form(t, '/oauth/introspect', { token: mcpTok }, basic(svc.client_id, svc.client_secret!));
  assert.equal(i.body.active, true);
  assert.equal(i.body.aud, MCP);
});

test('the resource of an authorization request is consented to, kept with the code, and the token is for it', async () => {
  const app = await registerClient(t, {
    name: 'Desk app',
    grant_types: ['authorization_code'],
    token_endpoint_auth_method: 'none',
    redirect_uris: [REDIRECT],
    scope: ['agent_teams'],
  });
  const { location, page } = await consent(t, app.client_id, { resource: `${MCP}/`, scope: 'agent_teams.read' });
  assert.match(page, /<b id="resource">http:\/\/127\.0\.0\.1:8080\/mcp<\/b>/);
  assert.equal(location.searchParams.get('iss'), 'service://cell-test');
  const code = location.searchParams.get('code')!;
  const other = await redeem(t, app.client_id, code, { resource: API });
  assert.equal(other.status, 400);
  assert.equal(other.body.error, 'invalid_target');
  const again = await consent(t, app.client_id, { resource: MCP, scope: 'agent_teams.read' });
  const tok = await redeem(t, app.client_id, again.location.searchParams.get('code')!);
  assert.equal(tok.status, 200, tok.text);
  assert.equal(claimsOf(tok.body.access_token).aud, MCP);
  assert.equal(tok.body.refresh_token, undefined, 'no refresh token for a client not registered for them');
  const bad = await consent(t, app.client_id, { resource: 'https://elsewhere.example/mcp' });
  assert.equal(bad.location.searchParams.get('error'), 'invalid_target');
});

test('dynamic registration: off answers 404; on, a client registers itself, capped, and holds nothing without consent', async () => {
  const off = await t.request('POST', '/oauth/register', { body: { redirect_uris: [REDIRECT] } });
  assert.equal(off.status, 404);
  const as = await dcr.request('GET', '/.well-known/oauth-authorization-server');
  assert.equal(as.body.registration_endpoint, `${BASE}/oauth/register`);
  const reg = await dcr.request('POST', '/oauth/register', {
    body: {
      redirect_uris: [REDIRECT],
      client_name: 'Some MCP client',
      grant_types: ['authorization_code', 'refresh_token'],
      scope: 'agent_teams.read audit.read',
      logo_uri: 'https://x/l.png',
    },
  });
  assert.equal(reg.status, 201, reg.text);
  assert.equal(reg.body.token_endpoint_auth_method, 'none');
  assert.equal(reg.body.client_secret, undefined);
  assert.equal(reg.body.scope, 'agent_teams.read', 'capped to --oauth-registration-scope');
  const id = reg.body.client_id as string;
  // No subject, no client_credentials: nothing until a principal consents.
  const cc = await form(dcr, '/oauth/token', { grant_type: 'client_credentials', client_id: id });
  assert.equal(cc.status, 400);
  assert.equal(cc.body.error, 'unauthorized_client');
  const { location, page } = await consent(dcr, id, { scope: 'agent_teams.read agent_teams.write', resource: MCP });
  assert.match(page, /id="unverified"/);
  assert.match(page, /registered itself/);
  const tok = await redeem(dcr, id, location.searchParams.get('code')!);
  assert.equal(tok.status, 200, tok.text);
  assert.equal(claimsOf(tok.body.access_token).scope, 'agent_teams.read');
  assert.ok(tok.body.refresh_token, 'a client registered for refresh tokens gets one');
  assert.equal((await mcpInit(dcr, tok.body.access_token)).status, 200);
  const confidential = await dcr.request('POST', '/oauth/register', {
    body: { redirect_uris: ['https://app.example/cb'], token_endpoint_auth_method: 'client_secret_basic' },
  });
  assert.equal(confidential.status, 201);
  assert.match(confidential.body.client_secret, /^ocs_/);
  const listed = await dcr.request('GET', `/api/public/v1/admin/oauth/clients/${id}`, { token: dcr.adminKey });
  assert.equal(listed.body.created_by, 'dynamic-registration');
  // An operator deletes it: its tokens stop at once, its refresh token with them.
  assert.equal((await dcr.request('DELETE', `/api/public/v1/admin/oauth/clients/${id}`, { token: dcr.adminKey })).status, 200);
  const gone = await mcpInit(dcr, tok.body.access_token);
  assert.equal(gone.status, 401);
  assert.equal(gone.body.details.reason, 'revoked');
  const noRefresh = await form(dcr, '/oauth/token', { grant_type: 'refresh_token', client_id: id, refresh_token: tok.body.refresh_token });
  assert.equal(noRefresh.status, 401);
  assert.equal(noRefresh.body.error, 'invalid_client');
  const cases: [unknown, string][] = [
    [{ redirect_uris: ['http://app.example/cb'] }, 'invalid_redirect_uri'],
    [{ redirect_uris: ['https://app.example/cb#x'] }, 'invalid_redirect_uri'],
    [{ redirect_uris: [] }, 'invalid_redirect_uri'],
    [{ redirect_uris: [REDIRECT], grant_types: ['client_credentials'] }, 'invalid_client_metadata'],
    [{ redirect_uris: [REDIRECT], response_types: ['token'] }, 'invalid_client_metadata'],
    [{ redirect_uris: [REDIRECT], scope: 'iam.keys.write' }, 'invalid_client_metadata'],
  ];
  for (const [body, error] of cases) {
    const r = await dcr.request('POST', '/oauth/register', { body, ip: '10.9.9.9' });
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.equal(r.body.error, error, JSON.stringify(body));
  }
  // Ten from one address, then 429 with Retry-After; another address is not affected.
  let last = 0;
  for (let i = 0; i < 11; i++)
    last = (await dcr.request('POST', '/oauth/register', { body: { redirect_uris: [REDIRECT] }, ip: '10.1.1.1' })).status;
  assert.equal(last, 429);
  assert.equal((await dcr.request('POST', '/oauth/register', { body: { redirect_uris: [REDIRECT] }, ip: '10.1.1.2' })).status, 201);
});

test('refresh tokens: rotated, single use, a reuse ends the grant and its access tokens; revocation ends it too', async () => {
  const app = await registerClient(t, {
    name: 'Refresher',
    grant_types: ['authorization_code', 'refresh_token'],
    token_endpoint_auth_method: 'none',
    redirect_uris: [REDIRECT],
    scope: ['agent_teams.read'],
  });
  const first = await redeem(t, app.client_id, (await consent(t, app.client_id, { resource: MCP })).location.searchParams.get('code')!);
  const rt1 = first.body.refresh_token as string;
  assert.match(rt1, /^ort_/);
  // The client was registered with the admin's key: its tokens live with that key, and with the grant (a link).
  assert.match(claimsOf(first.body.access_token).root, /^api_key:/);
  assert.match(claimsOf(first.body.access_token).links[0], /^token:rtf_/);
  const refresh = (rt: string, over: Record<string, string> = {}, headers: Record<string, string> = {}) =>
    form(t, '/oauth/token', { grant_type: 'refresh_token', client_id: app.client_id, refresh_token: rt, ...over }, headers);
  const wrongResource = await refresh(rt1, { resource: API });
  assert.equal(wrongResource.body.error, 'invalid_target');
  const second = await refresh(rt1);
  assert.equal(second.status, 200, second.text);
  assert.equal(claimsOf(second.body.access_token).aud, MCP);
  assert.notEqual(second.body.refresh_token, rt1);
  assert.equal((await mcpInit(t, second.body.access_token)).status, 200);
  // Another client cannot use it: the same answer as an unknown token, and the family lives on.
  const stranger = await registerClient(t, {
    name: 'Stranger',
    grant_types: ['authorization_code', 'refresh_token'],
    token_endpoint_auth_method: 'none',
    redirect_uris: [REDIRECT],
    scope: ['agent_teams.read'],
  });
  const stolen = await form(t, '/oauth/token', {
    grant_type: 'refresh_token',
    client_id: stranger.client_id,
    refresh_token: second.body.refresh_token,
  });
  assert.equal(stolen.body.error, 'invalid_grant');
  // rt1 again: a reuse. The grant ends: its newest refresh token and the access token it gave are refused.
  const reuse = await refresh(rt1);
  assert.equal(reuse.status, 400);
  assert.equal(reuse.body.error, 'invalid_grant');
  assert.equal((await refresh(second.body.refresh_token)).body.error, 'invalid_grant');
  const after = await mcpInit(t, second.body.access_token);
  assert.equal(after.status, 401);
  assert.equal(after.body.details.reason, 'revoked');
  // A new consent, then revocation of its refresh token ends that grant.
  const third = await redeem(t, app.client_id, (await consent(t, app.client_id, { resource: MCP })).location.searchParams.get('code')!);
  assert.equal((await form(t, '/oauth/revoke', { token: third.body.refresh_token, client_id: app.client_id })).status, 200);
  assert.equal((await refresh(third.body.refresh_token)).body.error, 'invalid_grant');
  assert.equal((await mcpInit(t, third.body.access_token)).status, 401);
});

test('a refresh token of a DPoP-bound grant refreshes only with a proof of the same key', async () => {
  const app = await registerClient(t, {
    name: 'Bound',
    grant_types: ['authorization_code', 'refresh_token'],
    token_endpoint_auth_method: 'none',
    redirect_uris: [REDIRECT],
    scope: ['agent_teams.read'],
  });
  const key = async () => {
    const kp = await generateKeyPair('Ed25519');
    const jwk = await exportJWK(kp.publicKey);
    return { kp, jwk, jkt: await calculateJwkThumbprint(jwk) };
  };
  const k = await key();
  const other = await key();
  const proof = (kk: typeof k) =>
    new SignJWT({ htm: 'POST', htu: `${BASE}/oauth/token`, iat: Math.floor(t.clock.now() / 1000), jti: crypto.randomUUID() })
      .setProtectedHeader({ alg: 'Ed25519', typ: 'dpop+jwt', jwk: kk.jwk })
      .sign(kk.kp.privateKey);
  const code = (await consent(t, app.client_id)).location.searchParams.get('code')!;
  const bound = await redeem(t, app.client_id, code, {}, { dpop: await proof(k) });
  assert.equal(bound.body.token_type, 'DPoP');
  const rt = bound.body.refresh_token as string;
  const refresh = (headers: Record<string, string>) =>
    form(t, '/oauth/token', { grant_type: 'refresh_token', client_id: app.client_id, refresh_token: rt }, headers);
  assert.equal((await refresh({})).body.error, 'invalid_grant');
  assert.equal((await refresh({ dpop: await proof(other) })).body.error, 'invalid_grant');
  const ok = await refresh({ dpop: await proof(k) });
  assert.equal(ok.status, 200, ok.text);
  assert.equal(claimsOf(ok.body.access_token).cnf.jkt, k.jkt);
});

test('client ID metadata documents: never in the sovereign posture, nor when off, nor from a private address', async () => {
  const doc = 'https://127.0.0.1:9/client.json';
  const sovereign = await inProcessCell({ config: { posture: 'sovereign' } });
  const off = await inProcessCell({ config: { clientIdMetadataDocuments: false } });
  try {
    for (const c of [sovereign, off]) {
      assert.equal((await c.request('GET', '/.well-known/oauth-authorization-server')).body.client_id_metadata_document_supported, false);
    }
    for (const c of [sovereign, off, t]) {
      const q = new URLSearchParams({
        response_type: 'code',
        client_id: doc,
        redirect_uri: REDIRECT,
        code_challenge: await pkceS256Challenge(verifier),
        code_challenge_method: 'S256',
      });
      const r = await c.request('GET', `/oauth/authorize?${q}`);
      assert.equal(r.status, 400, 'an unknown client: no redirect');
      assert.match(r.text, /Unknown client/);
    }
  } finally {
    await sovereign.close();
    await off.close();
  }
});
