// Authorization code + PKCE S256: login, consent, code exchange, and the refusals (code reuse, PKCE mismatch, redirect_uri mismatch, plain).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { pkceS256Challenge } from '../../../core/tokens/pkce.ts';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { browserish, claimsOf, createUser, form, hiddenFields, signIn } from '../../helpers/oauth.ts';
import { registerClient } from '../../helpers/oauth.ts';

const REDIRECT = 'http://127.0.0.1:9/callback';
let t: InProcess;
let clientId: string;
let alice: string;
const verifier = 'v'.repeat(20) + 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r';

function authorizeUrl(over: Record<string, string> = {}, challenge?: string) {
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: REDIRECT,
    scope: 'oauth.clients.read audit.read iam.keys.write',
    state: 'st-123',
    code_challenge: challenge ?? '',
    code_challenge_method: 'S256',
    ...over,
  });
  return `/oauth/authorize?${q}`;
}

before(async () => {
  t = await inProcessCell();
  alice = await createUser(t, 'alice', ['viewer']);
  clientId = (
    await registerClient(t, {
      name: 'Notebook app',
      grant_types: ['authorization_code'],
      token_endpoint_auth_method: 'none',
      redirect_uris: [REDIRECT],
      scope: ['oauth.clients.read', 'audit.read', 'iam.keys'],
    })
  ).client_id;
});
after(async () => {
  await t.close();
});

async function approve(challenge: string): Promise<URL> {
  const url = authorizeUrl({}, challenge);
  const anon = browserish(t);
  const first = await anon.get(url);
  assert.equal(first.status, 303);
  assert.match(first.headers.get('location')!, /^\/oauth\/login\?return_to=/);
  const b = await signIn(t, 'alice', undefined, url);
  const consent = await b.get(url);
  assert.equal(consent.status, 200, consent.text);
  assert.match(consent.text, /Notebook app/);
  assert.match(consent.text, /<li>audit.read<\/li>/);
  assert.doesNotMatch(consent.text, /<li>iam.keys.write<\/li>/); // alice (viewer) cannot grant it: not listed
  const h = hiddenFields(consent.text);
  const r = await b.post('/oauth/authorize', { ...h, decision: 'approve' });
  assert.equal(r.status, 303, r.text);
  return new URL(r.headers.get('location')!);
}

async function exchange(code: string, over: Record<string, string> = {}) {
  return form(t, '/oauth/token', {
    grant_type: 'authorization_code',
    client_id: clientId,
    code,
    redirect_uri: REDIRECT,
    code_verifier: verifier,
    ...over,
  });
}

test('login, consent, code with state and iss, token for the user with scope narrowed to her authority', async () => {
  const loc = await approve(await pkceS256Challenge(verifier));
  assert.equal(loc.origin + loc.pathname, REDIRECT);
  assert.equal(loc.searchParams.get('state'), 'st-123');
  assert.equal(loc.searchParams.get('iss'), 'service://cell-test');
  const r = await exchange(loc.searchParams.get('code')!);
  assert.equal(r.status, 200, r.text);
  assert.equal(claimsOf(r.body.access_token).sub, alice);
  assert.equal(r.body.scope, 'audit.read oauth.clients.read');
  assert.equal((await t.request('GET', '/api/public/v1/admin/oauth/clients', { token: r.body.access_token })).status, 200);
});

test('attack: code reuse is refused and revokes the token it issued', async () => {
  const loc = await approve(await pkceS256Challenge(verifier));
  const code = loc.searchParams.get('code')!;
  const first = await exchange(code);
  assert.equal(first.status, 200);
  const again = await exchange(code);
  assert.equal(again.status, 400);
  assert.equal(again.body.error, 'invalid_grant');
  const use = await t.request('GET', '/api/public/v1/admin/oauth/clients', { token: first.body.access_token });
  assert.equal(use.status, 401);
  assert.equal(use.body.details.reason, 'revoked');
  const audit = await t.request('GET', '/api/public/v1/admin/audit', { token: t.adminKey });
  assert.ok(
    audit.body.entries.some((e: { action: string; outcome: string }) => e.action === 'oauth.code.reuse' && e.outcome === 'refused'),
    'code reuse is audited',
  );
});

test('attack: PKCE mismatch is refused', async () => {
  const loc = await approve(await pkceS256Challenge(verifier));
  const r = await exchange(loc.searchParams.get('code')!, { code_verifier: 'w'.repeat(50) });
  assert.equal(r.status, 400);
  assert.equal(r.body.error, 'invalid_grant');
});

test('attack: redirect_uri mismatch is refused at the token endpoint and at the authorization endpoint', async () => {
  const loc = await approve(await pkceS256Challenge(verifier));
  const r = await exchange(loc.searchParams.get('code')!, { redirect_uri: REDIRECT + '/x' });
  assert.equal(r.body.error, 'invalid_grant');
  const b = await signIn(t, 'alice');
  const page = await b.get(authorizeUrl({ redirect_uri: 'http://127.0.0.1:9/callback/evil' }, await pkceS256Challenge(verifier)));
  assert.equal(page.status, 400);
  assert.equal(page.headers.get('location'), null); // never redirected to an unregistered URI
});

test('PKCE plain or missing is refused with a redirect error; expired codes are refused', async () => {
  const b = await signIn(t, 'alice');
  const plain = await b.get(authorizeUrl({ code_challenge_method: 'plain' }, verifier.slice(0, 43)));
  assert.equal(plain.status, 303);
  const l = new URL(plain.headers.get('location')!);
  assert.equal(l.searchParams.get('error'), 'invalid_request');
  assert.equal(l.searchParams.get('state'), 'st-123');
  const loc = await approve(await pkceS256Challenge(verifier));
  t.clock.advance(61_000);
  const r = await exchange(loc.searchParams.get('code')!);
  assert.equal(r.body.error, 'invalid_grant');
});

test('deny gives access_denied; consent POST without session or with a bad CSRF token is refused', async () => {
  const b = await signIn(t, 'alice');
  const consent = await b.get(authorizeUrl({}, await pkceS256Challenge(verifier)));
  const h = hiddenFields(consent.text);
  const deny = await b.post('/oauth/authorize', { ...h, decision: 'deny' });
  assert.equal(new URL(deny.headers.get('location')!).searchParams.get('error'), 'access_denied');
  const csrf = await b.post('/oauth/authorize', { ...h, csrf: 'forged', decision: 'approve' });
  assert.equal(csrf.status, 403);
  const anon = await browserish(t).post('/oauth/authorize', { ...h, decision: 'approve' });
  assert.equal(anon.status, 401);
});

test('wrong password shows the login page again with 401', async () => {
  const b = browserish(t);
  const page = await b.get('/oauth/login');
  const r = await b.post('/oauth/login', { ...hiddenFields(page.text), username: 'alice', password: 'wrong password!!' });
  assert.equal(r.status, 401);
  assert.match(r.text, /Wrong user name or password/);
});
