// Recorded artifacts (test/bundles/fixtures/: v1 written once by _make-fixtures.mts, the format 2 key
// bundle by _make-fixtures-v2.mts, the format 3 one by _make-fixtures-v3.mts, the format 3 journal export
// by _make-fixtures-journal-v3.mts) still verify and still
// mean the same: a change to the formats or to core that breaks artifacts in the field fails here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { openKeyBundle } from '../../bundles/key-bundle.ts';
import { openModelManifest } from '../../bundles/model-manifest.ts';
import { openJournalExport } from '../../bundles/journal-export.ts';
import { edgeAudience, tokenJudgeFromBundle } from '../../bundles/token-trust.ts';
import { judgeAccessToken } from '../../core/tokens/judge.ts';
import { MemoryReplayCache } from '../../core/tokens/replay.ts';

const dir = join(import.meta.dirname, 'fixtures');
const read = (f: string) => readFileSync(join(dir, f));
const keys = JSON.parse(readFileSync(join(dir, 'public-keys.json'), 'utf8')) as Record<
  'cell' | 'device' | 'publisher',
  { kid: string; jwk: JsonWebKey }
>;
const T0 = Date.UTC(2026, 0, 1);
/** The cell and device public keys a format 2, 3 or 4 fixture was written with. */
const publicKeys = (v: 'v2' | 'v3' | 'v4') =>
  JSON.parse(readFileSync(join(dir, `public-keys.${v}.json`), 'utf8')) as Record<'cell' | 'device', { kid: string; jwk: JsonWebKey }>;
/** A bearer request to the device one second after the fixtures' clock. */
const facts = {
  scheme: 'bearer' as const,
  method: 'GET',
  uri: 'http://device/x',
  dpop: null,
  certThumbprint: () => null,
  now: T0 + 1000,
};

test('recorded key bundle v1 verifies and judges keys as recorded', async () => {
  const { opened, index } = await openKeyBundle(read('keys.v1.bundle'), [keys.cell]);
  assert.equal(opened.payload.version, 7);
  assert.equal(opened.payload.issuer, 'cell-fixture');
  assert.equal(opened.payload.audience, keys.device.kid);
  const ctx = { now: T0, ip: '10.1.2.3', region: 'local' };
  assert.deepEqual(index.check('svck_live_' + 'F'.repeat(43), ctx), {
    ok: true,
    effective: ['agent_teams.read'],
    matched: 'current',
    record: index.byId('key_00000000000000000001'),
  });
  assert.equal((index.check('svck_live_' + 'G'.repeat(43), ctx) as { matched?: string }).matched, 'previous');
  assert.equal((index.check('svck_live_' + 'G'.repeat(43), { ...ctx, now: T0 + 3600_000 }) as { reason?: string }).reason, 'grace_elapsed');
  assert.equal((index.check('svck_live_' + 'F'.repeat(43), { ...ctx, ip: '192.168.1.1' }) as { reason?: string }).reason, 'ip_not_allowed');
  assert.ok(index.tombstoned.has('key_00000000000000000002'));
});

test('recorded model manifest v1 verifies', async () => {
  const m = await openModelManifest(read('model.v1.manifest'), [keys.publisher]);
  assert.equal(m.payload.model.sha256, 'c7d166504041737c2a7304bf3fc3175284874b5b99041ff4f53eaa5a27224a14');
});

test('recorded journal export v1 verifies (envelope, every record, the chain, the values)', async () => {
  const j = await openJournalExport(read('journal.v1.export'), keys.device, 'cell-fixture');
  assert.equal(j.payload.records.length, 3);
  assert.equal(j.payload.run.outcome, 'completed');
});

test("recorded journal export v3 verifies with the run's inclusion in the device's run log", async () => {
  const dev = (JSON.parse(readFileSync(join(dir, 'public-keys.journal-v3.json'), 'utf8')) as { device: { kid: string; jwk: JsonWebKey } })
    .device;
  const j = await openJournalExport(read('journal.v3.export'), dev, 'cell-fixture');
  assert.equal(j.payload.format_version, 3);
  assert.equal(j.payload.log?.leaf_index, 1);
  assert.equal(j.payload.log?.tree_size, 3);
});

