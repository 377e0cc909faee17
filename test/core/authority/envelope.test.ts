// core/authority/envelope.ts: field rules, absent-field semantics, and fast-check algebra.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  DEFAULT_PERMISSION_MODE,
  PERMISSION_MODES,
  contractsOf,
  intersectAuthority,
  isSubset,
  lessAutonomous,
  modeRank,
  normalizeAuthority,
  type AuthorityEnvelope,
  type AuthorityField,
} from '../../../core/authority/envelope.ts';

test('permission modes are ordered least to most autonomous, default ask', () => {
  assert.deepEqual([...PERMISSION_MODES], ['plan', 'ask', 'auto-read', 'auto']);
  assert.equal(DEFAULT_PERMISSION_MODE, 'ask');
  assert.equal(modeRank(undefined), modeRank('ask'));
  assert.equal(lessAutonomous('auto', 'auto-read'), 'auto-read');
  assert.equal(lessAutonomous('plan', 'auto'), 'plan');
  assert.equal(lessAutonomous(undefined, 'auto'), 'ask');
  assert.equal(lessAutonomous(undefined, 'plan'), 'plan');
  assert.throws(() => modeRank('yolo' as never), TypeError);
});

test('intersectAuthority: each field by its rule', () => {
  const a: AuthorityEnvelope = {
    allowed_tools: ['search', 'shell', 'fetch'],
    clearance_level: 3,
    permission_mode: 'auto',
    data_grant_ids: ['g1', 'g2'],
    egress_allowlist: ['https://a.example', 'https://b.example'],
    compartments: ['red', 'blue'],
    governing_contract_id: 'c1',
    budget_ceiling: 100,
  };
  const b: AuthorityEnvelope = {
    allowed_tools: ['fetch', 'search', 'mail'],
    clearance_level: 2,
    permission_mode: 'auto-read',
    data_grant_ids: ['g2', 'g3'],
    egress_allowlist: ['https://b.example'],
    compartments: ['blue', 'green'],
    governing_contract_id: 'c1',
    budget_ceiling: 250.5,
  };
  assert.deepEqual(intersectAuthority(a, b), {
    allowed_tools: ['fetch', 'search'],
    clearance_level: 2,
    permission_mode: 'auto-read',
    data_grant_ids: ['g2'],
    egress_allowlist: ['https://b.example'],
    compartments: ['blue'],
    governing_contract_id: 'c1',
    budget_ceiling: 100,
  });
});

test('absent fields: lists grant nothing, clearance is 0, mode is ask, budget is unbounded, contracts add none', () => {
  const full: AuthorityEnvelope = {
    allowed_tools: ['t'],
    clearance_level: 4,
    permission_mode: 'auto',
    data_grant_ids: ['g'],
    egress_allowlist: ['e'],
    compartments: ['c'],
    governing_contract_id: 'k',
    budget_ceiling: 10,
  };
  assert.deepEqual(intersectAuthority({}, full), {
    allowed_tools: [],
    clearance_level: 0,
    permission_mode: 'ask',
    data_grant_ids: [],
    egress_allowlist: [],
    compartments: [],
    governing_contract_id: 'k',
    budget_ceiling: 10,
  });
  assert.deepEqual(intersectAuthority({}, {}), {});
  assert.deepEqual(intersectAuthority({ permission_mode: 'plan' }, {}), { permission_mode: 'plan' });
  // absent and empty lists mean the same thing
  assert.deepEqual(isSubset({ allowed_tools: [] }, {}), { ok: true });
  assert.deepEqual(isSubset({}, { allowed_tools: [] }), { ok: true });
  // the empty envelope is the bottom on every field but budget (absent = no ceiling) and contracts (absent = none)
  assert.deepEqual(isSubset({}, { budget_ceiling: 5 }), { ok: false, fields: ['budget_ceiling'] });
  assert.deepEqual(isSubset({}, full), { ok: false, fields: ['governing_contract_id', 'budget_ceiling'] });
  assert.deepEqual(isSubset({ budget_ceiling: 0, governing_contract_id: 'k' }, full), { ok: true });
  assert.deepEqual(isSubset({ permission_mode: 'ask' }, {}), { ok: true });
  assert.deepEqual(isSubset({ permission_mode: 'auto-read' }, {}), { ok: false, fields: ['permission_mode'] });
  assert.deepEqual(isSubset({ clearance_level: 0 }, {}), { ok: true });
});

