// The shape of delegation chains (core/tokens/delegation.ts): act nesting read back in order, links and
// may_act checked field by field, every malformed shape refused with malformed_token (verifyAccessToken
// reads every token through these, so a signed token of such a shape is refused the same way). The judge's
// depth limit (delegation_too_deep) is tested with recorded tokens in test/bundles/fixtures.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { actClaimOf, actorsOf, HARD_MAX_ACT_DEPTH, isLink, linksOf, mayActOf } from '../../../core/tokens/delegation.ts';

const code = (f: () => unknown) => {
  try {
    f();
    return 'ok';
  } catch (e) {
    return (e as { code?: string }).code ?? String(e);
  }
};

test('act nests current actor first, and reads back what actClaimOf wrote', () => {
  assert.deepEqual(actClaimOf(['c', 'b', 'a']), { sub: 'c', act: { sub: 'b', act: { sub: 'a' } } });
  assert.equal(actClaimOf([]), undefined);
  fc.assert(
    fc.property(fc.array(fc.stringMatching(/^[a-z][a-z0-9_]{0,20}$/), { maxLength: HARD_MAX_ACT_DEPTH }), (actors) => {
      assert.deepEqual(actorsOf(actClaimOf(actors)), actors);
    }),
  );
});

test('malformed chains, links and may_act are refused with malformed_token', () => {
  assert.equal(
    code(() => actorsOf('x')),
    'malformed_token',
  );
  assert.equal(
    code(() => actorsOf({})),
    'malformed_token',
  );
  assert.equal(
    code(() => actorsOf({ sub: 'a', act: [] })),
    'malformed_token',
  );
  assert.equal(
    code(() => actorsOf({ sub: 'a b' })),
    'malformed_token',
  );
  assert.equal(
    code(() => actorsOf(actClaimOf(Array.from({ length: HARD_MAX_ACT_DEPTH + 1 }, (_, i) => `p${i}`)))),
    'malformed_token',
  );
  assert.equal(
    code(() => linksOf('token:x')),
    'malformed_token',
  );
  assert.equal(
    code(() => linksOf(['token:x', 7])),
    'malformed_token',
  );
  assert.equal(
    code(() => linksOf(['api_key:nope'])),
    'malformed_token',
  );
  assert.equal(
    code(() => linksOf(Array.from({ length: 65 }, (_, i) => `token:t${i}`))),
    'malformed_token',
  );
  assert.deepEqual(linksOf(undefined), []);
  assert.ok(isLink('api_key:key_0123456789abcdef0123') && isLink('client:ocl_abc') && isLink('token:AbC-_1'));
  assert.equal(
    code(() => mayActOf('svc_1')),
    'malformed_token',
  );
  assert.equal(
    code(() => mayActOf({ iss: 'x' })),
    'malformed_token',
  );
  assert.equal(mayActOf({ sub: 'svc_1' }), 'svc_1');
  assert.equal(mayActOf(undefined), null);
});
