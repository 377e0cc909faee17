// DPoP proof verification (RFC 9449 §4.3) and cnf binding checks: one test per refusal.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT } from 'jose';
import { DpopKeyCache, verifyDpopProof } from '../../../core/tokens/dpop.ts';
import { accessTokenHash } from '../../../core/tokens/ath.ts';
import { checkConfirmation } from '../../../core/tokens/cnf.ts';
import { MemoryReplayCache } from '../../../core/tokens/replay.ts';
import { isTokenError } from '../../../core/tokens/errors.ts';
import { nodeProofSignatures } from '../../../runtime/proof-signature.ts';

const NOW = Date.UTC(2026, 0, 1);
const HTU = 'http://127.0.0.1:8080/api/public/v1/admin/audit';

async function keyPair(alg: 'EdDSA' | 'ES256' | 'ES384' | 'RS256' = 'EdDSA') {
  const kp = await generateKeyPair(alg, { extractable: true });
  const jwk = await exportJWK(kp.publicKey);
  return { ...kp, jwk, jkt: await calculateJwkThumbprint(jwk) };
}

async function proof(
  k: Awaited<ReturnType<typeof keyPair>>,
  claims: Record<string, unknown>,
  header: Record<string, unknown> = {},
  alg = 'EdDSA',
) {
  return new SignJWT({ htm: 'GET', htu: HTU, iat: NOW / 1000, jti: crypto.randomUUID(), ...claims })
    .setProtectedHeader({ alg, typ: 'dpop+jwt', jwk: k.jwk, ...header })
    .sign(k.privateKey);
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

const opts = (replay = new MemoryReplayCache()) => ({ htm: 'GET', htu: HTU, now: NOW, replay });

test('a valid proof verifies (EdDSA, Ed25519 alg name, ES256) and yields the key thumbprint', async () => {
  const k = await keyPair();
  const r = await verifyDpopProof(await proof(k, {}), opts());
  assert.equal(r.jkt, k.jkt);
  assert.equal((await verifyDpopProof(await proof(k, {}, { alg: 'Ed25519' }, 'Ed25519'), opts())).jkt, k.jkt);
  const e = await keyPair('ES256');
  assert.equal((await verifyDpopProof(await proof(e, {}, {}, 'ES256'), opts())).jkt, e.jkt);
});

test('replay of the same proof is refused', async () => {
  const k = await keyPair();
  const p = await proof(k, {});
  const replay = new MemoryReplayCache();
  await verifyDpopProof(p, opts(replay));
  assert.equal(await code(verifyDpopProof(p, opts(replay))), 'dpop_replay');
});

test('stale and future iat are refused', async () => {
  const k = await keyPair();
  assert.equal(await code(verifyDpopProof(await proof(k, { iat: NOW / 1000 - 61 }), opts())), 'dpop_stale');
  assert.equal(await code(verifyDpopProof(await proof(k, { iat: NOW / 1000 + 6 }), opts())), 'dpop_stale');
  assert.equal(await code(verifyDpopProof(await proof(k, { iat: NOW / 1000 - 59 }), opts())), 'accepted');
});

test('wrong htm and wrong htu are refused; query is ignored', async () => {
  const k = await keyPair();
  assert.equal(await code(verifyDpopProof(await proof(k, { htm: 'POST' }), opts())), 'dpop_htm_mismatch');
  assert.equal(
    await code(verifyDpopProof(await proof(k, { htu: 'http://evil.example/api/public/v1/admin/audit' }), opts())),
    'dpop_htu_mismatch',
  );
  assert.equal(await code(verifyDpopProof(await proof(k, { htu: HTU + '?x=1' }), opts())), 'accepted');
});

test('ath must bind the presented access token', async () => {
  const k = await keyPair();
  const ok = await proof(k, { ath: await accessTokenHash('token-a') });
  assert.equal(await code(verifyDpopProof(ok, { ...opts(), accessToken: 'token-a' })), 'accepted');
  const bad = await proof(k, { ath: await accessTokenHash('token-b') });
  assert.equal(await code(verifyDpopProof(bad, { ...opts(), accessToken: 'token-a' })), 'dpop_ath_mismatch');
  assert.equal(await code(verifyDpopProof(await proof(k, {}), { ...opts(), accessToken: 'token-a' })), 'dpop_ath_mismatch');
});

test('wrong typ, symmetric alg, private embedded key and bad signature are refused', async () => {
  const k = await keyPair();
  assert.equal(await code(verifyDpopProof(await proof(k, {}, { typ: 'JWT' }), opts())), 'dpop_invalid');
  const secret = new Uint8Array(32);
  const hs = await new SignJWT({ htm: 'GET', htu: HTU, iat: NOW / 1000, jti: crypto.randomUUID() })
    .setProtectedHeader({ alg: 'HS256', typ: 'dpop+jwt', jwk: { kty: 'oct', k: 'AAAA' } as never })
    .sign(secret);
  assert.equal(await code(verifyDpopProof(hs, opts())), 'dpop_bad_alg');
  const priv = await exportJWK(k.privateKey);
  assert.equal(await code(verifyDpopProof(await proof(k, {}, { jwk: priv as never }), opts())), 'dpop_bad_key');
  const other = await keyPair();
  assert.equal(await code(verifyDpopProof(await proof(k, {}, { jwk: other.jwk }), opts())), 'dpop_invalid');
});

test('cnf: bound token needs the matching proof key and certificate', () => {
  const c = (cnf: Parameters<typeof checkConfirmation>[0], p: Parameters<typeof checkConfirmation>[1]) => {
    try {
      checkConfirmation(cnf, p);
      return 'accepted';
    } catch (e) {
      assert.ok(isTokenError(e));
      return e.code;
    }
  };
  assert.equal(c(undefined, { dpopJkt: null, certThumbprint: null }), 'accepted');
  assert.equal(c({ jkt: 'a' }, { dpopJkt: null, certThumbprint: null }), 'dpop_required');
  assert.equal(c({ jkt: 'a' }, { dpopJkt: 'b', certThumbprint: null }), 'dpop_key_mismatch');
  assert.equal(c({ jkt: 'a' }, { dpopJkt: 'a', certThumbprint: null }), 'accepted');
  assert.equal(c({ 'x5t#S256': 't' }, { dpopJkt: null, certThumbprint: null }), 'cert_required');
  assert.equal(c({ 'x5t#S256': 't' }, { dpopJkt: null, certThumbprint: 'u' }), 'cert_mismatch');
  assert.equal(c({ jkt: 'a', 'x5t#S256': 't' }, { dpopJkt: 'a', certThumbprint: 'u' }), 'cert_mismatch');
  assert.equal(c({ jkt: 'a', 'x5t#S256': 't' }, { dpopJkt: null, certThumbprint: 't' }), 'dpop_required');
  assert.equal(c({ jkt: 'a', 'x5t#S256': 't' }, { dpopJkt: 'a', certThumbprint: 't' }), 'accepted');
});

test('replay cache forgets entries once their window has passed and fails closed when full', () => {
  const r = new MemoryReplayCache(2);
  assert.equal(r.remember('a', NOW + 1000, NOW), true);
  assert.equal(r.remember('a', NOW + 1000, NOW), false);
  assert.equal(r.remember('b', NOW + 1000, NOW), true);
  assert.equal(r.remember('c', NOW + 1000, NOW), false); // full
  assert.equal(r.remember('c', NOW + 5000, NOW + 2000), true); // a and b expired
  assert.equal(r.size, 1);
});

test('with a key cache: the cached key still checks every signature, and a key is cached only once a proof verified', async () => {
  const keys = new DpopKeyCache();
  const victim = await keyPair();
  const attacker = await keyPair();
  // A forged proof first: the victim's public key embedded, signed by the attacker. Refused, and nothing cached.
  const forged = () =>
    new SignJWT({ htm: 'GET', htu: HTU, iat: NOW / 1000, jti: crypto.randomUUID() })
      .setProtectedHeader({ alg: 'EdDSA', typ: 'dpop+jwt', jwk: victim.jwk })
      .sign(attacker.privateKey);
  assert.equal(await code(verifyDpopProof(await forged(), { ...opts(), keys })), 'dpop_invalid');
  // The victim's own proofs verify, the second from the cache, with the same thumbprint.
  const replay = new MemoryReplayCache();
  assert.equal((await verifyDpopProof(await proof(victim, {}), { ...opts(replay), keys })).jkt, victim.jkt);
  assert.equal((await verifyDpopProof(await proof(victim, {}), { ...opts(replay), keys })).jkt, victim.jkt);
  // Once the victim's key is cached, a forged proof is still refused, and so is a tampered payload.
  assert.equal(await code(verifyDpopProof(await forged(), { ...opts(replay), keys })), 'dpop_invalid');
  const good = await proof(victim, {});
  const [h, , s] = good.split('.');
  const tampered = `${h}.${Buffer.from(JSON.stringify({ htm: 'POST', htu: HTU, iat: NOW / 1000, jti: 'tampered-jti' })).toString('base64url')}.${s}`;
  assert.equal(await code(verifyDpopProof(tampered, { ...opts(replay), keys })), 'dpop_invalid');
  // The other checks run on the cached path too: replay, htm, ath.
  assert.equal(await code(verifyDpopProof(good, { ...opts(replay), keys })), 'accepted');
  assert.equal(await code(verifyDpopProof(good, { ...opts(replay), keys })), 'dpop_replay');
  assert.equal(await code(verifyDpopProof(await proof(victim, { htm: 'POST' }), { ...opts(replay), keys })), 'dpop_htm_mismatch');
  const ath = await accessTokenHash('the-token');
  assert.equal(await code(verifyDpopProof(await proof(victim, { ath }), { ...opts(replay), keys, accessToken: 'the-token' })), 'accepted');
  assert.equal(
    await code(verifyDpopProof(await proof(victim, { ath }), { ...opts(replay), keys, accessToken: 'another-token' })),
    'dpop_ath_mismatch',
  );
});

test('a proof whose header is cached gets the answer it gets without the cache, whatever its payload and signature', async () => {
  const PARAMS = {
    EdDSA: { name: 'Ed25519' },
    ES256: { name: 'ECDSA', hash: 'SHA-256' },
    ES384: { name: 'ECDSA', hash: 'SHA-384' },
    RS256: { name: 'RSASSA-PKCS1-v1_5' },
  };
  for (const alg of ['EdDSA', 'ES256', 'ES384', 'RS256'] as const) {
    const k = await keyPair(alg);
    const other = await keyPair(alg);
    const params = PARAMS[alg];
    const b64 = (s: string | Uint8Array) => Buffer.from(s).toString('base64url');
    const header = b64(JSON.stringify({ alg, typ: 'dpop+jwt', jwk: k.jwk }));
    const signed = async (payload: string, key = k.privateKey) =>
      `${header}.${payload}.${b64(new Uint8Array(await crypto.subtle.sign(params, key, new TextEncoder().encode(`${header}.${payload}`))))}`;
    const claims = (over: Record<string, unknown>) =>
      b64(JSON.stringify({ htm: 'GET', htu: HTU, iat: NOW / 1000, jti: crypto.randomUUID(), ...over }));
    const valid = await signed(claims({}));
    const [, vp, vs] = valid.split('.');
    const variants: Record<string, string> = {
      valid,
      'iat a string': await signed(claims({ iat: String(NOW / 1000) })),
      'iat missing': await signed(claims({ iat: undefined })),
      'iat stale': await signed(claims({ iat: NOW / 1000 - 61 })),
      'nbf ahead': await signed(claims({ nbf: NOW / 1000 + 1 })),
      'nbf now': await signed(claims({ nbf: NOW / 1000 })),
      'nbf a string': await signed(claims({ nbf: 'soon' })),
      'exp past': await signed(claims({ exp: NOW / 1000 })),
      'exp ahead': await signed(claims({ exp: NOW / 1000 + 1 })),
      'exp null': await signed(claims({ exp: null })),
      'jti short': await signed(claims({ jti: 'short' })),
      'htm other': await signed(claims({ htm: 'POST' })),
      'htu host in capitals': await signed(claims({ htu: HTU.replace('http://', 'HTTP://') })),
      'htu elsewhere': await signed(claims({ htu: 'http://127.0.0.1:8081/api/public/v1/admin/audit' })),
      'payload an array': await signed(b64('[1,2]')),
      'payload null': await signed(b64('null')),
      'payload not JSON': await signed(b64('{"htm":')),
      'payload not UTF-8': await signed(b64(new Uint8Array([0x7b, 0xff, 0x7d]))),
      'payload padded': await signed(`${claims({})}==`),
      'payload with a non-ASCII character': await signed(`${claims({})}é`),
      'signature by another key': await signed(claims({}), other.privateKey),
      'signature padded': `${header}.${vp}.${vs}=`,
      'signature cut': `${header}.${vp}.${vs!.slice(0, -4)}`,
      'signature a character short': `${header}.${vp}.${vs!.slice(0, -1)}`,
      'signature a character long': `${header}.${vp}.${vs}A`,
      'signature five characters long': `${header}.${vp}.${vs}AAAAA`,
      'signature empty': `${header}.${vp}.`,
      'signature not base64url': `${header}.${vp}.${vs!.slice(0, -2)}+/`,
      'a fourth segment': `${valid}.${vs}`,
      'two segments': `${header}.${vp}`,
      'the header alone': header,
    };
    // Web Crypto's check of the cached key, and node:crypto's (runtime/proof-signature.ts), as both programs have it.
    const webCrypto = new DpopKeyCache();
    const native = new DpopKeyCache({ native: nodeProofSignatures });
    for (const keys of [webCrypto, native]) await verifyDpopProof(await signed(claims({})), { ...opts(), keys });
    assert.ok(webCrypto.get(header) && webCrypto.get(header)!.check === null, 'the header is cached, for Web Crypto');
    assert.ok(native.get(header)?.check, 'the header is cached, with the native check');
    const answers: Record<string, [string, string, string]> = {};
    for (const [name, p] of Object.entries(variants)) {
      const without = await code(verifyDpopProof(p, opts()));
      answers[name] = [
        without,
        await code(verifyDpopProof(p, { ...opts(), keys: webCrypto })),
        await code(verifyDpopProof(p, { ...opts(), keys: native })),
      ];
    }
    for (const [name, [without, cached, nativeCached]] of Object.entries(answers)) {
      assert.equal(cached, without, `${alg}, ${name}`);
      assert.equal(nativeCached, without, `${alg}, ${name}, native check`);
    }
    // The variants are refused for the reasons they should be (the cached path is not merely as lax as the other).
    const expected: Record<string, string> = {
      valid: 'accepted',
      'iat a string': 'dpop_invalid',
      'iat stale': 'dpop_stale',
      'nbf ahead': 'dpop_invalid',
      'nbf now': 'accepted',
      'exp past': 'dpop_invalid',
      'exp ahead': 'accepted',
      'exp null': 'dpop_invalid',
      'htu host in capitals': 'accepted',
      'htu elsewhere': 'dpop_htu_mismatch',
      'payload an array': 'dpop_invalid',
      'payload not UTF-8': 'dpop_invalid',
      'signature by another key': 'dpop_invalid',
      'signature cut': 'dpop_invalid',
      'a fourth segment': 'dpop_invalid',
    };
    for (const [name, want] of Object.entries(expected)) assert.equal(answers[name]![0], want, `${alg}, ${name}`);
  }
});

test('a key cache keeps no header longer than 2,048 characters: such a proof still verifies, on the full path', async () => {
  const k = await keyPair();
  const keys = new DpopKeyCache();
  const padded = () => proof(k, {}, { pad: 'x'.repeat(2000) });
  const [header] = (await padded()).split('.');
  assert.ok(header!.length > 2048);
  assert.equal(await code(verifyDpopProof(await padded(), { ...opts(), keys })), 'accepted');
  assert.equal(keys.get(header!), undefined);
  assert.equal(await code(verifyDpopProof(await padded(), { ...opts(), keys })), 'accepted');
});
