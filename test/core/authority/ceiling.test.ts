// Envelope ceilings and the containment rule: the algebra, by example and by property.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  capToCeiling,
  entryCovers,
  meetCeilings,
  parseCeiling,
  UNBOUNDED,
  withinCeiling,
  type Ceiling,
} from '../../../core/authority/ceiling.ts';
import { contains } from '../../../core/authority/contain.ts';
import type { AuthorityEnvelope } from '../../../core/authority/envelope.ts';

test('entryCovers: exact, *, kv:*, and host wildcards', () => {
  assert.ok(entryCovers('*', 'https://a.example'));
  assert.ok(entryCovers('*', 'kv:ws'));
  assert.ok(!entryCovers('https://a.example', '*'));
  assert.ok(entryCovers('kv:*', 'kv:ws'));
  assert.ok(!entryCovers('kv:*', 'https://a.example'));
  assert.ok(!entryCovers('kv:ws', 'kv:*'));
  assert.ok(entryCovers('*.example.com', 'https://api.example.com/x'));
  assert.ok(entryCovers('*.example.com', 'api.example.com'));
  assert.ok(entryCovers('*.example.com', '*.a.example.com'));
  assert.ok(!entryCovers('*.example.com', 'example.com'));
  assert.ok(!entryCovers('*.example.com', 'https://evilexample.com'));
  assert.ok(!entryCovers('*.example.com', 'kv:x.example.com'));
});

test('entryCovers: an entry naming HTTP methods covers only the methods it names; one without methods allows reading', () => {
  // Without methods: GET and HEAD (and workspace storage for * and kv:), as before methods existed.
  assert.ok(!entryCovers('*', 'POST:https://a.example'), 'a read-everywhere entry grants no write');
  assert.ok(!entryCovers('https://a.example', 'POST:https://a.example'));
  assert.ok(entryCovers('POST,PUT:https://a.example', 'POST:https://a.example'));
  assert.ok(!entryCovers('POST:https://a.example', 'POST,PUT:https://a.example'));
  assert.ok(!entryCovers('POST:https://a.example', 'https://a.example'), 'a write-only entry grants no read');
  assert.ok(entryCovers('GET,HEAD:https://a.example', 'https://a.example'));
  assert.ok(entryCovers('*:*', 'DELETE:https://a.example'));
  assert.ok(entryCovers('*:*', 'https://a.example'));
  assert.ok(entryCovers('*:*.example.com', 'PATCH:https://api.example.com'));
  assert.ok(!entryCovers('*:*.example.com', 'PATCH:https://api.example.org'));
  assert.ok(entryCovers('POST:*', 'POST:https://a.example'));
  // Methods are HTTP only: an entry naming them grants no workspace storage.
  assert.ok(!entryCovers('*:*', '*'));
  assert.ok(!entryCovers('*:*', 'kv:ws'));
  assert.ok(!entryCovers('*:kv:*', 'kv:ws'));
  // Lower case is no method list: the entry is a destination as a whole, covered only by `*`-read or itself.
  assert.ok(!entryCovers('https://a.example', 'post:https://a.example'));
});

test('the meet of entries that overlap without covering each other keeps what both allow', () => {
  const meet = (a: string[], b: string[]) => capToCeiling({ egress_allowlist: a }, { egress_allowlist: b }).egress_allowlist;
  assert.deepEqual(meet(['*'], ['*:*']), ['GET,HEAD:*'], 'reading anywhere (and no workspace storage: *:* reaches none)');
  assert.deepEqual(meet(['POST,PUT:https://a.example'], ['PUT,DELETE:https://a.example']), ['PUT:https://a.example']);
  assert.deepEqual(meet(['POST:*.example.com'], ['POST,PUT:https://api.example.com']), ['POST:https://api.example.com']);
  assert.deepEqual(meet(['POST:https://a.example'], ['https://a.example']), []);
  assert.deepEqual(meet(['*:*'], ['kv:*']), []);
  assert.deepEqual(meet(['POST,PUT:*'], ['*:https://b.example']), ['POST,PUT:https://b.example']);
});

test('withinCeiling names every field that exceeds; unbounded holds everything, nothing else holds unbounded', () => {
  const ceiling: AuthorityEnvelope = {
    allowed_tools: ['calc'],
    clearance_level: 1,
    data_grant_ids: ['kv:*'],
    egress_allowlist: ['*.a.example'],
  };
  assert.deepEqual(
    withinCeiling({ allowed_tools: ['calc'], data_grant_ids: ['kv:w'], egress_allowlist: ['https://x.a.example'] }, ceiling),
    { ok: true },
  );
  assert.deepEqual(
    withinCeiling({ allowed_tools: ['kv.get'], clearance_level: 2, permission_mode: 'auto', egress_allowlist: ['*'] }, ceiling),
    { ok: false, fields: ['allowed_tools', 'egress_allowlist', 'clearance_level', 'permission_mode'] },
  );
  assert.deepEqual(withinCeiling({ clearance_level: 100 }, UNBOUNDED), { ok: true });
  assert.deepEqual(withinCeiling(UNBOUNDED, { clearance_level: 100 }), { ok: false, fields: ['unbounded'] });
  assert.deepEqual(withinCeiling({ budget_ceiling: 10 }, { budget_ceiling: 5 }), { ok: false, fields: ['budget_ceiling'] });
  assert.deepEqual(withinCeiling({}, { governing_contract_id: 'c1' }), { ok: false, fields: ['governing_contract_id'] });
});

