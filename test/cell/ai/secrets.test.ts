import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { openSecretCached } from '../../../cell/ai/secrets.ts';
import { sealSecret } from '../../../cell/custody/api.ts';

test('opened once per sealed value: a rotation, a tampered row or another id is opened (and refused) afresh', () => {
  const key = randomBytes(32);
  const a = sealSecret(key, 'sec_1', 'sk-first');
  assert.equal(openSecretCached(key, 'sec_1', a), 'sk-first');
  assert.equal(openSecretCached(key, 'sec_1', new Uint8Array(a)), 'sk-first', 'the same bytes: the value kept');
  const flipped = new Uint8Array(a);
  flipped[14] = flipped[14]! ^ 1;
  assert.throws(() => openSecretCached(key, 'sec_1', flipped), 'tampered after an open: still refused');
  assert.throws(() => openSecretCached(key, 'sec_2', a), 'moved to another id: still refused');
  assert.throws(() => openSecretCached(randomBytes(32), 'sec_1', a), 'another key: still refused');
  const rotated = sealSecret(key, 'sec_1', 'sk-second');
  assert.equal(openSecretCached(key, 'sec_1', rotated), 'sk-second');
  assert.equal(openSecretCached(key, 'sec_1', a), 'sk-first', 'the old bytes again: opened again');
});
