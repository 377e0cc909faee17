// core's one token judgement (core/tokens/judge.ts): the order of checks, the verified-token cache,
// the lookups (sync or async), key-derived tokens, and what is thrown rather than refused.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { calculateJwkThumbprint, createLocalJWKSet, exportJWK, generateKeyPair, SignJWT, type JWTVerifyGetKey } from 'jose';
import { judgeAccessToken, type TokenJudgeConfig, type TokenRequestFacts } from '../../../core/tokens/judge.ts';
import { VerifiedTokenCache } from '../../../core/tokens/cache.ts';
import { MemoryReplayCache } from '../../../core/tokens/replay.ts';
import { accessTokenHash } from '../../../core/tokens/ath.ts';
import { verifyAccessToken } from '../../../core/tokens/access-token.ts';
import { DpopKeyCache } from '../../../core/tokens/dpop.ts';
import { nodeProofSignatures } from '../../../runtime/proof-signature.ts';

const NOW = Date.UTC(2026, 0, 1);
const ISS = 'service://cell-test';
const AUD = 'edge:device-1';
const URI = 'https://device.local:8443/api/public/v1/edge/status';

async function world() {
  const { privateKey, publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'EdDSA', use: 'sig' };
  const set = createLocalJWKSet({ keys: [jwk] });
  let keyLookups = 0;
  const keys: JWTVerifyGetKey = (h, t) => {
    keyLookups++;
    return set(h, t);
  };
  const sign = (claims: Record<string, unknown> = {}) =>
    new SignJWT({
      iss: ISS,
      aud: AUD,
      sub: 'usr_1',
      client_id: 'ocl_1',
      scope: 'edge.read catalog',
      jti: crypto.randomUUID(),
      iat: NOW / 1000,
      exp: NOW / 1000 + 600,
      ...claims,
    })
      .setProtectedHeader({ alg: 'EdDSA', typ: 'at+jwt', kid: 'k1' })
      .sign(privateKey);
  const revoked = new Set<string>();
  const subjects = new Map<string, { id: string; status: string; permissions: string[] }>([
    ['usr_1', { id: 'usr_1', status: 'active', permissions: ['edge', 'iam.keys.read'] }],
  ]);
  const apiKeys = new Map<string, { status: string; expires_at: number | null; rate_limit_rpm: number | null }>();
  const config: TokenJudgeConfig = {
    keys,
    issuer: ISS,
    audience: AUD,
    replay: new MemoryReplayCache(),
    cache: new VerifiedTokenCache(),
    isRevoked: (j) => revoked.has(j),
    subject: (id) => subjects.get(id) ?? null,
    apiKey: (id) => apiKeys.get(id) ?? null,
  };
  return { sign, config, revoked, subjects, apiKeys, lookups: () => keyLookups };
}

const facts = (over: Partial<TokenRequestFacts> = {}): TokenRequestFacts => ({
  scheme: 'bearer',
  method: 'GET',
  uri: URI,
  dpop: null,
  certThumbprint: () => null,
  now: NOW,
  ...over,
});

test("a good token: effective = the subject's permissions ∩ the scope; an oauth credential named by its jti", async () => {
  const w = await world();
  const tk = await w.sign();
  const v = await judgeAccessToken(tk, facts(), w.config);
  assert.ok(v.ok);
  assert.deepEqual(v.effective, ['edge.read']);
  assert.deepEqual(v.scopes, ['edge.read', 'catalog']);
  assert.deepEqual(v.credential, {
    type: 'oauth',
    id: v.claims.jti,
    root: `token:${v.claims.jti}`,
    clientId: 'ocl_1',
    rateLimitRpm: null,
    rootKey: null,
    actors: [],
    linkKeys: [],
  });
});

test("an empty scope grants nothing (never the subject's whole authority)", async () => {
  const w = await world();
  const v = await judgeAccessToken(await w.sign({ scope: '' }), facts(), w.config);
  assert.ok(v.ok);
  assert.deepEqual(v.effective, []);
});

