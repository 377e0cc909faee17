/**
 * runtime/ed25519-signer.ts: Node's synchronous Ed25519 gives the bytes of
 * core's WebCrypto path (Ed25519 is deterministic), verifies there, and
 * refuses a JWK whose x is not d's public key as core does.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { generateEd25519, signEd25519, verifyEd25519 } from '../../core/crypto/ed25519.ts';
import { ed25519Signer } from '../../runtime/ed25519-signer.ts';

test('the same signature as the WebCrypto path, which verifies it', async () => {
  const { privateJwk, publicJwk } = await generateEd25519();
  const sign = ed25519Signer(privateJwk);
  for (const data of [new Uint8Array(0), new TextEncoder().encode('a journal record'), new Uint8Array(4096).fill(9)]) {
    const sig = sign(data);
    assert.deepEqual(sig, await signEd25519(privateJwk, data));
    assert.equal(await verifyEd25519(publicJwk, data, sig), true);
  }
});

test('a JWK whose x is not the public key of d, or not Ed25519, is refused', async () => {
  const a = await generateEd25519();
  const b = await generateEd25519();
  assert.throws(() => ed25519Signer({ ...a.privateJwk, x: b.publicJwk.x as string }), /x does not match d/);
  await assert.rejects(signEd25519({ ...a.privateJwk, x: b.publicJwk.x as string }, new Uint8Array(1)), /x does not match d/);
  assert.throws(() => ed25519Signer({ kty: 'OKP', crv: 'Ed25519', x: 'AAAA', d: 'AAAA' }), TypeError);
});
