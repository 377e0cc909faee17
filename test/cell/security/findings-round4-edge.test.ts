// Findings of the fourth security review (issue 36) about devices and bundles, each performed as
// described against the real app and store: a principal holding `edge.write` (and little else) tries
// to take the owner's crew and keys to a device of its own. The rules (docs/security.md): exporting a
// crew needs the right to run it; a key bundle carries only the credentials its issuer could act on,
// for no longer than the cell's configured maximum.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { actor } from '../../helpers/actors.ts';
import { generateEd25519 } from '../../../bundles/codec.ts';
import { openKeyBundle } from '../../../bundles/key-bundle.ts';
import { openCrewBundle } from '../../../bundles/crew-bundle.ts';

const A = '/api/public/v1/admin';
const T = `${A}/agent-teams`;
const DAY = 24 * 3600;

async function must(t: InProcess, method: string, path: string, body?: unknown, token = t.adminKey): Promise<any> {
  const r = await t.request(method, path, { token, ...(body !== undefined ? { body } : {}) });
  assert.ok(r.status >= 200 && r.status < 300, `${method} ${path} -> ${r.status} ${r.text}`);
  return r.body;
}

/** A device registered by the holder of `token`; its id and the trust anchor. */
async function device(t: InProcess, token: string): Promise<{ id: string; trust: { kid: string; jwk: JsonWebKey }[] }> {
  const k = await generateEd25519();
  const r = await must(t, 'POST', `${A}/edge/devices`, { name: `dev-${k.kid.slice(0, 6)}`, public_jwk: k.publicJwk }, token);
  return { id: r.device_id, trust: r.trust.keys };
}

/** The owner's crew of one wide seat: a prompt, tools and egress a narrow principal may not run. */
async function ownersCrew(t: InProcess): Promise<string> {
  const wide = {
    allowed_tools: ['calc', 'http.get'],
    clearance_level: 3,
    permission_mode: 'auto',
    egress_allowlist: ['https://owner.example'],
  };
  const a = await must(t, 'POST', `${T}/agents`, {
    source: 'scratch',
    role_label: 'secret-keeper',
    system_prompt: 'OWNER-ONLY PROMPT',
    authority_template: wide,
  });
  const f = await must(t, 'POST', `${T}/formations`, { name: 'owner-ops', prompt: 'owner formation prompt' });
  const b = await must(t, 'POST', `${T}/formations/${f.formation_id}/billets`, {
    role_label: 'r',
    required_skills: [],
    authority_cap: wide,
  });
  return (await must(t, 'POST', `${T}/crews`, { formation_id: f.formation_id, assignments: { [b.billet_id]: a.agent_id } })).crew_id;
}

const crewVersion = async (t: InProcess) => (await t.row("SELECT version FROM edge_bundle_versions WHERE type = 'crew'"))?.['version'] ?? 0;

test("finding 12: edge.write alone does not export the owner's crew; exporting needs the right to run it", async () => {
  const t = await inProcessCell();
  try {
    const crew = await ownersCrew(t);
    const edgeOnly = await actor(t, { name: 'edge-only', permissions: ['edge.write', 'edge.read'] });
    const dev = await device(t, edgeOnly.key);
    const before = await crewVersion(t);
    const r = await t.request('POST', `${A}/edge/crew-bundles`, { token: edgeOnly.key, body: { device_id: dev.id, crew_id: crew } });
    assert.equal(r.status, 403, r.text);
    assert.equal(r.body.details.required_permission, 'agent_teams.write');
    assert.ok(!r.text.includes('OWNER-ONLY PROMPT'));

    // With agent_teams.write but a ceiling below the crew's seats: the seat check of a run's start refuses it.
    const runner = await actor(t, {
      name: 'narrow-runner',
      permissions: ['edge.write', 'edge.read', 'agent_teams.write', 'agent_teams.read'],
      authority: { allowed_tools: ['calc'], clearance_level: 0, permission_mode: 'ask' },
    });
    const dev2 = await device(t, runner.key);
    const started = await t.request('POST', `${T}/crews/${crew}/runs`, { token: runner.key, body: { input: 'x' } });
    assert.equal(started.status, 403, 'the same caller may not start a run of the crew');
    const r2 = await t.request('POST', `${A}/edge/crew-bundles`, { token: runner.key, body: { device_id: dev2.id, crew_id: crew } });
    assert.equal(r2.status, 403, r2.text);
    assert.equal(r2.body.details.reason, 'wider_than_caller');
    assert.ok(!r2.text.includes('OWNER-ONLY PROMPT'));
    assert.equal(await crewVersion(t), before, 'no crew bundle was issued');
    const audited = await t.rows("SELECT actor, target FROM audit WHERE action = 'edge.crew_bundle.issue' AND outcome = 'refused'");
    assert.deepEqual(
      audited.map((x) => [x['actor'], x['target']]),
      [[runner.id, crew]],
    );

    // Whoever may run the crew exports it.
    const ok = await t.request('POST', `${A}/edge/crew-bundles`, { token: t.adminKey, body: { device_id: dev2.id, crew_id: crew } });
    assert.equal(ok.status, 201, ok.text);
    const opened = await openCrewBundle(ok.text, dev2.trust);
    assert.equal(opened.payload.crew.crew_id, crew);
  } finally {
    await t.close();
  }
});

