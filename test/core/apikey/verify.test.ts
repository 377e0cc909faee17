// core/apikey/verify.ts: every row of the decision table, with a frozen clock.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { hashSecret } from '../../../core/apikey/hash.ts';
import { generateSecret } from '../../../core/apikey/secret.ts';
import { verifyPresentedKey, type KeyRecord, type KeyVerdict } from '../../../core/apikey/verify.ts';

const NOW = 1_800_000_000_000; // frozen clock, ms
const CURRENT = generateSecret((n) => new Uint8Array(n).fill(1));
const PREVIOUS = generateSecret((n) => new Uint8Array(n).fill(2));
const STRANGER = generateSecret((n) => new Uint8Array(n).fill(3));

function record(over: Partial<KeyRecord> = {}): KeyRecord {
  return {
    key_id: 'key_1',
    owner_id: 'prn_1',
    owner_status: 'active',
    status: 'active',
    hashes: [{ hash: hashSecret(CURRENT), not_after: null }],
    expires_at: null,
    owner_permissions: ['catalog', 'system.orchestration.admin.read'],
    scopes: [],
    rate_limit_rpm: null,
    allowed_ips: [],
    allowed_regions: [],
    ...over,
  };
}
const rotated = (graceEnd: number, over: Partial<KeyRecord> = {}) =>
  record({
    hashes: [
      { hash: hashSecret(CURRENT), not_after: null },
      { hash: hashSecret(PREVIOUS), not_after: graceEnd },
    ],
    ...over,
  });
const ctx = (over: Partial<{ now: number; ip: string | null; region: string }> = {}) => ({
  now: NOW,
  ip: '10.0.0.7',
  region: 'eu-west-1',
  ...over,
});

type Row = [name: string, rec: KeyRecord | undefined, secret: string, c: ReturnType<typeof ctx>, want: KeyVerdict];
const ok = (effective: string[], matched: 'current' | 'previous' = 'current'): KeyVerdict => ({ ok: true, effective, matched });
const no = (code: 'unauthorized' | 'forbidden', reason: Extract<KeyVerdict, { ok: false }>['reason']): KeyVerdict => ({
  ok: false,
  code,
  reason,
});
const FULL = ['catalog', 'system.orchestration.admin.read'];

const ROWS: Row[] = [
  ['unknown key: no record', undefined, CURRENT, ctx(), no('unauthorized', 'unknown_key')],
  ['record found but the hash matches none of its hashes', record(), STRANGER, ctx(), no('unauthorized', 'unknown_key')],
  ['record with no hashes at all', record({ hashes: [] }), CURRENT, ctx(), no('unauthorized', 'unknown_key')],
  ['active key, current secret', record(), CURRENT, ctx(), ok(FULL)],
  ['revoked key: current secret refused', record({ status: 'revoked' }), CURRENT, ctx(), no('unauthorized', 'revoked')],
  [
    'revoked key: previous secret refused too, inside its grace',
    rotated(NOW + 60_000, { status: 'revoked' }),
    PREVIOUS,
    ctx(),
    no('unauthorized', 'revoked'),
  ],
  ['soft-deleted key (owner archived) is refused', record({ status: 'soft_deleted' }), CURRENT, ctx(), no('unauthorized', 'revoked')],
  ['purged key is refused', record({ status: 'purged' }), CURRENT, ctx(), no('unauthorized', 'revoked')],
  ['owner archived', record({ owner_status: 'archived' }), CURRENT, ctx(), no('unauthorized', 'owner_inactive')],
  ['owner soft-deleted', record({ owner_status: 'deleted' }), CURRENT, ctx(), no('unauthorized', 'owner_inactive')],
  ['owner purged', record({ owner_status: 'purged' }), CURRENT, ctx(), no('unauthorized', 'owner_inactive')],
  ['key expired exactly now (expiry is exclusive)', record({ expires_at: NOW }), CURRENT, ctx(), no('unauthorized', 'expired')],
  ['key expires 1 ms from now: still valid', record({ expires_at: NOW + 1 }), CURRENT, ctx(), ok(FULL)],
  [
    'key expired: previous secret inside its grace is refused as expired',
    rotated(NOW + 60_000, { expires_at: NOW - 1 }),
    PREVIOUS,
    ctx(),
    no('unauthorized', 'expired'),
  ],
  ['rotated: previous secret inside grace verifies', rotated(NOW + 1), PREVIOUS, ctx(), ok(FULL, 'previous')],
  ['rotated: previous secret at its grace deadline is refused', rotated(NOW), PREVIOUS, ctx(), no('unauthorized', 'grace_elapsed')],
  ['rotated: previous secret after its grace deadline is refused', rotated(NOW - 1), PREVIOUS, ctx(), no('unauthorized', 'grace_elapsed')],
  ['rotated: current secret still verifies after the grace window', rotated(NOW - 1), CURRENT, ctx(), ok(FULL, 'current')],
  [
    'current hash carrying the key expiry as not_after: past it is expired',
    record({ hashes: [{ hash: hashSecret(CURRENT), not_after: NOW }] }),
    CURRENT,
    ctx(),
    no('unauthorized', 'expired'),
  ],
  ['allowed_ips: caller inside the CIDR', record({ allowed_ips: ['10.0.0.0/24'] }), CURRENT, ctx(), ok(FULL)],
  ['allowed_ips: caller outside', record({ allowed_ips: ['192.168.0.0/16'] }), CURRENT, ctx(), no('forbidden', 'ip_not_allowed')],
  [
    'allowed_ips: caller IP unknown',
    record({ allowed_ips: ['10.0.0.0/24'] }),
    CURRENT,
    ctx({ ip: null }),
    no('forbidden', 'ip_not_allowed'),
  ],
  ['allowed_ips: IPv6 exact', record({ allowed_ips: ['2001:db8::7'] }), CURRENT, ctx({ ip: '2001:db8::7' }), ok(FULL)],
  ['allowed_ips: IPv4-mapped caller', record({ allowed_ips: ['10.0.0.7'] }), CURRENT, ctx({ ip: '::ffff:10.0.0.7' }), ok(FULL)],
  ['allowed_regions: region listed', record({ allowed_regions: ['eu-west-1', 'us-east-1'] }), CURRENT, ctx(), ok(FULL)],
  ['allowed_regions: region not listed', record({ allowed_regions: ['us-east-1'] }), CURRENT, ctx(), no('forbidden', 'region_not_allowed')],
  ['scopes narrow the owner permissions', record({ scopes: ['catalog.read'] }), CURRENT, ctx(), ok(['catalog.read'])],
  ["scope `*` is the owner's full authority", record({ scopes: ['*'] }), CURRENT, ctx(), ok(FULL)],
  ['a scope the owner lacks grants nothing', record({ scopes: ['system.orchestration.admin.write'] }), CURRENT, ctx(), ok([])],
  ['an owner with no permissions: the key verifies but grants nothing', record({ owner_permissions: [] }), CURRENT, ctx(), ok([])],
  // order of the table: first failing row wins
  [
    'revoked beats owner inactive and expiry',
    record({ status: 'revoked', owner_status: 'archived', expires_at: NOW - 1 }),
    CURRENT,
    ctx(),
    no('unauthorized', 'revoked'),
  ],
  [
    'owner inactive beats expiry',
    record({ owner_status: 'archived', expires_at: NOW - 1 }),
    CURRENT,
    ctx(),
    no('unauthorized', 'owner_inactive'),
  ],
  ['expiry beats grace', rotated(NOW - 1, { expires_at: NOW - 1 }), PREVIOUS, ctx(), no('unauthorized', 'expired')],
  [
    'authentication (401) beats the IP rule (403)',
    record({ expires_at: NOW - 1, allowed_ips: ['192.168.0.0/16'] }),
    CURRENT,
    ctx(),
    no('unauthorized', 'expired'),
  ],
  [
    'IP beats region',
    record({ allowed_ips: ['192.168.0.0/16'], allowed_regions: ['us-east-1'] }),
    CURRENT,
    ctx(),
    no('forbidden', 'ip_not_allowed'),
  ],
];