test('contracts: differing contracts combine into governing_contract_ids (both must be satisfied)', () => {
  const i = intersectAuthority({ governing_contract_id: 'c2' }, { governing_contract_id: 'c1' });
  assert.deepEqual(i, { governing_contract_ids: ['c1', 'c2'] });
  assert.deepEqual(contractsOf(i), ['c1', 'c2']);
  assert.deepEqual(intersectAuthority(i, { governing_contract_id: 'c3' }), { governing_contract_ids: ['c1', 'c2', 'c3'] });
  assert.deepEqual(intersectAuthority({ governing_contract_id: 'c1' }, {}), { governing_contract_id: 'c1' });
  assert.deepEqual(normalizeAuthority({ governing_contract_ids: ['c1', 'c1'] }), { governing_contract_id: 'c1' });
  // a child must be bound by every contract of its parent; more contracts is stricter
  assert.deepEqual(isSubset({ governing_contract_id: 'c1' }, { governing_contract_id: 'c1' }), { ok: true });
  assert.deepEqual(isSubset({ governing_contract_ids: ['c1', 'c2'] }, { governing_contract_id: 'c1' }), { ok: true });
  assert.deepEqual(isSubset({}, { governing_contract_id: 'c1' }), { ok: false, fields: ['governing_contract_id'] });
  assert.deepEqual(isSubset({ governing_contract_id: 'c2' }, { governing_contract_id: 'c1' }), {
    ok: false,
    fields: ['governing_contract_id'],
  });
  assert.deepEqual(isSubset({ governing_contract_id: 'c1' }, {}), { ok: true });
});

test('isSubset names every offending field, in field order', () => {
  const parent: AuthorityEnvelope = {
    allowed_tools: ['a'],
    clearance_level: 1,
    permission_mode: 'ask',
    data_grant_ids: ['g'],
    egress_allowlist: ['e'],
    compartments: ['c'],
    governing_contract_id: 'k',
    budget_ceiling: 5,
  };
  const child: AuthorityEnvelope = {
    allowed_tools: ['a', 'b'],
    clearance_level: 2,
    permission_mode: 'auto',
    data_grant_ids: ['g', 'h'],
    egress_allowlist: ['f'],
    compartments: ['d'],
    governing_contract_id: 'other',
    budget_ceiling: 5.01,
  };
  assert.deepEqual(isSubset(child, parent), {
    ok: false,
    fields: [
      'allowed_tools',
      'clearance_level',
      'permission_mode',
      'data_grant_ids',
      'egress_allowlist',
      'compartments',
      'governing_contract_id',
      'budget_ceiling',
    ],
  });
  assert.deepEqual(isSubset(parent, parent), { ok: true });
  assert.deepEqual(isSubset({ ...parent, permission_mode: 'plan', budget_ceiling: 5, allowed_tools: [] }, parent), { ok: true });
  assert.deepEqual(isSubset({ ...parent, egress_allowlist: ['e', 'x'] }, parent), { ok: false, fields: ['egress_allowlist'] });
});

test('lists are exact-string sets: no wildcard or prefix meaning', () => {
  assert.deepEqual(isSubset({ allowed_tools: ['shell'] }, { allowed_tools: ['*'] }), { ok: false, fields: ['allowed_tools'] });
  assert.deepEqual(isSubset({ egress_allowlist: ['https://a.example/x'] }, { egress_allowlist: ['https://a.example'] }), {
    ok: false,
    fields: ['egress_allowlist'],
  });
  assert.deepEqual(intersectAuthority({ allowed_tools: ['b', 'a', 'a'] }, { allowed_tools: ['a', 'b'] }), { allowed_tools: ['a', 'b'] });
});

// ---- properties ----

const NAMES = ['a', 'b', 'c', 'd'];
const list = fc.uniqueArray(fc.constantFrom(...NAMES), { maxLength: 4 });
const envelope: fc.Arbitrary<AuthorityEnvelope> = fc
  .record(
    {
      allowed_tools: list,
      clearance_level: fc.integer({ min: 0, max: 5 }),
      permission_mode: fc.constantFrom(...PERMISSION_MODES),
      data_grant_ids: list,
      egress_allowlist: list,
      compartments: list,
      governing_contract_id: fc.constantFrom('k1', 'k2', 'k3'),
      governing_contract_ids: fc.uniqueArray(fc.constantFrom('k1', 'k2', 'k3'), { minLength: 2, maxLength: 3 }),
      budget_ceiling: fc.oneof(fc.integer({ min: 0, max: 100 }), fc.double({ min: 0, max: 100, noNaN: true })),
    },
    { requiredKeys: [] },
  )
  .map((e) => {
    // the two contract spellings are exclusive
    if (e.governing_contract_id !== undefined) delete e.governing_contract_ids;
    return e as AuthorityEnvelope;
  });