test('the verified-token cache: verified once, then exp, the denylist and the subject on every hit', async () => {
  const w = await world();
  const tk = await w.sign();
  assert.ok((await judgeAccessToken(tk, facts(), w.config)).ok);
  assert.ok((await judgeAccessToken(tk, facts(), w.config)).ok);
  assert.equal(w.lookups(), 1, 'the signature was verified once');
  w.subjects.set('usr_1', { id: 'usr_1', status: 'archived', permissions: [] });
  assert.deepEqual(await judgeAccessToken(tk, facts(), w.config), {
    ok: false,
    code: 'revoked',
    message: 'the token subject is not active',
  });
  w.subjects.set('usr_1', { id: 'usr_1', status: 'active', permissions: ['edge'] });
  w.revoked.add((await verifyAccessToken(tk, { keys: w.config.keys, issuer: ISS, audience: AUD, now: NOW })).jti);
  assert.equal(((await judgeAccessToken(tk, facts(), w.config)) as { code: string }).code, 'revoked');
  w.revoked.clear();
  assert.equal(((await judgeAccessToken(tk, facts({ now: NOW + 600_000 }), w.config)) as { code: string }).code, 'expired');
  assert.equal(w.config.cache!.size, 0, 'an expired hit leaves the cache');
});

test('the verified-token cache re-checks the accepted issuers on a hit (a group retired an issuer URL)', async () => {
  const w = await world();
  const url = 'https://auth.example.test';
  const config = { ...w.config, issuer: [ISS, url] };
  const tk = await w.sign({ iss: url });
  assert.ok((await judgeAccessToken(tk, facts(), config)).ok);
  assert.ok((await judgeAccessToken(tk, facts(), config)).ok);
  assert.equal(w.lookups(), 1, 'served from the cache');
  assert.deepEqual(await judgeAccessToken(tk, facts(), { ...config, issuer: [ISS] }), {
    ok: false,
    code: 'bad_issuer',
    message: 'unexpected issuer',
  });
  assert.equal(config.cache!.size, 0, 'the refused hit leaves the cache');
});

test('an unknown subject is refused as revoked', async () => {
  const w = await world();
  assert.equal(((await judgeAccessToken(await w.sign({ sub: 'usr_gone' }), facts(), w.config)) as { code: string }).code, 'revoked');
});

test('a token obtained with an API key lives with that key and carries its rpm', async () => {
  const w = await world();
  const keyId = 'key_0123456789abcdef0123';
  const tk = await w.sign({ client_id: keyId });
  const sat = await w.sign({ client_id: `sat:api_key:${keyId}`, sat: true });
  assert.equal(((await judgeAccessToken(tk, facts(), w.config)) as { code: string }).code, 'revoked', 'key unknown');
  w.apiKeys.set(keyId, { status: 'active', expires_at: null, rate_limit_rpm: 60 });
  const v = await judgeAccessToken(tk, facts(), w.config);
  assert.ok(v.ok);
  assert.deepEqual(v.credential, {
    type: 'oauth',
    id: v.claims.jti,
    root: `api_key:${keyId}`,
    clientId: keyId,
    rateLimitRpm: 60,
    rootKey: { status: 'active', expires_at: null, rate_limit_rpm: 60 },
    actors: [],
    linkKeys: [],
  });
  const s = await judgeAccessToken(sat, facts(), w.config);
  assert.ok(s.ok);
  assert.equal(s.credential.type, 'sat');
  assert.equal(s.credential.root, `api_key:${keyId}`, 'a legacy SAT of a key (no root claim) is rooted in the key');
  // The root claim, where present, is what counts: a SAT of a key-derived token.
  const chained = await w.sign({ client_id: 'sat:oauth:whatever', sat: true, root: `api_key:${keyId}` });
  const cv = await judgeAccessToken(chained, facts(), w.config);
  assert.ok(cv.ok);
  assert.equal(cv.credential.root, `api_key:${keyId}`);
  assert.equal(cv.credential.rateLimitRpm, 60);
  w.apiKeys.set(keyId, { status: 'active', expires_at: NOW, rate_limit_rpm: 60 });
  assert.equal(((await judgeAccessToken(tk, facts(), w.config)) as { code: string }).code, 'revoked', 'key expired');
  w.apiKeys.set(keyId, { status: 'revoked', expires_at: null, rate_limit_rpm: 60 });
  assert.equal(((await judgeAccessToken(sat, facts(), w.config)) as { code: string }).code, 'revoked', 'key revoked');
  assert.equal(((await judgeAccessToken(chained, facts(), w.config)) as { code: string }).code, 'revoked', 'root key revoked');
});

