// Access-token verification: every check refuses with its own code.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createLocalJWKSet, exportJWK, generateKeyPair, SignJWT, base64url } from 'jose';
import { verifyAccessToken, looksLikeJwt } from '../../../core/tokens/access-token.ts';
import { isTokenError } from '../../../core/tokens/errors.ts';

const NOW = Date.UTC(2026, 0, 1);
const ISS = 'service://cell-test';
const AUD = 'http://127.0.0.1:1/api/public/v1';

async function setup() {
  const { privateKey, publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'EdDSA', use: 'sig' };
  const keys = createLocalJWKSet({ keys: [jwk] });
  const sign = (claims: Record<string, unknown>, header: Record<string, unknown> = {}) =>
    new SignJWT({
      iss: ISS,
      aud: AUD,
      sub: 'usr_1',
      client_id: 'c1',
      scope: 'catalog.read',
      jti: 'j1',
      iat: NOW / 1000,
      exp: NOW / 1000 + 600,
      ...claims,
    })
      .setProtectedHeader({ alg: 'EdDSA', typ: 'at+jwt', kid: 'k1', ...header })
      .sign(privateKey);
  return { keys, sign, jwk };
}

async function code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'accepted';
  } catch (e) {
    assert.ok(isTokenError(e), String(e));
    return e.code;
  }
}

test('a well-formed token verifies and returns its claims', async () => {
  const { keys, sign } = await setup();
  const c = await verifyAccessToken(await sign({}), { keys, issuer: ISS, audience: AUD, now: NOW });
  assert.equal(c.sub, 'usr_1');
  assert.equal(c.scope, 'catalog.read');
  assert.equal(looksLikeJwt('svck_live_abc'), false);
});

test('alg none is refused', async () => {
  const { keys } = await setup();
  const h = base64url.encode(JSON.stringify({ alg: 'none', typ: 'at+jwt' }));
  const p = base64url.encode(
    JSON.stringify({ iss: ISS, aud: AUD, sub: 'x', client_id: 'c', scope: '*', jti: 'j', iat: NOW / 1000, exp: NOW / 1000 + 60 }),
  );
  assert.equal(await code(verifyAccessToken(`${h}.${p}.`, { keys, issuer: ISS, audience: AUD, now: NOW })), 'bad_alg');
});

test('HS256 signed with the public key is refused', async () => {
  const { keys, jwk } = await setup();
  const secret = new TextEncoder().encode(JSON.stringify(jwk));
  const t = await new SignJWT({ iss: ISS, aud: AUD, sub: 'x', client_id: 'c', scope: '*', jti: 'j', iat: NOW / 1000, exp: NOW / 1000 + 60 })
    .setProtectedHeader({ alg: 'HS256', typ: 'at+jwt', kid: 'k1' })
    .sign(secret);
  assert.equal(await code(verifyAccessToken(t, { keys, issuer: ISS, audience: AUD, now: NOW })), 'bad_alg');
});

test('a token signed by a foreign key is refused', async () => {
  const { keys } = await setup();
  const other = await setup();
  assert.equal(await code(verifyAccessToken(await other.sign({}), { keys, issuer: ISS, audience: AUD, now: NOW })), 'bad_signature');
});

test('expired, wrong iss, wrong aud, wrong typ, revoked are refused', async () => {
  const { keys, sign } = await setup();
  const o = { keys, issuer: ISS, audience: AUD, now: NOW };
  assert.equal(await code(verifyAccessToken(await sign({ exp: NOW / 1000 - 1 }), o)), 'expired');
  assert.equal(await code(verifyAccessToken(await sign({ iss: 'service://other' }), o)), 'bad_issuer');
  // A group's set (`service://<group id>` and its declared issuer URLs): any member is accepted, nothing else.
  const group = { ...o, issuer: [ISS, 'https://auth.example.test'] };
  assert.equal((await verifyAccessToken(await sign({ iss: 'https://auth.example.test' }), group)).iss, 'https://auth.example.test');
  assert.equal((await verifyAccessToken(await sign({}), group)).iss, ISS);
  for (const iss of ['https://auth.example.test/', 'https://evil.example.test', 'service://other'])
    assert.equal(await code(verifyAccessToken(await sign({ iss }), group)), 'bad_issuer', iss);
  assert.equal(await code(verifyAccessToken(await sign({}), { ...o, issuer: [] })), 'bad_issuer', 'an empty set accepts nothing');
  assert.equal(await code(verifyAccessToken(await sign({ aud: 'http://evil/api/public/v1' }), o)), 'bad_audience');
  assert.equal(await code(verifyAccessToken(await sign({}, { typ: 'JWT' }), o)), 'bad_typ');
  assert.equal(await code(verifyAccessToken(await sign({}), { ...o, isRevoked: (j) => j === 'j1' })), 'revoked');
  assert.equal(await code(verifyAccessToken(await sign({ client_id: undefined }), o)), 'missing_claim');
});