test('capToCeiling keeps what both allow, reading wildcards', () => {
  assert.deepEqual(
    capToCeiling(
      { egress_allowlist: ['*'], data_grant_ids: ['kv:w1'], clearance_level: 9 },
      { egress_allowlist: ['https://a.example'], data_grant_ids: ['kv:*'], clearance_level: 2 },
    ),
    { egress_allowlist: ['https://a.example'], data_grant_ids: ['kv:w1'], clearance_level: 2 },
  );
  assert.deepEqual(capToCeiling({ allowed_tools: ['a', 'b'] }, {}), { allowed_tools: [] });
  assert.deepEqual(capToCeiling({ allowed_tools: ['a'] }, UNBOUNDED), { allowed_tools: ['a'] });
});

test('parseCeiling fails closed', () => {
  assert.equal(parseCeiling('"unbounded"'), UNBOUNDED);
  assert.deepEqual(parseCeiling('{"clearance_level":1}'), { clearance_level: 1 });
  for (const bad of [null, '', 'not json', '[1]', '"root"', 'null', '7']) assert.deepEqual(parseCeiling(bad), {}, String(bad));
});

const list = (xs: string[]) => fc.subarray(xs);
const env: fc.Arbitrary<AuthorityEnvelope> = fc.record(
  {
    allowed_tools: list(['calc', 'kv.get', 'http.get']),
    clearance_level: fc.integer({ min: 0, max: 4 }),
    permission_mode: fc.constantFrom('plan', 'ask', 'auto-read', 'auto'),
    data_grant_ids: list(['kv:a', 'kv:b', 'kv:*', '*']),
    egress_allowlist: list([
      'kv:a',
      'kv:*',
      '*',
      'https://x.example.com',
      '*.example.com',
      'y.example.com',
      'POST:https://x.example.com',
      'POST,PUT:*.example.com',
      'GET:y.example.com',
      '*:*',
    ]),
    compartments: list(['p', 'q']),
    budget_ceiling: fc.integer({ min: 0, max: 100 }),
  },
  { requiredKeys: [] },
) as fc.Arbitrary<AuthorityEnvelope>;
const ceiling: fc.Arbitrary<Ceiling> = fc.oneof({ weight: 5, arbitrary: env }, { weight: 1, arbitrary: fc.constant(UNBOUNDED) });

test('property: what capToCeiling returns is within the ceiling and within what was asked', () => {
  fc.assert(
    fc.property(env, ceiling, (e, c) => {
      const capped = capToCeiling(e, c);
      assert.deepEqual(withinCeiling(capped, c), { ok: true });
      assert.deepEqual(withinCeiling(capped, e), { ok: true });
    }),
    { numRuns: 500 },
  );
});

test('property: meetCeilings is never wider than either side, and unbounded is its identity', () => {
  fc.assert(
    fc.property(ceiling, ceiling, (a, b) => {
      const m = meetCeilings(a, b);
      assert.deepEqual(withinCeiling(m, a), { ok: true });
      assert.deepEqual(withinCeiling(m, b), { ok: true });
      if (a === UNBOUNDED && b === UNBOUNDED) assert.equal(m, UNBOUNDED);
    }),
    { numRuns: 500 },
  );
});

test('property: an entry every ceiling allows, their meet allows (the meet loses nothing, whatever the order)', () => {
  const ENTRIES = [
    '*',
    '*:*',
    'kv:*',
    'kv:a',
    'https://x.example.com',
    '*.example.com',
    'y.example.com',
    'POST:https://x.example.com',
    'POST,PUT:*.example.com',
    'PUT,DELETE:*',
    'GET:y.example.com',
  ];
  const egress = fc.subarray(ENTRIES, { maxLength: 3 }).map((l) => ({ egress_allowlist: l }) as AuthorityEnvelope);
  const entry = fc.constantFrom(
    ...ENTRIES,
    'https://z.example.com',
    'PUT:https://z.example.com',
    'DELETE:y.example.com',
    'HEAD:y.example.com',
  );
  fc.assert(
    fc.property(egress, egress, egress, entry, (a, b, c, e) => {
      const asked = { egress_allowlist: [e] };
      if (![a, b, c].every((x) => withinCeiling(asked, x).ok)) return;
      assert.deepEqual(withinCeiling(asked, meetCeilings(meetCeilings(a, b), c)), { ok: true });
      assert.deepEqual(withinCeiling(asked, meetCeilings(a, meetCeilings(b, c))), { ok: true });
    }),
    { numRuns: 2000 },
  );
});

test('property: contains is transitive on the envelope (a grant within a holder within another is within that one)', () => {
  fc.assert(
    fc.property(env, env, env, (x, y, z) => {
      if (withinCeiling(x, y).ok && withinCeiling(y, z).ok) assert.ok(withinCeiling(x, z).ok);
    }),
    { numRuns: 1000 },
  );
});

test('contains: permissions and envelope judged together, exceeding parts named', () => {
  const holder = { permissions: ['iam.keys', 'audit.read'], envelope: { clearance_level: 1 } };
  assert.deepEqual(contains(holder, { permissions: ['iam.keys.read'], envelope: { clearance_level: 1 } }), { ok: true });
  assert.deepEqual(contains(holder, { permissions: ['iam.keys.read', 'iam.principals.write', '*'], envelope: { clearance_level: 2 } }), {
    ok: false,
    permissions: ['iam.principals.write', '*'],
    envelope: ['clearance_level'],
  });
  assert.deepEqual(contains(holder, {}), { ok: true });
});