test("a token rooted in another token dies when that token is revoked; a deleted client's tokens die", async () => {
  const w = await world();
  const parent = await w.sign({ client_id: 'ocl_1' });
  const parentJti = ((await judgeAccessToken(parent, facts(), w.config)) as { claims: { jti: string } }).claims.jti;
  const child = await w.sign({ client_id: 'sat:oauth:x', sat: true, root: `token:${parentJti}` });
  assert.ok((await judgeAccessToken(child, facts(), w.config)).ok);
  w.revoked.add(parentJti);
  assert.equal(((await judgeAccessToken(child, facts(), w.config)) as { code: string }).code, 'revoked');
  const gone = await w.sign({ client_id: 'ocl_gone' });
  const withClients: TokenJudgeConfig = { ...w.config, clientExists: (id) => id !== 'ocl_gone' };
  assert.equal(((await judgeAccessToken(gone, facts(), withClients)) as { code: string }).code, 'revoked');
  assert.ok((await judgeAccessToken(gone, { now: NOW }, withClients)).ok === false, 'introspection (no request) gives the same verdict');
  const bogus = await w.sign({ client_id: 'ocl_1', root: 'nonsense' });
  assert.equal(((await judgeAccessToken(bogus, facts(), w.config)) as { code: string }).code, 'malformed_token');
});

test('lookups may answer with promises (the store is becoming asynchronous)', async () => {
  const w = await world();
  const asyncConfig: TokenJudgeConfig = {
    ...w.config,
    isRevoked: async () => false,
    subject: async (id) => ({ id, status: 'active', permissions: ['edge.read'] }),
    apiKey: async () => null,
  };
  const v = await judgeAccessToken(await w.sign(), facts(), asyncConfig);
  assert.ok(v.ok);
  const r = await judgeAccessToken(await w.sign(), facts(), { ...asyncConfig, isRevoked: async () => true });
  assert.equal((r as { code: string }).code, 'revoked');
});

test('DPoP: the scheme and the binding go together; the proof is checked against the request facts', async () => {
  const w = await world();
  const kp = await generateKeyPair('Ed25519', { extractable: true });
  const jwk = await exportJWK(kp.publicKey);
  const jkt = await calculateJwkThumbprint(jwk);
  const bound = await w.sign({ cnf: { jkt } });
  const plain = await w.sign();
  const proof = async (tk: string, htu = URI) =>
    new SignJWT({ htm: 'GET', htu, iat: NOW / 1000, jti: crypto.randomUUID(), ath: await accessTokenHash(tk) })
      .setProtectedHeader({ alg: 'EdDSA', typ: 'dpop+jwt', jwk })
      .sign(kp.privateKey);
  const code = async (tk: string, f: Partial<TokenRequestFacts>) => {
    const v = await judgeAccessToken(tk, facts(f), w.config);
    return v.ok ? 'ok' : v.code;
  };
  assert.equal(await code(bound, { scheme: 'dpop', dpop: await proof(bound) }), 'ok');
  assert.equal(await code(bound, { scheme: 'bearer', dpop: await proof(bound) }), 'dpop_required');
  assert.equal(await code(bound, { scheme: 'dpop' }), 'dpop_required');
  assert.equal(await code(bound, { scheme: 'dpop', dpop: '' }), 'dpop_invalid');
  assert.equal(
    await code(bound, { scheme: 'dpop', dpop: await proof(bound, 'http://device.local:8443/api/public/v1/edge/status') }),
    'dpop_htu_mismatch',
    'another scheme',
  );
  assert.equal(await code(plain, { scheme: 'dpop', dpop: await proof(plain) }), 'dpop_invalid');
  const p = await proof(bound);
  assert.equal(await code(bound, { scheme: 'dpop', dpop: p }), 'ok');
  assert.equal(await code(bound, { scheme: 'dpop', dpop: p }), 'dpop_replay');
});

