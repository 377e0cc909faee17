// core/apikey/hash.ts: hashing and constant-time comparison.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { generateSecret } from '../../../core/apikey/secret.ts';
import { constantTimeEqual, hashSecret } from '../../../core/apikey/hash.ts';

const fixed = (byte: number) => (n: number) => new Uint8Array(n).fill(byte);

test('hashSecret: lower-case hex SHA-256 of the UTF-8 secret (FIPS 180-4 "abc" vector); distinct secrets, distinct hashes', () => {
  assert.equal(hashSecret('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  const a = generateSecret(fixed(1));
  const b = generateSecret(fixed(2));
  assert.match(hashSecret(a), /^[0-9a-f]{64}$/);
  assert.notEqual(hashSecret(a), hashSecret(b));
  assert.equal(hashSecret(a), hashSecret(a));
});

test('constantTimeEqual: equality semantics, including length mismatch and prefixes', () => {
  assert.equal(constantTimeEqual('', ''), true);
  assert.equal(constantTimeEqual('abc', 'abc'), true);
  assert.equal(constantTimeEqual('abc', 'abd'), false);
  assert.equal(constantTimeEqual('abc', 'ab'), false);
  assert.equal(constantTimeEqual('ab', 'abc'), false);
  assert.equal(constantTimeEqual('', 'a'), false);
  assert.equal(constantTimeEqual('a\u0000', 'a'), false, 'a NUL past the end is not the end');
  assert.equal(constantTimeEqual('\u0100', '\u0000'), false, 'high bits of a code unit count');
});

test('property: constantTimeEqual(a, b) === (a === b)', () => {
  fc.assert(
    fc.property(fc.string(), fc.string(), (a, b) => {
      assert.equal(constantTimeEqual(a, b), a === b);
      assert.equal(constantTimeEqual(a, a), true);
    }),
    { numRuns: 1000 },
  );
});

test('constantTimeEqual walks the whole input: no early exit on the first differing character', () => {
  // Structural check: the comparison touches every index of the longer string
  // whatever the position of the first difference (counted through a Proxy-free
  // String subclass that records charCodeAt calls).
  class Counting extends String {
    calls = 0;
    override charCodeAt(i: number): number {
      this.calls++;
      return super.charCodeAt(i);
    }
  }
  for (const [x, y] of [
    ['Xbcdefgh', 'abcdefgh'],
    ['abcdefgX', 'abcdefgh'],
    ['a', 'abcdefgh'],
  ] as const) {
    const a = new Counting(x);
    const b = new Counting(y);
    constantTimeEqual(a as unknown as string, b as unknown as string);
    assert.equal(a.calls, 8, `${x} vs ${y}`);
    assert.equal(b.calls, 8, `${x} vs ${y}`);
  }
});