test('finding 12: a key bundle lives at most the configured maximum and carries only what its issuer could act on', async () => {
  const t = await inProcessCell({ config: { maxKeyBundleTtlSeconds: 10 * DAY } });
  try {
    const ownerKey = (await must(t, 'GET', `${A}/whoami`)).credential.id as string;
    const issuer = await actor(t, {
      name: 'bundler',
      permissions: ['edge.write', 'edge.read', 'iam.keys.read'],
      authority: { clearance_level: 1 },
    });
    // A principal the issuer manages (it holds all of its authority), with a key; and one it does not.
    const managed = await actor(t, { name: 'managed', permissions: ['edge.read'], authority: { clearance_level: 0 } });
    const other = await actor(t, { name: 'other', permissions: ['audit.read'], authority: { clearance_level: 0 } });
    // The issuer's own wider key: its authority exceeds the key the issuer presents.
    const own = await must(t, 'POST', `${A}/api-keys`, { name: 'narrow', owner_id: issuer.id, scopes: ['edge.write', 'edge.read'] });
    const dev = await device(t, issuer.key);

    for (const ttl of [365 * DAY, 10 * DAY + 1]) {
      const r = await t.request('POST', `${A}/edge/key-bundles`, { token: issuer.key, body: { device_id: dev.id, ttl_seconds: ttl } });
      assert.equal(r.status, 400, r.text);
      assert.equal(r.body.details.reason, 'ttl_too_long');
      assert.equal(r.body.details.max_ttl_seconds, 10 * DAY);
    }
    assert.equal((await t.row("SELECT version FROM edge_bundle_versions WHERE type = 'api-key-records'")) ?? undefined, undefined);

    // The narrow key of the issuer issues: its own wider key is left out with everything it does not manage.
    const r = await t.request('POST', `${A}/edge/key-bundles`, { token: own.secret, body: { device_id: dev.id, ttl_seconds: 10 * DAY } });
    assert.equal(r.status, 201, r.text);
    const { opened, index } = await openKeyBundle(r.text, dev.trust);
    assert.equal(opened.payload.expires_at! - opened.payload.issued_at, 10 * DAY * 1000);
    assert.equal(index.byId(ownerKey), undefined, "the owner's key is not in the bundle");
    assert.equal(index.byId(other.keyId), undefined, 'a key of a principal the issuer does not manage is not in the bundle');
    assert.equal(index.byId(issuer.keyId), undefined, "the issuer's own key wider than the presented one is not in it");
    assert.ok(index.byId(own.key_id), 'the presented key is');
    assert.ok(index.byId(managed.keyId), 'a key of a principal the issuer manages is');
    const subjects = Object.keys(opened.payload.owners);
    const ownerId = (await must(t, 'GET', `${A}/whoami`)).principal.id as string;
    assert.ok(!subjects.includes(ownerId), 'the owner is no token subject of the bundle');
    assert.ok(!subjects.includes(other.id));
    assert.ok(subjects.includes(issuer.id) && subjects.includes(managed.id));

    // The issuer's full key (the principal's whole authority) carries its own key too; the default lifetime is 7 days.
    const full = await t.request('POST', `${A}/edge/key-bundles`, { token: issuer.key, body: { device_id: dev.id } });
    assert.equal(full.status, 201, full.text);
    const f = await openKeyBundle(full.text, dev.trust);
    assert.equal(f.opened.payload.expires_at! - f.opened.payload.issued_at, 7 * DAY * 1000);
    assert.ok(f.index.byId(issuer.keyId) && f.index.byId(own.key_id) && f.index.byId(managed.keyId));
    assert.equal(f.index.byId(ownerKey), undefined);

    // The owner's bundle carries every key.
    const all = await t.request('POST', `${A}/edge/key-bundles`, { token: t.adminKey, body: { device_id: dev.id } });
    const a = await openKeyBundle(all.text, dev.trust);
    for (const k of [ownerKey, other.keyId, issuer.keyId, own.key_id, managed.keyId]) assert.ok(a.index.byId(k), k);
    assert.ok(Object.keys(a.opened.payload.owners).includes(ownerId));
  } finally {
    await t.close();
  }
});

const deviceRow = (t: InProcess, id: string) => t.row('SELECT status, status_by FROM edge_devices WHERE device_id = ?', [id]);

