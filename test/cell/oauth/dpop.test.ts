// DPoP (RFC 9449) at the token endpoint and on the bearer path: binding, and the attack matrix, one test each.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { accessTokenHash } from '../../../core/tokens/ath.ts';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { basic, claimsOf, createService, form, registerClient } from '../../helpers/oauth.ts';

const BASE = 'http://127.0.0.1:8080';
const RES = '/api/public/v1/admin/oauth/clients';
let t: InProcess;
let auth: Record<string, string>;
let key: { privateKey: CryptoKey; jwk: JWK; jkt: string };

async function newKey() {
  const kp = await generateKeyPair('Ed25519');
  const jwk = await exportJWK(kp.publicKey);
  return { privateKey: kp.privateKey, jwk, jkt: await calculateJwkThumbprint(jwk) };
}

async function proof(k: typeof key, htm: string, htu: string, extra: Record<string, unknown> = {}) {
  return new SignJWT({ htm, htu, iat: Math.floor(t.clock.now() / 1000), jti: crypto.randomUUID(), ...extra })
    .setProtectedHeader({ alg: 'Ed25519', typ: 'dpop+jwt', jwk: k.jwk })
    .sign(k.privateKey);
}

async function boundToken(): Promise<string> {
  const r = await form(
    t,
    '/oauth/token',
    { grant_type: 'client_credentials' },
    { ...auth, dpop: await proof(key, 'POST', `${BASE}/oauth/token`) },
  );
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.token_type, 'DPoP');
  return r.body.access_token;
}

async function call(token: string, headers: Record<string, string>, scheme = 'DPoP') {
  return t.request('GET', RES, { headers: { authorization: `${scheme} ${token}`, ...headers } });
}

before(async () => {
  t = await inProcessCell();
  const svc = await createService(t, 'dpop-robot', ['viewer']);
  const c = await registerClient(t, { name: 'dpop', scope: ['oauth.clients.read'], subject_id: svc });
  auth = basic(c.client_id, c.client_secret!);
  key = await newKey();
});
after(async () => {
  await t.close();
});

test('a DPoP proof at the token endpoint binds the token (cnf.jkt) and a valid proof is honoured', async () => {
  const tok = await boundToken();
  assert.equal(claimsOf(tok).cnf.jkt, key.jkt);
  const r = await call(tok, { dpop: await proof(key, 'GET', BASE + RES, { ath: await accessTokenHash(tok) }) });
  assert.equal(r.status, 200, r.text);
});

test('an invalid proof at the token endpoint is refused with invalid_dpop_proof', async () => {
  const r = await form(
    t,
    '/oauth/token',
    { grant_type: 'client_credentials' },
    { ...auth, dpop: await proof(key, 'GET', `${BASE}/oauth/token`) },
  );
  assert.equal(r.status, 400);
  assert.equal(r.body.error, 'invalid_dpop_proof');
});

test('attack: DPoP proof replay is refused', async () => {
  const tok = await boundToken();
  const p = await proof(key, 'GET', BASE + RES, { ath: await accessTokenHash(tok) });
  assert.equal((await call(tok, { dpop: p })).status, 200);
  const r = await call(tok, { dpop: p });
  assert.equal(r.status, 401);
  assert.equal(r.body.details.reason, 'dpop_replay');
});

test('attack: stale iat is refused', async () => {
  const tok = await boundToken();
  const r = await call(tok, {
    dpop: await proof(key, 'GET', BASE + RES, { ath: await accessTokenHash(tok), iat: Math.floor(t.clock.now() / 1000) - 120 }),
  });
  assert.equal(r.status, 401);
  assert.equal(r.body.details.reason, 'dpop_stale');
});

test('attack: wrong htm is refused', async () => {
  const tok = await boundToken();
  const r = await call(tok, { dpop: await proof(key, 'POST', BASE + RES, { ath: await accessTokenHash(tok) }) });
  assert.equal(r.status, 401);
  assert.equal(r.body.details.reason, 'dpop_htm_mismatch');
});

test('attack: wrong htu is refused', async () => {
  const tok = await boundToken();
  const r = await call(tok, { dpop: await proof(key, 'GET', `${BASE}/api/public/v1/admin/audit`, { ath: await accessTokenHash(tok) }) });
  assert.equal(r.status, 401);
  assert.equal(r.body.details.reason, 'dpop_htu_mismatch');
});

test('attack: htu matching X-Forwarded-Host/Proto is refused (the cell never reads them)', async () => {
  const tok = await boundToken();
  const r = await call(tok, {
    'x-forwarded-host': 'proxy.example',
    'x-forwarded-proto': 'https',
    host: 'proxy.example',
    dpop: await proof(key, 'GET', `https://proxy.example${RES}`, { ath: await accessTokenHash(tok) }),
  });
  assert.equal(r.status, 401);
  assert.equal(r.body.details.reason, 'dpop_htu_mismatch');
});

test('attack: a proof signed by another key is refused', async () => {
  const tok = await boundToken();
  const other = await newKey();
  const r = await call(tok, { dpop: await proof(other, 'GET', BASE + RES, { ath: await accessTokenHash(tok) }) });
  assert.equal(r.status, 401);
  assert.equal(r.body.details.reason, 'dpop_key_mismatch');
});

test('attack: a bound token without a proof is refused, with either scheme', async () => {
  const tok = await boundToken();
  const r = await call(tok, {});
  assert.equal(r.status, 401);
  assert.equal(r.body.details.reason, 'dpop_required');
  const b = await call(tok, {}, 'Bearer');
  assert.equal(b.status, 401);
  assert.equal(b.body.details.reason, 'dpop_required');
  assert.match(r.headers.get('www-authenticate') ?? '', /^DPoP /);
});

test('a proof without ath (or for another token) is refused', async () => {
  const tok = await boundToken();
  const r = await call(tok, { dpop: await proof(key, 'GET', BASE + RES) });
  assert.equal(r.status, 401);
  assert.equal(r.body.details.reason, 'dpop_ath_mismatch');
});

test('a plain bearer token needs no proof; DPoP scheme with an unbound token is refused', async () => {
  const r = await form(t, '/oauth/token', { grant_type: 'client_credentials' }, auth);
  assert.equal(r.body.token_type, 'Bearer');
  assert.equal((await call(r.body.access_token, {}, 'Bearer')).status, 200);
  assert.equal((await call(r.body.access_token, {}, 'DPoP')).status, 401);
});
