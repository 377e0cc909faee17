// core/apikey/secret.ts: secret generation and format.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { KEY_PREFIX, SECRET_BYTES, generateSecret, isSecretFormat } from '../../../core/apikey/secret.ts';
import { b64url, fromB64url } from '../../../core/canonical.ts';

const fixed = (byte: number) => (n: number) => new Uint8Array(n).fill(byte);

test('generateSecret: svck_live_ + base64url of exactly 32 bytes from the injected source', () => {
  let asked = -1;
  const s = generateSecret((n) => {
    asked = n;
    return new Uint8Array(n).fill(0);
  });
  assert.equal(asked, SECRET_BYTES);
  assert.equal(s, 'svck_live_' + 'A'.repeat(43));
  assert.equal(generateSecret(fixed(0xff)), KEY_PREFIX + '_'.repeat(42) + '8');
  assert.equal(s.length, 53);
  const real = generateSecret((n) => crypto.getRandomValues(new Uint8Array(n)));
  assert.ok(isSecretFormat(real));
  assert.equal(fromB64url(real.slice(KEY_PREFIX.length)).length, 32);
});

test('generateSecret refuses a randomness source that returns the wrong length', () => {
  assert.throws(() => generateSecret(() => new Uint8Array(16)), TypeError);
  assert.throws(() => generateSecret(() => new Uint8Array(33)), TypeError);
  assert.throws(() => generateSecret(() => [1, 2] as unknown as Uint8Array), TypeError);
});

test('isSecretFormat is strict', () => {
  const good = generateSecret(fixed(7));
  assert.equal(isSecretFormat(good), true);
  const bad = [
    '',
    KEY_PREFIX,
    good.slice(0, -1),
    good + 'A',
    good.replace('svck_live_', 'svck_test_'),
    good.replace('svck_live_', 'SVCK_LIVE_'),
    KEY_PREFIX + 'A'.repeat(42) + '=',
    KEY_PREFIX + 'A'.repeat(42) + '+',
    KEY_PREFIX + 'A'.repeat(42) + '/',
    KEY_PREFIX + 'A'.repeat(42) + ' ',
    ' ' + good,
    good + '\n',
    'Bearer ' + good,
    KEY_PREFIX + 'é'.repeat(43),
  ];
  for (const s of bad) assert.equal(isSecretFormat(s), false, JSON.stringify(s));
  assert.equal(isSecretFormat(123 as unknown as string), false);
});

test('property: every generated secret has the format and encodes its bytes', () => {
  fc.assert(
    fc.property(fc.uint8Array({ minLength: 32, maxLength: 32 }), (bytes) => {
      const s = generateSecret(() => bytes);
      assert.equal(isSecretFormat(s), true);
      assert.equal(s, KEY_PREFIX + b64url(bytes));
    }),
  );
});