test('recorded key bundle v2 verifies, judges keys, and judges the recorded tokens as recorded', async () => {
  const v2 = publicKeys('v2');
  const tokens = JSON.parse(readFileSync(join(dir, 'tokens.v2.json'), 'utf8')) as Record<'good' | 'revoked' | 'archived_subject', string>;
  const { opened, index } = await openKeyBundle(read('keys.v2.bundle'), [v2.cell]);
  assert.equal(opened.payload.format_version, 2);
  assert.equal(opened.payload.version, 8);
  assert.equal((index.check('svck_live_' + 'F'.repeat(43), { now: T0, ip: null, region: 'local' }) as { ok: boolean }).ok, true);
  const judge = tokenJudgeFromBundle(index, { audience: edgeAudience(v2.device.kid), replay: new MemoryReplayCache() })!;
  assert.equal(judge.issuer, 'service://cell-fixture');
  const good = await judgeAccessToken(tokens.good, facts, judge);
  assert.ok(good.ok);
  assert.deepEqual(good.effective, ['catalog.read', 'edge.read']);
  assert.equal(((await judgeAccessToken(tokens.revoked, facts, judge)) as { code: string }).code, 'revoked');
  assert.equal(((await judgeAccessToken(tokens.archived_subject, facts, judge)) as { code: string }).code, 'revoked');
  assert.equal(((await judgeAccessToken(tokens.good, { ...facts, now: T0 + 600_000 }, judge)) as { code: string }).code, 'expired');
  const other = tokenJudgeFromBundle(index, { audience: edgeAudience('another-device'), replay: new MemoryReplayCache() })!;
  assert.equal(((await judgeAccessToken(tokens.good, facts, other)) as { code: string }).code, 'bad_audience');
  // Format 2 carries no client list: its device cannot tell a deleted client, and makes no such check.
  assert.equal(judge.clientExists, undefined);
});

test('recorded key bundle v3 verifies and refuses the token of a client deleted before it, as the cell does', async () => {
  const v3 = publicKeys('v3');
  const tokens = JSON.parse(readFileSync(join(dir, 'tokens.v3.json'), 'utf8')) as Record<
    'good' | 'revoked' | 'archived_subject' | 'deleted_client',
    string
  >;
  const { opened, index } = await openKeyBundle(read('keys.v3.bundle'), [v3.cell]);
  assert.equal(opened.payload.format_version, 3);
  assert.equal(opened.payload.version, 9);
  assert.deepEqual(index.tokens?.clients, ['ocl_fixture']);
  const judge = tokenJudgeFromBundle(index, { audience: edgeAudience(v3.device.kid), replay: new MemoryReplayCache() })!;
  const good = await judgeAccessToken(tokens.good, facts, judge);
  assert.ok(good.ok);
  assert.deepEqual(good.effective, ['catalog.read', 'edge.read']);
  assert.equal(((await judgeAccessToken(tokens.revoked, facts, judge)) as { code: string }).code, 'revoked');
  assert.equal(((await judgeAccessToken(tokens.archived_subject, facts, judge)) as { code: string }).code, 'revoked');
  const gone = await judgeAccessToken(tokens.deleted_client, facts, judge);
  assert.deepEqual(gone, { ok: false, code: 'revoked', message: 'the client this token was issued to no longer exists' });
});

test('recorded key bundle v4 carries the delegation limit; chains and their links are judged as the cell does', async () => {
  const v4 = publicKeys('v4');
  const tokens = JSON.parse(readFileSync(join(dir, 'tokens.v4.json'), 'utf8')) as Record<
    'two_hops' | 'three_hops' | 'subject_revoked' | 'actor_archived' | 'url_issuer' | 'undeclared_issuer',
    string
  >;
  const { opened, index } = await openKeyBundle(read('keys.v4.bundle'), [v4.cell]);
  assert.equal(opened.payload.format_version, 4);
  assert.equal(index.tokens?.max_act_depth, 2);
  const judge = tokenJudgeFromBundle(index, { audience: edgeAudience(v4.device.kid), replay: new MemoryReplayCache() })!;
  assert.equal(judge.maxActDepth, 2);
  const two = await judgeAccessToken(tokens.two_hops, facts, judge);
  assert.ok(two.ok);
  // The subject's permissions ∩ the scope ∩ every actor's: svc_b holds edge.read only.
  assert.deepEqual(two.effective, ['edge.read']);
  assert.deepEqual(two.credential.actors, ['svc_0000000000000000000b', 'svc_0000000000000000000a']);
  assert.equal(((await judgeAccessToken(tokens.three_hops, facts, judge)) as { code: string }).code, 'delegation_too_deep');
  assert.equal(((await judgeAccessToken(tokens.subject_revoked, facts, judge)) as { code: string }).code, 'revoked');
  assert.equal(((await judgeAccessToken(tokens.actor_archived, facts, judge)) as { code: string }).code, 'revoked');
  // The optional issuers list: a token under the group's declared URL is the group's; any other is refused.
  assert.deepEqual(index.tokens?.issuers, ['service://cell-fixture', 'https://auth.cell-fixture.test']);
  assert.ok((await judgeAccessToken(tokens.url_issuer, facts, judge)).ok);
  assert.equal(((await judgeAccessToken(tokens.undeclared_issuer, facts, judge)) as { code: string }).code, 'bad_issuer');
});

test('a format 3 bundle names no delegation limit: its device judges chains with the default (3)', async () => {
  const v3 = publicKeys('v3');
  const { index } = await openKeyBundle(read('keys.v3.bundle'), [v3.cell]);
  assert.equal(index.tokens?.max_act_depth, undefined);
  const judge = tokenJudgeFromBundle(index, { audience: 'edge:x', replay: new MemoryReplayCache() })!;
  assert.equal(judge.maxActDepth, undefined);
});
