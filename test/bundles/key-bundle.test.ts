import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildKeyBundle, openKeyBundle } from '../../bundles/key-bundle.ts';
import { sealEnvelope, splitEnvelope } from '../../bundles/envelope.ts';
import { hashSecret } from '../../core/apikey/hash.ts';
import type { KeyRecord } from '../../core/apikey/verify.ts';
import { keyPair, T0 } from './_fixtures.ts';
import { tokenJudgeFromBundle } from '../../bundles/token-trust.ts';
import { MemoryReplayCache } from '../../core/tokens/replay.ts';

const SECRET_A = 'svck_live_' + 'A'.repeat(43);
const SECRET_A_OLD = 'svck_live_' + 'B'.repeat(43);
const SECRET_R = 'svck_live_' + 'C'.repeat(43);

function rec(over: Partial<KeyRecord>): KeyRecord {
  return {
    key_id: 'key_a',
    owner_id: 'p_1',
    owner_status: 'active',
    status: 'active',
    hashes: [{ hash: hashSecret(SECRET_A), not_after: null }],
    expires_at: null,
    owner_permissions: ['agent_teams', 'edge.read'],
    scopes: ['agent_teams.read'],
    rate_limit_rpm: 60,
    allowed_ips: [],
    allowed_regions: [],
    ...over,
  };
}

test('a key bundle carries hashes, never secrets, and judges keys like core', async () => {
  const { signer, trusted } = await keyPair();
  const records = [
    rec({
      hashes: [
        { hash: hashSecret(SECRET_A), not_after: null },
        { hash: hashSecret(SECRET_A_OLD), not_after: T0 + 1000 },
      ],
    }),
    rec({ key_id: 'key_r', status: 'revoked', hashes: [{ hash: hashSecret(SECRET_R), not_after: null }] }),
  ];
  const text = await buildKeyBundle({
    issuer: 'cell-a',
    signer,
    audience: 'dev-1',
    version: 1,
    issuedAt: T0,
    expiresAt: T0 + 86_400_000,
    records,
    tombstones: [{ key_id: 'key_r', at: T0 }],
  });
  for (const s of [SECRET_A, SECRET_A_OLD, SECRET_R]) assert.ok(!text.includes(s.slice(10)), 'no secret in the bundle');
  const { opened, index } = await openKeyBundle(text, [trusted]);
  assert.equal(opened.payload.keys.length, 2);
  assert.equal(Object.keys(opened.payload.owners).length, 1, 'owners listed once');
  const ctx = { now: T0, ip: '10.0.0.1', region: 'local' };
  const ok = index.check(SECRET_A, ctx);
  assert.ok(ok.ok);
  assert.deepEqual(ok.ok && ok.effective, ['agent_teams.read']);
  assert.deepEqual(index.check(SECRET_A_OLD, ctx).ok, true);
  assert.deepEqual(index.check(SECRET_A_OLD, { ...ctx, now: T0 + 1000 }), {
    ok: false,
    code: 'unauthorized',
    reason: 'grace_elapsed',
    record: index.byId('key_a'),
  });
  const r = index.check(SECRET_R, ctx);
  assert.equal(!r.ok && r.reason, 'revoked');
  const u = index.check('svck_live_' + 'Z'.repeat(43), ctx);
  assert.equal(!u.ok && u.reason, 'unknown_key');
  assert.equal((index.check('not-a-key', ctx) as { reason: string }).reason, 'unknown_key');
});

test('a tombstoned key id is refused even if a record says active', async () => {
  const { signer, trusted } = await keyPair();
  const text = await buildKeyBundle({
    issuer: 'cell-a',
    signer,
    audience: 'dev-1',
    version: 1,
    issuedAt: T0,
    expiresAt: T0 + 1,
    records: [rec({})],
    tombstones: [{ key_id: 'key_a', at: T0 }],
  });
  const { index } = await openKeyBundle(text, [trusted]);
  const v = index.check(SECRET_A, { now: T0, ip: null, region: 'local' });
  assert.equal(!v.ok && v.reason, 'revoked');
});