test('a device can be disabled, enabled and deleted by whoever may act on it; a disabled device gets nothing', async () => {
  const t = await inProcessCell();
  try {
    const crew = await ownersCrew(t);
    const owners = await device(t, t.adminKey);
    const ops = await actor(t, { name: 'field-ops', permissions: ['edge.write', 'edge.read', 'agent_teams.write', 'iam.sats.write'] });
    const mine = await device(t, ops.key);

    // Another principal's device: a narrow edge.write key neither changes it nor issues its bundles.
    const before = await deviceRow(t, owners.id);
    for (const [method, path, body] of [
      ['POST', `${A}/edge/devices/${owners.id}/disable`, undefined],
      ['POST', `${A}/edge/devices/${owners.id}/enable`, undefined],
      ['DELETE', `${A}/edge/devices/${owners.id}`, undefined],
      ['POST', `${A}/edge/key-bundles`, { device_id: owners.id }],
    ] as const) {
      const r = await t.request(method, path, { token: ops.key, ...(body ? { body } : {}) });
      assert.equal(r.status, 403, `${method} ${path}: ${r.text}`);
      assert.equal(r.body.details.reason, 'wider_than_caller');
      assert.equal(r.body.details.credential.kind, 'device');
    }
    assert.deepEqual(await deviceRow(t, owners.id), before, "the owner's device is as it was");
    const refused = await t.rows("SELECT action FROM audit WHERE actor = ? AND outcome = 'refused' ORDER BY seq", [ops.id]);
    assert.deepEqual(
      refused.map((r) => r['action']),
      ['edge.device.disable', 'edge.device.enable', 'edge.device.delete', 'edge.key_bundle.issue'],
    );

    // Its own device: disabled, it gets no bundle, no token for its audience, no journal import.
    const sat = () => t.request('POST', `${A}/sats`, { token: ops.key, body: { scope: ['edge.read'], resource: `edge:${mine.id}` } });
    assert.equal((await sat()).status, 201);
    const off = await t.request('POST', `${A}/edge/devices/${mine.id}/disable`, { token: ops.key });
    assert.equal(off.status, 200, off.text);
    assert.equal(off.body.status, 'disabled');
    assert.equal(off.body.status_changed_by, ops.id);
    assert.equal((await t.request('POST', `${A}/edge/devices/${mine.id}/disable`, { token: ops.key })).status, 200, 'idempotent');
    for (const [path, body] of [
      [`${A}/edge/key-bundles`, { device_id: mine.id }],
      [`${A}/edge/crew-bundles`, { device_id: mine.id, crew_id: crew }],
    ] as const) {
      const r = await t.request('POST', path, { token: t.adminKey, body });
      assert.equal(r.status, 409, r.text);
      assert.equal(r.body.details.reason, 'device_disabled');
    }
    const token = await sat();
    assert.equal(token.status, 400, token.text);
    assert.equal(token.body.details.reason, 'invalid_target');
    assert.equal((await t.request('POST', `${A}/edge/devices/${mine.id}/enable`, { token: ops.key })).body.status, 'active');
    assert.equal((await t.request('POST', `${A}/edge/key-bundles`, { token: ops.key, body: { device_id: mine.id } })).status, 201);

    // Deleted (soft): gone from the list, kept with include_deleted, its key not registered again.
    const del = await t.request('DELETE', `${A}/edge/devices/${mine.id}`, { token: ops.key });
    assert.equal(del.status, 200, del.text);
    assert.equal(del.body.status, 'deleted');
    assert.equal((await t.request('DELETE', `${A}/edge/devices/${mine.id}`, { token: ops.key })).status, 200, 'idempotent');
    const listed = (await must(t, 'GET', `${A}/edge/devices`)).devices.map((d: { device_id: string }) => d.device_id);
    assert.ok(!listed.includes(mine.id) && listed.includes(owners.id));
    const all = await must(t, 'GET', `${A}/edge/devices?include_deleted=true`);
    assert.equal(all.devices.find((d: { device_id: string }) => d.device_id === mine.id).status, 'deleted');
    const enable = await t.request('POST', `${A}/edge/devices/${mine.id}/enable`, { token: ops.key });
    assert.equal(enable.status, 409);
    assert.equal(enable.body.details.reason, 'device_deleted');
    assert.equal((await t.request('POST', `${A}/edge/key-bundles`, { token: t.adminKey, body: { device_id: mine.id } })).status, 404);
    assert.equal((await sat()).status, 400);
    const ok = await t.rows(
      "SELECT action, details FROM audit WHERE actor = ? AND outcome = 'ok' AND action LIKE 'edge.device.%' ORDER BY seq",
      [ops.id],
    );
    assert.deepEqual(
      ok.map((r) => [r['action'], JSON.parse(String(r['details'] ?? '{}')).from ?? null]),
      [
        ['edge.device.register', null],
        ['edge.device.disable', 'active'],
        ['edge.device.enable', 'disabled'],
        ['edge.device.delete', 'active'],
      ],
    );
    // The owner (who manages every principal) may act on any device.
    assert.equal((await t.request('POST', `${A}/edge/devices/${owners.id}/disable`, { token: t.adminKey })).status, 200);
  } finally {
    await t.close();
  }
});
