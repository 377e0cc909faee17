// How many tokens a model call reserves (core/engine/budget.ts): max_tokens, or what is left,
// refused only below the floor; the same rule for the seat ceiling, the cell's ledger and the device's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { MIN_MODEL_TOKENS, grantTokens, tokenFloor } from '../../../core/engine/budget.ts';

test('grantTokens: all of it when enough is left, what is left down to the floor, null below it', () => {
  assert.equal(MIN_MODEL_TOKENS, 64);
  assert.equal(grantTokens(1024, 5000, 64), 1024);
  assert.equal(grantTokens(1024, 500, 64), 500);
  assert.equal(grantTokens(1024, 64, 64), 64);
  assert.equal(grantTokens(1024, 63, 64), null);
  assert.equal(grantTokens(1024, -10, 64), null);
  assert.equal(grantTokens(1024, 100.7, 64), 100, 'whole tokens');
  assert.equal(grantTokens(16, 10, tokenFloor(16)), null, 'a call asking for 16 needs 16');
  assert.equal(grantTokens(16, 16, tokenFloor(16)), 16);
  assert.equal(tokenFloor(1024), 64);
  assert.equal(tokenFloor(10), 10);
});

test('grantTokens never grants more than asked or left, and refuses only below the floor', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 1e6 }), fc.integer({ min: -1e3, max: 1e6 }), (requested, left) => {
      const floor = tokenFloor(requested);
      const g = grantTokens(requested, left, floor);
      if (g === null) return Math.min(requested, left) < floor;
      return g <= requested && g <= left && g >= floor && g === Math.min(requested, left);
    }),
  );
});