test('verifyPresentedKey decision table', () => {
  for (const [name, rec, secret, c, want] of ROWS) {
    assert.deepEqual(verifyPresentedKey(rec, hashSecret(secret), c), want, name);
  }
});

test('every refusal reason and both codes are covered by the table', () => {
  const reasons = new Set(ROWS.map((r) => r[4]).flatMap((v) => (v.ok ? [] : [`${v.code}/${v.reason}`])));
  assert.deepEqual([...reasons].sort(), [
    'forbidden/ip_not_allowed',
    'forbidden/region_not_allowed',
    'unauthorized/expired',
    'unauthorized/grace_elapsed',
    'unauthorized/owner_inactive',
    'unauthorized/revoked',
    'unauthorized/unknown_key',
  ]);
});

test('the hash is compared exactly: a prefix, an upper-cased hash or the raw secret are refused', () => {
  const rec = record();
  const h = hashSecret(CURRENT);
  for (const presented of [h.slice(0, 63), h.toUpperCase(), h + '0', '', CURRENT]) {
    assert.deepEqual(verifyPresentedKey(rec, presented, ctx()), no('unauthorized', 'unknown_key'), presented);
  }
});

test('property: a key verifies only with one of its own secrets, and never grants more than its owner holds', () => {
  const perm = fc.constantFrom('catalog', 'catalog.read', 'catalog.write', 'jobs', 'jobs.run', 'system.orchestration.admin.read', '*');
  fc.assert(
    fc.property(
      fc.uint8Array({ minLength: 32, maxLength: 32 }),
      fc.uint8Array({ minLength: 32, maxLength: 32 }),
      fc.array(perm, { maxLength: 4 }),
      fc.array(perm, { maxLength: 4 }),
      (a, b, ownerPerms, scopes) => {
        const mine = generateSecret(() => a);
        const other = generateSecret(() => b);
        const rec = record({ hashes: [{ hash: hashSecret(mine), not_after: null }], owner_permissions: ownerPerms, scopes });
        const v = verifyPresentedKey(rec, hashSecret(mine), ctx());
        assert.equal(v.ok, true);
        if (v.ok) {
          for (const e of v.effective) {
            assert.ok(
              ownerPerms.some((o) => o === '*' || e === o || e.startsWith(o + '.')),
              `${e} not within ${ownerPerms}`,
            );
          }
        }
        if (mine !== other) assert.equal(verifyPresentedKey(rec, hashSecret(other), ctx()).ok, false);
      },
    ),
    { numRuns: 300 },
  );
});
