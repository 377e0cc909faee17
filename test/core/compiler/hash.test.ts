// hashJson equals contentHash (RFC 8785 + SHA-256) on any JSON value, fast path or not.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { contentHash } from '../../../core/canonical.ts';
import { hashJson, sortedKeys } from '../../../core/json-hash.ts';

test('hashJson(v) === contentHash(v) for arbitrary JSON, with and without sorted keys', () => {
  fc.assert(
    fc.property(fc.jsonValue(), (v) => {
      const h = contentHash(v);
      assert.equal(hashJson(v), h);
      assert.equal(hashJson(sortedKeys(v)), h);
    }),
    { numRuns: 2000, seed: 7 },
  );
});

test('edge cases: integer-like keys, -0, escapes, unicode, lone surrogates', () => {
  for (const v of [
    { '10': 1, '9': 2, a: 3 },
    { b: -0, a: 1e21, c: 1e-7 },
    { '\u0000': '\n"\\\u2028', é: '😀' },
    [1, 'x', null, true, { z: [], a: {} }],
  ]) {
    assert.equal(hashJson(v), contentHash(v));
    assert.equal(hashJson(sortedKeys(v)), contentHash(v));
  }
  assert.throws(() => hashJson({ a: '\ud800' }), TypeError);
  assert.throws(() => hashJson([undefined]), TypeError);
  assert.equal(hashJson({ a: 1, b: undefined }), contentHash({ a: 1 }));
});

test('a supplied SHA-256 gives the same hash', async () => {
  const { sha256 } = await import('@noble/hashes/sha2.js');
  const { createHash } = await import('node:crypto');
  const native = (b: Uint8Array) => new Uint8Array(createHash('sha256').update(b).digest());
  const v = sortedKeys({ b: [1, 2, { y: 'é', x: null }], a: 'x' });
  assert.equal(hashJson(v, native), contentHash(v));
  assert.equal(
    hashJson(v, (b) => sha256(b)),
    contentHash(v),
  );
});

test('sortedKeys leaves non-plain values alone, so hashing them still refuses', () => {
  const d = new Date(0);
  const v = sortedKeys({ b: d, a: 1 });
  assert.equal(v.b, d);
  assert.throws(() => hashJson(v), TypeError);
});
