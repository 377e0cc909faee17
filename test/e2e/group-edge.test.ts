/**
 * Edge bundles across a group of cells: three real cell processes on one
 * PostgreSQL database issue key bundles for one device. The device pins one
 * trust anchor (the group's id and identity keys, the same from every cell)
 * and accepts the bundles of every cell in the order they were issued: the
 * versions only go up across the group, also when the cells issue at once,
 * and a bundle issued on one cell after a key was revoked on another carries
 * the revocation.
 *
 * Needs `node scripts/build.mjs` first, and PostgreSQL 15 (test/helpers/postgres.ts).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { acceptArtifact, emptyDeviceState } from '../../bundles/accept.ts';
import { generateEd25519 } from '../../bundles/codec.ts';
import { openKeyBundle } from '../../bundles/key-bundle.ts';
import { pgUnavailable } from '../helpers/postgres.ts';
import { call, msUntil, ok, startGroup, type Group } from '../helpers/group.ts';

const skip = pgUnavailable() ?? false;
const A = '/api/public/v1/admin';

describe('key bundles issued by a group of three cells', { skip, timeout: 120_000 }, () => {
  let g: Group;
  let cells: string[];
  before(async () => {
    g = await startGroup(3);
    cells = g.cells.map((c) => c.url);
  });
  after(async () => {
    await g?.stop();
  });

  async function bundle(base: string, deviceId: string): Promise<string> {
    const r = await call(base, 'POST', `${A}/edge/key-bundles`, { token: g.adminKey, body: { device_id: deviceId } });
    assert.equal(r.status, 201, r.text);
    return r.text;
  }

  test('one trust anchor; versions rise across the cells, also issued at once; a revocation on one cell is in the next bundle of another', async () => {
    const dev = await generateEd25519();
    const reg = await ok(cells[0]!, 'POST', `${A}/edge/devices`, {
      token: g.adminKey,
      body: { name: 'field-1', public_jwk: dev.publicJwk },
    });
    const trust = reg.trust as { cell_id: string; keys: { kid: string; jwk: JsonWebKey }[] };
    const group = (await ok(cells[2]!, 'GET', '/.well-known/oauth-authorization-server')).issuer as string;
    assert.equal(group, `service://${trust.cell_id}`, "the trust anchor names the group, the tokens' issuer");

    const key = await ok(cells[0]!, 'POST', `${A}/api-keys`, { token: g.adminKey, body: { name: 'field', scopes: ['edge.read'] } });
    // One after the other on every cell in turn: each version is higher than the last, and the device takes each.
    let state = emptyDeviceState(dev.kid);
    let last = 0;
    for (let i = 0; i < 6; i++) {
      const { opened } = await openKeyBundle(await bundle(cells[i % 3]!, dev.kid), trust.keys);
      assert.equal(opened.payload.issuer, trust.cell_id);
      assert.ok(opened.payload.version > last, `version ${opened.payload.version} after ${last}`);
      last = opened.payload.version;
      state = acceptArtifact(state, opened, { now: Date.now(), issuer: trust.cell_id });
    }

    // At once on the three cells: distinct versions, none lower than what came before.
    const texts = await Promise.all([0, 1, 2, 0, 1, 2, 0, 1, 2].map((i) => bundle(cells[i]!, dev.kid)));
    const versions = (await Promise.all(texts.map(async (t) => (await openKeyBundle(t, trust.keys)).opened.payload.version))).sort(
      (a, b) => a - b,
    );
    assert.equal(new Set(versions).size, versions.length, `distinct versions: ${versions}`);
    assert.ok(versions[0]! > last);
    last = versions.at(-1)!;

    // Revoked on cell 1, once cell 2 refuses it: cell 2's next bundle says revoked, and supersedes every earlier one.
    await ok(cells[1]!, 'POST', `${A}/api-keys/${key.key_id}/revoke`, { token: g.adminKey });
    await msUntil(
      'cell 2 to refuse the key',
      Date.now(),
      async () => (await call(cells[2]!, 'GET', `${A}/edge/devices`, { token: key.secret })).status === 401,
    );
    const { opened, index } = await openKeyBundle(await bundle(cells[2]!, dev.kid), trust.keys);
    assert.ok(opened.payload.version > last);
    state = acceptArtifact(state, opened, { now: Date.now(), issuer: trust.cell_id });
    const v = index.check(key.secret, { now: Date.now(), ip: '127.0.0.1', region: 'local' });
    assert.equal(!v.ok && v.reason, 'revoked');
    // An earlier bundle (the key still valid in it) is refused by the device as older.
    const older = await openKeyBundle(texts[0]!, trust.keys);
    assert.throws(() => acceptArtifact(state, older.opened, { now: Date.now(), issuer: trust.cell_id }), /lower/);
  });
});