test('a key bundle with a bad signature or the wrong type is refused', async () => {
  const { signer, trusted } = await keyPair();
  const text = await buildKeyBundle({
    issuer: 'cell-a',
    signer,
    audience: 'dev-1',
    version: 1,
    issuedAt: T0,
    expiresAt: T0 + 1,
    records: [rec({})],
    tombstones: [],
  });
  const widened = text.replace('"scope_sets":[["agent_teams.read"]]', '"scope_sets":[["*"]]');
  assert.notEqual(widened, text);
  await assert.rejects(openKeyBundle(widened, [trusted]), (e) => (e as { details: { reason: string } }).details.reason === 'bad_signature');
});

test('formats 3 and 4: the token section (with the live clients and the delegation limit) and every principal travel signed; a malformed section is refused', async () => {
  const { signer, trusted } = await keyPair();
  const tokens = {
    issuer: 'service://cell-a',
    keys: [{ kid: 'k1', kty: 'OKP' as const, crv: 'Ed25519' as const, x: 'A'.repeat(43), alg: 'EdDSA' as const }],
    revoked: [['jti-1', 1_800_000_000] as [string, number]],
    clients: ['ocl_b', 'ocl_a', 'ocl_b'],
  };
  const base = {
    issuer: 'cell-a',
    signer,
    audience: 'dev-1',
    version: 1,
    issuedAt: T0,
    expiresAt: T0 + 86_400_000,
    records: [rec({})],
    tombstones: [],
  };
  const { opened, index } = await openKeyBundle(
    await buildKeyBundle({ ...base, tokens, subjects: { svc_2: { status: 'active', permissions: ['edge'] } } }),
    [trusted],
  );
  assert.equal(opened.payload.format_version, 4);
  assert.deepEqual(index.tokens, { ...tokens, clients: ['ocl_a', 'ocl_b'], max_act_depth: 3 }, 'clients sorted, once each');
  assert.deepEqual(index.owner('svc_2'), { status: 'active', permissions: ['edge'] });
  assert.deepEqual(
    index.owner('p_1'),
    { status: 'active', permissions: ['agent_teams', 'edge.read'] },
    'a key owner stays as its record says',
  );
  assert.equal(index.owner('nobody'), undefined);
  assert.equal((await openKeyBundle(await buildKeyBundle(base), [trusted])).index.tokens, null, 'issued without a token section');

  const reason = (e: unknown) => (e as { details?: { reason?: string } }).details?.reason;
  const sealed = async (payload: Record<string, unknown>) =>
    sealEnvelope({ ...JSON.parse(splitEnvelope(await buildKeyBundle({ ...base, tokens }))!.payload), ...payload }, signer);
  for (const [what, over] of [
    ['a private key among the token keys', { tokens: { ...tokens, keys: [{ ...tokens.keys[0], d: 'secret' }] } }],
    ['an RSA token key', { tokens: { ...tokens, keys: [{ ...tokens.keys[0], kty: 'RSA' }] } }],
    ['a revoked entry without exp', { tokens: { ...tokens, revoked: [['jti-1']] } }],
    ['format 3 without a token member', { tokens: undefined }],
    ['format 3 without the live clients', { tokens: { ...tokens, clients: undefined } }],
    ['a client id that is not a string', { tokens: { ...tokens, clients: ['ocl_a', 7] } }],
    ['format 2 with a client list', { format_version: 2 }],
    ['format 1 with a token section', { format_version: 1 }],
    ['format 4 without the delegation limit', { tokens: { ...tokens, clients: ['ocl_a'] } }],
    ['a delegation limit of 0', { tokens: { ...tokens, max_act_depth: 0 } }],
    ['a delegation limit past 16', { tokens: { ...tokens, max_act_depth: 17 } }],
    ['a delegation limit that is not an integer', { tokens: { ...tokens, max_act_depth: 2.5 } }],
    ['format 3 with a delegation limit', { format_version: 3, tokens: { ...tokens, max_act_depth: 3 } }],
    ['an owner without permissions', { owners: { p_1: { status: 'active' } } }],
  ] as const) {
    await assert.rejects(openKeyBundle(await sealed(over as Record<string, unknown>), [trusted]), (e) => reason(e) === 'malformed', what);
  }
  await assert.rejects(openKeyBundle(await sealed({ format_version: 5 }), [trusted]), (e) => reason(e) === 'unsupported_format');
  // Format 3 (no delegation limit) still loads; its device applies core's default.
  const v3 = await openKeyBundle(await sealed({ format_version: 3, tokens: { ...tokens, clients: ['ocl_a'] } }), [trusted]);
  assert.equal(v3.index.tokens?.max_act_depth, undefined);
  // Format 2 (no client list) still loads; its device cannot tell a deleted client.
  const { clients: _, ...v2tokens } = tokens;
  const v2 = await openKeyBundle(await sealed({ format_version: 2, tokens: v2tokens }), [trusted]);
  assert.equal(v2.index.tokens?.clients, undefined);
});