const OPTS = { numRuns: 1000 };
const equivalent = (x: AuthorityEnvelope, y: AuthorityEnvelope) => isSubset(x, y).ok && isSubset(y, x).ok;

test('property: intersection is commutative', () => {
  fc.assert(
    fc.property(envelope, envelope, (a, b) => assert.deepEqual(intersectAuthority(a, b), intersectAuthority(b, a))),
    OPTS,
  );
});

test('property: intersection is idempotent (a ∩ a = normalize(a), and absorbing: (a ∩ b) ∩ b = a ∩ b)', () => {
  fc.assert(
    fc.property(envelope, envelope, (a, b) => {
      assert.deepEqual(intersectAuthority(a, a), normalizeAuthority(a));
      const i = intersectAuthority(a, b);
      assert.deepEqual(intersectAuthority(i, b), i);
      assert.deepEqual(intersectAuthority(i, i), i);
    }),
    OPTS,
  );
});

test('property: intersection is associative', () => {
  fc.assert(
    fc.property(envelope, envelope, envelope, (a, b, c) => {
      assert.deepEqual(intersectAuthority(intersectAuthority(a, b), c), intersectAuthority(a, intersectAuthority(b, c)));
    }),
    OPTS,
  );
});

test('property: intersection is never wider than either side, and is the greatest such envelope', () => {
  fc.assert(
    fc.property(envelope, envelope, envelope, (a, b, c) => {
      const i = intersectAuthority(a, b);
      assert.deepEqual(isSubset(i, a), { ok: true });
      assert.deepEqual(isSubset(i, b), { ok: true });
      if (isSubset(c, a).ok && isSubset(c, b).ok) assert.deepEqual(isSubset(c, i), { ok: true });
    }),
    OPTS,
  );
});

test('property: isSubset is reflexive and transitive; a ⊆ b iff a ∩ b is equivalent to a', () => {
  fc.assert(
    fc.property(envelope, envelope, envelope, (a, b, c) => {
      assert.deepEqual(isSubset(a, a), { ok: true });
      assert.deepEqual(isSubset(normalizeAuthority(a), a), { ok: true });
      if (isSubset(a, b).ok && isSubset(b, c).ok) assert.deepEqual(isSubset(a, c), { ok: true });
      // constructed chains, so transitivity is exercised on every run
      const ab = intersectAuthority(a, b);
      const abc = intersectAuthority(ab, c);
      assert.ok(isSubset(abc, ab).ok && isSubset(ab, a).ok && isSubset(abc, a).ok);
      assert.equal(isSubset(a, b).ok, equivalent(intersectAuthority(a, b), a));
    }),
    OPTS,
  );
});

const FIELD_KEYS: Record<AuthorityField, (keyof AuthorityEnvelope)[]> = {
  allowed_tools: ['allowed_tools'],
  clearance_level: ['clearance_level'],
  permission_mode: ['permission_mode'],
  data_grant_ids: ['data_grant_ids'],
  egress_allowlist: ['egress_allowlist'],
  compartments: ['compartments'],
  governing_contract_id: ['governing_contract_id', 'governing_contract_ids'],
  budget_ceiling: ['budget_ceiling'],
};
const project = (e: AuthorityEnvelope, f: AuthorityField): AuthorityEnvelope =>
  Object.fromEntries(FIELD_KEYS[f].filter((k) => e[k] !== undefined).map((k) => [k, e[k]])) as AuthorityEnvelope;

test('property: isSubset reports a field exactly when that field alone is not a subset', () => {
  fc.assert(
    fc.property(envelope, envelope, (child, parent) => {
      const r = isSubset(child, parent);
      const reported = r.ok ? [] : r.fields;
      for (const f of Object.keys(FIELD_KEYS) as AuthorityField[]) {
        const alone = isSubset(project(child, f), project(parent, f));
        assert.equal(reported.includes(f), !alone.ok, f);
        if (!alone.ok) assert.deepEqual(alone.fields, [f]);
      }
    }),
    OPTS,
  );
});
