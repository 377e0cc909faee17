// The sealing of cell/custody/seal.ts: AES-256-GCM under the group's secrets key, bound to what the value is.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { openSecret, sealSecret } from '../../../cell/custody/seal.ts';

test('AES-256-GCM: round trip; a fresh nonce each time; tamper, wrong id or wrong key refused', () => {
  const key = randomBytes(32);
  const a = sealSecret(key, 'sec_1', 'sk-secret');
  const b = sealSecret(key, 'sec_1', 'sk-secret');
  assert.notDeepEqual(a, b);
  assert.equal(openSecret(key, 'sec_1', a), 'sk-secret');
  assert.equal(Buffer.from(a).includes(Buffer.from('sk-secret')), false);
  const flipped = new Uint8Array(a);
  flipped[14] = flipped[14]! ^ 1;
  assert.throws(() => openSecret(key, 'sec_1', flipped));
  assert.throws(() => openSecret(key, 'sec_2', a), 'a ciphertext moved to another id does not open');
  assert.throws(() => openSecret(randomBytes(32), 'sec_1', a));
  assert.throws(() => openSecret(key, 'sec_1', a.subarray(0, 20)));
});