test("format 4's optional issuers: the group's accepted issuers travel signed, the issuer among them; malformed lists are refused", async () => {
  const { signer, trusted } = await keyPair();
  const tokens = {
    issuer: 'https://auth.example.test',
    issuers: ['service://cell-a', 'https://auth.example.test', 'service://cell-a'],
    keys: [{ kid: 'k1', kty: 'OKP' as const, crv: 'Ed25519' as const, x: 'A'.repeat(43), alg: 'EdDSA' as const }],
    revoked: [] as [string, number][],
    clients: [],
    max_act_depth: 3,
  };
  const base = {
    issuer: 'cell-a',
    signer,
    audience: 'dev-1',
    version: 1,
    issuedAt: T0,
    expiresAt: T0 + 86_400_000,
    records: [],
    tombstones: [],
  };
  const { index } = await openKeyBundle(await buildKeyBundle({ ...base, tokens }), [trusted]);
  assert.deepEqual(index.tokens?.issuers, ['https://auth.example.test', 'service://cell-a'], 'the issuer first, each once');
  const judge = tokenJudgeFromBundle(index, { audience: 'edge:dev-1', replay: new MemoryReplayCache() })!;
  assert.deepEqual(judge.issuer, ['https://auth.example.test', 'service://cell-a']);
  const { issuers: _, ...single } = tokens;
  const plain = await openKeyBundle(await buildKeyBundle({ ...base, tokens: single }), [trusted]);
  assert.equal(plain.index.tokens?.issuers, undefined, 'absent unless given');
  assert.equal(tokenJudgeFromBundle(plain.index, { audience: 'edge:dev-1', replay: new MemoryReplayCache() })!.issuer, tokens.issuer);

  const reason = (e: unknown) => (e as { details?: { reason?: string } }).details?.reason;
  const sealed = async (payload: Record<string, unknown>) =>
    sealEnvelope({ ...JSON.parse(splitEnvelope(await buildKeyBundle({ ...base, tokens }))!.payload), ...payload }, signer);
  for (const [what, over] of [
    ['issuers without the issuer', { tokens: { ...tokens, issuers: ['service://cell-a'] } }],
    ['issuers that is not a list', { tokens: { ...tokens, issuers: 'service://cell-a' } }],
    ['an issuer that is not a string', { tokens: { ...tokens, issuers: [tokens.issuer, 7] } }],
    ['an empty issuer', { tokens: { ...tokens, issuers: [tokens.issuer, ''] } }],
    ['format 3 with issuers', { format_version: 3, tokens: { ...single, max_act_depth: undefined, issuers: [tokens.issuer] } }],
  ] as const) {
    await assert.rejects(openKeyBundle(await sealed(over as Record<string, unknown>), [trusted]), (e) => reason(e) === 'malformed', what);
  }
});
