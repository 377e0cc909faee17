// core/authority/schema.ts: the zod schema of the envelope and parseAuthority.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { authoritySchema, parseAuthority } from '../../../core/authority/schema.ts';
import { PERMISSION_MODES, intersectAuthority, type AuthorityEnvelope } from '../../../core/authority/envelope.ts';
import { isServiceError } from '../../../core/errors.ts';

test('a full envelope and the empty one are accepted; parseAuthority returns them without undefined members', () => {
  const full = {
    allowed_tools: ['search', 'mcp:files/read'],
    clearance_level: 3,
    permission_mode: 'auto-read',
    data_grant_ids: ['grant_1'],
    egress_allowlist: ['https://api.example.com'],
    compartments: ['alpha'],
    governing_contract_id: 'contract_1',
    budget_ceiling: 12.5,
  };
  assert.equal(authoritySchema.safeParse(full).success, true);
  assert.deepEqual(parseAuthority(full), full);
  assert.deepEqual(parseAuthority({}), {});
  assert.deepEqual(parseAuthority({ governing_contract_ids: ['a', 'b'] }), { governing_contract_ids: ['a', 'b'] });
  for (const mode of PERMISSION_MODES) assert.deepEqual(parseAuthority({ permission_mode: mode }), { permission_mode: mode });
});

test('invalid envelopes are refused with invalid_request and the offending paths', () => {
  const bad: [unknown, string][] = [
    [null, ''],
    ['ask', ''],
    [[], ''],
    [{ unknown_field: 1 }, ''],
    [{ allowed_tools: 'search' }, 'allowed_tools'],
    [{ allowed_tools: [''] }, 'allowed_tools.0'],
    [{ allowed_tools: ['has space'] }, 'allowed_tools.0'],
    [{ allowed_tools: ['x'.repeat(513)] }, 'allowed_tools.0'],
    [{ allowed_tools: Array.from({ length: 257 }, (_, i) => `t${i}`) }, 'allowed_tools'],
    [{ clearance_level: -1 }, 'clearance_level'],
    [{ clearance_level: 1.5 }, 'clearance_level'],
    [{ clearance_level: 101 }, 'clearance_level'],
    [{ clearance_level: '3' }, 'clearance_level'],
    [{ permission_mode: 'yolo' }, 'permission_mode'],
    [{ permission_mode: 'ASK' }, 'permission_mode'],
    [{ data_grant_ids: [1] }, 'data_grant_ids.0'],
    [{ egress_allowlist: [null] }, 'egress_allowlist.0'],
    [{ compartments: {} }, 'compartments'],
    [{ governing_contract_id: '' }, 'governing_contract_id'],
    [{ governing_contract_id: 7 }, 'governing_contract_id'],
    [{ governing_contract_ids: ['only-one'] }, 'governing_contract_ids'],
    [{ governing_contract_id: 'a', governing_contract_ids: ['b', 'c'] }, 'governing_contract_ids'],
    [{ budget_ceiling: -0.01 }, 'budget_ceiling'],
    [{ budget_ceiling: 1e16 }, 'budget_ceiling'],
    [{ budget_ceiling: Infinity }, 'budget_ceiling'],
    [{ budget_ceiling: NaN }, 'budget_ceiling'],
    [{ budget_ceiling: '10' }, 'budget_ceiling'],
  ];
  for (const [input, path] of bad) {
    assert.equal(authoritySchema.safeParse(input).success, false, JSON.stringify(input));
    try {
      parseAuthority(input);
      assert.fail(`accepted ${JSON.stringify(input)}`);
    } catch (err) {
      assert.ok(isServiceError(err), 'a ServiceError');
      assert.equal(err.code, 'invalid_request');
      const issues = (err.details as { issues: { path: string }[] }).issues;
      assert.ok(
        issues.some((i) => i.path === path),
        `${JSON.stringify(input)}: ${JSON.stringify(issues)}`,
      );
    }
  }
});

test('property: every intersection of valid envelopes is itself valid', () => {
  const list = fc.array(fc.constantFrom('a', 'b', 'c', 'tool.x'), { maxLength: 4 });
  const env = fc
    .record(
      {
        allowed_tools: list,
        clearance_level: fc.integer({ min: 0, max: 100 }),
        permission_mode: fc.constantFrom(...PERMISSION_MODES),
        data_grant_ids: list,
        egress_allowlist: list,
        compartments: list,
        governing_contract_id: fc.constantFrom('k1', 'k2'),
        budget_ceiling: fc.double({ min: 0, max: 1e15, noNaN: true }),
      },
      { requiredKeys: [] },
    )
    .map((e) => ({ ...e }) as AuthorityEnvelope);
  fc.assert(
    fc.property(env, env, (a, b) => {
      assert.deepEqual(parseAuthority(a), a);
      const i = intersectAuthority(a, b);
      assert.deepEqual(parseAuthority(i), i);
    }),
    { numRuns: 500 },
  );
});

test('property: random JSON never crashes parseAuthority: either an envelope or invalid_request', () => {
  fc.assert(
    fc.property(fc.jsonValue(), (v) => {
      try {
        parseAuthority(v);
      } catch (err) {
        assert.ok(isServiceError(err) && err.code === 'invalid_request');
      }
    }),
    { numRuns: 500 },
  );
});
