// The token-forgery rows of the attack matrix, through the real bearer path
// (gateway authn gate, envelope 401): alg none, HS256 keyed with the public
// JWK, expired, wrong iss, wrong aud, foreign key. (DPoP rows: dpop.test.ts;
// code and device rows: authorization-code.test.ts, device.test.ts.)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { base64url, generateKeyPair, SignJWT } from 'jose';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { basic, claimsOf, createService, form, registerClient } from '../../helpers/oauth.ts';

const RES = '/api/public/v1/admin/oauth/clients';
let t: InProcess;
let good: Record<string, any>;

before(async () => {
  t = await inProcessCell();
  const svc = await createService(t, 'matrix', ['viewer']);
  const c = await registerClient(t, { name: 'matrix', scope: ['oauth.clients.read'], subject_id: svc });
  const r = await form(t, '/oauth/token', { grant_type: 'client_credentials' }, basic(c.client_id, c.client_secret!));
  good = claimsOf(r.body.access_token);
  assert.equal((await t.request('GET', RES, { token: r.body.access_token })).status, 200);
});
after(async () => {
  await t.close();
});

async function refused(token: string, reason: string) {
  const r = await t.request('GET', RES, { token });
  assert.equal(r.status, 401, r.text);
  assert.equal(r.body.error, 'unauthorized');
  assert.equal(r.body.details.reason, reason);
}

const signWithCellKey = (claims: Record<string, unknown>) =>
  new SignJWT({ ...good, jti: crypto.randomUUID(), ...claims })
    .setProtectedHeader({ alg: 'EdDSA', typ: 'at+jwt', kid: t.modules.oauth.api.keyring().active.kid })
    .sign(t.modules.oauth.api.keyring().active.key);

test('attack: alg none', async () => {
  const h = base64url.encode(JSON.stringify({ alg: 'none', typ: 'at+jwt' }));
  await refused(`${h}.${base64url.encode(JSON.stringify(good))}.`, 'bad_alg');
});

test('attack: HS256 signed with the public key', async () => {
  const jwks = (await t.request('GET', '/oauth/jwks.json')).text;
  const pub = JSON.stringify((JSON.parse(jwks) as { keys: unknown[] }).keys[0]);
  const tok = await new SignJWT(good)
    .setProtectedHeader({ alg: 'HS256', typ: 'at+jwt', kid: t.modules.oauth.api.keyring().active.kid })
    .sign(new TextEncoder().encode(pub));
  await refused(tok, 'bad_alg');
});

test('attack: expired token', async () => {
  const now = Math.floor(t.clock.now() / 1000);
  await refused(await signWithCellKey({ iat: now - 700, exp: now - 100 }), 'expired');
});

test('attack: wrong issuer', async () => {
  await refused(await signWithCellKey({ iss: 'service://another-cell' }), 'bad_issuer');
});

test('attack: wrong audience', async () => {
  await refused(await signWithCellKey({ aud: 'http://elsewhere/api/public/v1' }), 'bad_audience');
});

test('attack: a key not in the key set', async () => {
  const kp = await generateKeyPair('EdDSA');
  const tok = await new SignJWT(good)
    .setProtectedHeader({ alg: 'EdDSA', typ: 'at+jwt', kid: t.modules.oauth.api.keyring().active.kid })
    .sign(kp.privateKey);
  await refused(tok, 'bad_signature');
});

test('a token signed correctly with the cell key and the right claims is accepted (the forgeries above differ by one field)', async () => {
  const r = await t.request('GET', RES, { token: await signWithCellKey({}) });
  assert.equal(r.status, 200);
});