test("DPoP: each token's ath is its own, with the verified-token cache keeping it and the proof keys cached", async () => {
  const w = await world();
  const config = { ...w.config, dpopKeys: new DpopKeyCache({ native: nodeProofSignatures }) };
  const kp = await generateKeyPair('Ed25519', { extractable: true });
  const jwk = await exportJWK(kp.publicKey);
  const jkt = await calculateJwkThumbprint(jwk);
  const [a, b] = [await w.sign({ cnf: { jkt } }), await w.sign({ cnf: { jkt } })];
  const proof = async (athOf: string) =>
    new SignJWT({ htm: 'GET', htu: URI, iat: NOW / 1000, jti: crypto.randomUUID(), ath: await accessTokenHash(athOf) })
      .setProtectedHeader({ alg: 'EdDSA', typ: 'dpop+jwt', jwk })
      .sign(kp.privateKey);
  const code = async (tk: string, p: string) => {
    const v = await judgeAccessToken(tk, facts({ scheme: 'dpop', dpop: p }), config);
    return v.ok ? 'ok' : v.code;
  };
  // Twice each, so the second of each is judged with its token's ath and the proof key from the caches.
  for (let i = 0; i < 2; i++) {
    assert.equal(await code(a, await proof(a)), 'ok');
    assert.equal(await code(b, await proof(b)), 'ok');
    assert.equal(await code(a, await proof(b)), 'dpop_ath_mismatch');
    assert.equal(await code(b, await proof(a)), 'dpop_ath_mismatch');
  }
  assert.equal(config.cache!.ath(a), await accessTokenHash(a));
  assert.equal(config.cache!.ath(b), await accessTokenHash(b));
});

test('certificate binding asks the host for the leaf only when the token is bound', async () => {
  const w = await world();
  let asked = 0;
  const leaf = (tp: string | null) => () => {
    asked++;
    return tp;
  };
  assert.ok((await judgeAccessToken(await w.sign(), facts({ certThumbprint: leaf('x') }), w.config)).ok);
  assert.equal(asked, 0);
  const bound = await w.sign({ cnf: { 'x5t#S256': 'abc' } });
  assert.ok((await judgeAccessToken(bound, facts({ certThumbprint: leaf('abc') }), w.config)).ok);
  assert.equal(
    ((await judgeAccessToken(bound, facts({ certThumbprint: leaf(null) }), w.config)) as { code: string }).code,
    'cert_required',
  );
  assert.equal(
    ((await judgeAccessToken(bound, facts({ certThumbprint: async () => 'abd' }), w.config)) as { code: string }).code,
    'cert_mismatch',
  );
  assert.equal(asked, 2);
});

test('a replay cache that cannot record is thrown, not turned into a token refusal (the host fails closed)', async () => {
  const w = await world();
  const kp = await generateKeyPair('Ed25519', { extractable: true });
  const jwk = await exportJWK(kp.publicKey);
  const bound = await w.sign({ cnf: { jkt: await calculateJwkThumbprint(jwk) } });
  const proof = await new SignJWT({ htm: 'GET', htu: URI, iat: NOW / 1000, jti: crypto.randomUUID(), ath: await accessTokenHash(bound) })
    .setProtectedHeader({ alg: 'EdDSA', typ: 'dpop+jwt', jwk })
    .sign(kp.privateKey);
  const broken = {
    remember: async () => {
      throw new Error('disk full');
    },
  };
  await assert.rejects(judgeAccessToken(bound, facts({ scheme: 'dpop', dpop: proof }), { ...w.config, replay: broken }), /disk full/);
});

test('verifyAccessToken: the audience may be a test (the authorization server accepts each audience it issues for)', async () => {
  const w = await world();
  const tk = await w.sign({ aud: 'edge:device-2' });
  const c = await verifyAccessToken(tk, { keys: w.config.keys, issuer: ISS, audience: (a) => a.startsWith('edge:'), now: NOW });
  assert.equal(c.aud, 'edge:device-2');
  await assert.rejects(
    verifyAccessToken(tk, { keys: w.config.keys, issuer: ISS, audience: AUD, now: NOW }),
    (e: { code?: string }) => e.code === 'bad_audience',
  );
});
