// core/authority/scopes.ts: selector algebra, unit rows and fast-check properties.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  covers,
  effectiveAuthority,
  grants,
  intersectSelectors,
  isSelector,
  normalize,
  selectorsSubset,
} from '../../../core/authority/scopes.ts';

test('covers: a dotted selector covers itself and names below it, never a sibling sharing a prefix', () => {
  assert.equal(covers('a.b', 'a.b'), true);
  assert.equal(covers('a.b', 'a.b.c'), true);
  assert.equal(covers('a.b', 'a.bc'), false);
  assert.equal(covers('a.b.c', 'a.b'), false);
  assert.equal(covers('*', 'a'), true);
  assert.equal(covers('*', '*'), true);
  assert.equal(covers('a', '*'), false);
  assert.equal(isSelector('a.b-c_d.e1'), true);
  for (const bad of ['', '.', 'a.', '.a', 'a..b', 'A', '1a', 'a.*', '**', 'a b']) assert.equal(isSelector(bad), false, bad);
});

test('effectiveAuthority: empty or * scopes = owner authority; otherwise the intersection', () => {
  assert.deepEqual(effectiveAuthority(['b', 'a', 'a.x'], []), ['a', 'b']);
  assert.deepEqual(effectiveAuthority(['a', 'b'], ['*']), ['a', 'b']);
  assert.deepEqual(effectiveAuthority(['a', 'b'], ['a.read', 'c']), ['a.read']);
  assert.deepEqual(effectiveAuthority(['a.read'], ['a']), ['a.read']);
  assert.deepEqual(effectiveAuthority(['*'], ['a.read']), ['a.read']);
  assert.deepEqual(effectiveAuthority([], ['*']), []);
  assert.deepEqual(effectiveAuthority([], []), []);
});

const SEGMENTS = ['a', 'b', 'c'];
const dotted = fc.array(fc.constantFrom(...SEGMENTS), { minLength: 1, maxLength: 3 }).map((p) => p.join('.'));
const selector = fc.oneof({ weight: 1, arbitrary: fc.constant('*') }, { weight: 9, arbitrary: dotted });
const selectors = fc.array(selector, { maxLength: 5 });
// Concrete permissions to probe the sets with: every name up to depth 4.
const PROBES: string[] = (() => {
  const out: string[] = [];
  const walk = (prefix: string, depth: number) => {
    for (const s of SEGMENTS) {
      const n = prefix ? `${prefix}.${s}` : s;
      out.push(n);
      if (depth < 4) walk(n, depth + 1);
    }
  };
  walk('', 1);
  return out;
})();

const OPTS = { numRuns: 500 };

test('property: intersectSelectors is commutative and idempotent', () => {
  fc.assert(
    fc.property(selectors, selectors, (a, b) => {
      assert.deepEqual(intersectSelectors(a, b), intersectSelectors(b, a));
      assert.deepEqual(intersectSelectors(a, a), normalize(a));
    }),
    OPTS,
  );
});

test('property: intersectSelectors is associative', () => {
  fc.assert(
    fc.property(selectors, selectors, selectors, (a, b, c) => {
      assert.deepEqual(intersectSelectors(intersectSelectors(a, b), c), intersectSelectors(a, intersectSelectors(b, c)));
    }),
    OPTS,
  );
});

test('property: the intersection grants exactly what both sides grant, and is never wider than either', () => {
  fc.assert(
    fc.property(selectors, selectors, (a, b) => {
      const i = intersectSelectors(a, b);
      assert.ok(selectorsSubset(i, a));
      assert.ok(selectorsSubset(i, b));
      for (const p of PROBES) assert.equal(grants(i, p), grants(a, p) && grants(b, p), p);
    }),
    OPTS,
  );
});

test('property: normalize keeps the granted set and removes redundancy', () => {
  fc.assert(
    fc.property(selectors, (a) => {
      const n = normalize(a);
      for (const p of PROBES) assert.equal(grants(n, p), grants(a, p));
      for (const x of n) for (const y of n) if (x !== y) assert.equal(covers(x, y), false);
      assert.deepEqual(normalize(n), n);
    }),
    OPTS,
  );
});

test('property: effectiveAuthority never grants more than the owner, and only narrows with scopes', () => {
  fc.assert(
    fc.property(selectors, selectors, (owner, scopes) => {
      const eff = effectiveAuthority(owner, scopes);
      assert.ok(selectorsSubset(eff, owner));
      const unscoped = scopes.length === 0 || scopes.includes('*');
      for (const p of PROBES) {
        if (grants(eff, p)) {
          assert.ok(grants(owner, p), `${p} beyond owner`);
          if (!unscoped) assert.ok(grants(scopes, p), `${p} beyond scopes`);
        } else if (grants(owner, p)) {
          assert.ok(!unscoped && !grants(scopes, p), `${p} dropped without a reason`);
        }
      }
    }),
    OPTS,
  );
});

test('property: selectorsSubset is reflexive and transitive, and agrees with probing', () => {
  fc.assert(
    fc.property(selectors, selectors, selectors, (a, b, c) => {
      assert.ok(selectorsSubset(a, a));
      if (selectorsSubset(a, b) && selectorsSubset(b, c)) assert.ok(selectorsSubset(a, c));
      if (!a.includes('*') && !b.includes('*')) {
        const byProbe = PROBES.every((p) => !grants(a, p) || grants(b, p));
        assert.equal(selectorsSubset(a, b), byProbe);
      }
    }),
    OPTS,
  );
});
