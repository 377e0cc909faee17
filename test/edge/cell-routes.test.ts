// The cell side of the edge: device registration, key bundles, journal import (in-process).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inProcessCell } from '../helpers/inproc.ts';
import { openKeyBundle } from '../../bundles/key-bundle.ts';
import { acceptArtifact, emptyDeviceState } from '../../bundles/accept.ts';
import { buildJournalExport } from '../../bundles/journal-export.ts';
import { generateEd25519, signerFromJwk } from '../../bundles/codec.ts';
import { sealRecord } from '../../core/journal/seal.ts';
import { GENESIS_HASH, type JournalRecord } from '../../core/journal/record.ts';
import { recordHash } from '../../core/journal/hash.ts';
import { contentHash } from '../../core/canonical.ts';

const A = '/api/public/v1/admin';
const SIGNED = { 'content-type': 'application/vnd.agent-cell.signed' };

test('register a device, issue key bundles with rising versions, judge keys like the cell', async () => {
  const t = await inProcessCell();
  try {
    const dev = await generateEd25519();
    const reg = await t.request('POST', `${A}/edge/devices`, { token: t.adminKey, body: { name: 'field-1', public_jwk: dev.publicJwk } });
    assert.equal(reg.status, 201, reg.text);
    assert.equal(reg.body.device_id, dev.kid);
    assert.equal(reg.body.trust.cell_id, 'cell-test');
    const again = await t.request('POST', `${A}/edge/devices`, { token: t.adminKey, body: { name: 'x', public_jwk: dev.publicJwk } });
    assert.equal(again.status, 409);
    const priv = await t.request('POST', `${A}/edge/devices`, { token: t.adminKey, body: { name: 'x', public_jwk: dev.privateJwk } });
    assert.equal(priv.status, 400);

    const mint = await t.request('POST', `${A}/api-keys`, { token: t.adminKey, body: { name: 'k', scopes: ['edge.read'] } });
    assert.equal(mint.status, 201, mint.text);
    const revoked = await t.request('POST', `${A}/api-keys`, { token: t.adminKey, body: { name: 'r' } });
    await t.request('POST', `${A}/api-keys/${revoked.body.key_id}/revoke`, { token: t.adminKey });

    const b1 = await t.request('POST', `${A}/edge/key-bundles`, { token: t.adminKey, body: { device_id: dev.kid } });
    assert.equal(b1.status, 201, b1.text);
    assert.ok(!b1.text.includes(mint.body.secret.slice(10)), 'no secret in the bundle');
    const b2 = await t.request('POST', `${A}/edge/key-bundles`, { token: t.adminKey, body: { device_id: dev.kid, ttl_seconds: 60 } });
    const { opened, index } = await openKeyBundle(b2.text, reg.body.trust.keys);
    assert.equal(opened.payload.version, 2);
    assert.equal(opened.payload.audience, dev.kid);
    const st = acceptArtifact(emptyDeviceState(dev.kid), opened, { now: t.clock.now(), issuer: 'cell-test' });
    const old = await openKeyBundle(b1.text, reg.body.trust.keys);
    assert.throws(() => acceptArtifact(st, old.opened, { now: t.clock.now(), issuer: 'cell-test' }), /lower/);

    const ctx = { now: t.clock.now(), ip: '127.0.0.1', region: t.core.config.region };
    const v = index.check(mint.body.secret, ctx);
    assert.ok(v.ok);
    assert.deepEqual(v.ok && v.effective, ['edge.read']);
    const r = index.check(revoked.body.secret, ctx);
    assert.equal(!r.ok && r.reason, 'revoked');
    const cellSays = await t.request('GET', `${A}/edge/devices`, { token: revoked.body.secret });
    assert.equal(cellSays.body.details.reason, 'revoked');

    const unknownDev = await t.request('POST', `${A}/edge/key-bundles`, { token: t.adminKey, body: { device_id: 'A'.repeat(43) } });
    assert.equal(unknownDev.status, 404);
    const noPerm = await t.request('POST', `${A}/edge/key-bundles`, { token: mint.body.secret, body: { device_id: dev.kid } });
    assert.equal(noPerm.status, 403);
  } finally {
    await t.close();
  }
});

async function journal(signer: { kid: string; sign(b: Uint8Array): Promise<Uint8Array> }, runId: string, n: number) {
  const graphHash = contentHash({ g: 1 });
  const records: JournalRecord[] = [];
  const values: Record<string, unknown> = {};
  let prev = GENESIS_HASH;
  for (let i = 1; i <= n; i++) {
    const out = { step: i };
    values[contentHash(out)] = out;
    const r = await sealRecord(
      {
        run_id: runId,
        seq: i,
        step_id: `s${i}`,
        kind: 'step',
        graph_hash: graphHash,
        input_hash: contentHash({}),
        output_hash: contentHash(out),
        at: 1000 + i,
        cell_id: signer.kid,
        epoch: 0,
      },
      prev,
      signer,
    );
    records.push(r);
    prev = recordHash(r);
  }
  values[contentHash({})] = {};
  return { graphHash, records, values };
}

test('import a journal exported by a registered device; refuse tampering and unknown devices', async () => {
  const t = await inProcessCell();
  try {
    const dev = await generateEd25519();
    await t.request('POST', `${A}/edge/devices`, { token: t.adminKey, body: { name: 'd', public_jwk: dev.publicJwk } });
    const signer = signerFromJwk(dev.kid, dev.privateJwk);
    const j = await journal(signer, 'run_edge1', 3);
    const text = await buildJournalExport({
      deviceId: dev.kid,
      signer,
      audience: 'cell-test',
      exportedAt: 5000,
      run: { run_id: 'run_edge1', crew_id: 'crew_1', graph_hash: j.graphHash, outcome: 'completed' },
      records: j.records,
      values: j.values,
    });
    const ok = await t.request('POST', `${A}/edge/journals`, { token: t.adminKey, rawBody: text, headers: SIGNED });
    assert.equal(ok.status, 201, ok.text);
    assert.equal(ok.body.record_count, 3);
    assert.equal(ok.body.verified, true);
    const again = await t.request('POST', `${A}/edge/journals`, { token: t.adminKey, rawBody: text, headers: SIGNED });
    assert.equal(again.status, 201, 'importing the same export twice is idempotent');
    const got = await t.request('GET', `${A}/edge/journals/run_edge1`, { token: t.adminKey });
    assert.equal(got.status, 400, 'a malformed run id is refused');
    assert.equal((await t.request('GET', `${A}/edge/journals/run_ffffffffffffffffffff`, { token: t.adminKey })).status, 404);
    const other = await journal(signer, 'run_0123456789abcdef0123', 2);
    const t5 = await buildJournalExport({
      deviceId: dev.kid,
      signer,
      audience: 'cell-test',
      exportedAt: 6000,
      run: { run_id: 'run_0123456789abcdef0123', crew_id: 'crew_1', graph_hash: other.graphHash, outcome: 'completed' },
      records: other.records,
      values: other.values,
    });
    assert.equal((await t.request('POST', `${A}/edge/journals`, { token: t.adminKey, rawBody: t5, headers: SIGNED })).status, 201);
    const read = await t.request('GET', `${A}/edge/journals/run_0123456789abcdef0123`, { token: t.adminKey });
    assert.equal(read.status, 200, read.text);
    assert.equal(read.body.records.length, 2);
    assert.equal(read.body.records[0].signer_kid, dev.kid);

    // A record altered after signing (re-sealed envelope by the device key): the record signature fails.
    const bad = structuredClone(j.records);
    bad[1]!.at = 99;
    const t2 = await buildJournalExport({
      deviceId: dev.kid,
      signer,
      audience: 'cell-test',
      exportedAt: 5000,
      run: { run_id: 'run_edge2', crew_id: 'crew_1', graph_hash: j.graphHash, outcome: 'completed' },
      records: bad.map((r) => ({ ...r, run_id: 'run_edge1' })),
      values: j.values,
    });
    const r2 = await t.request('POST', `${A}/edge/journals`, { token: t.adminKey, rawBody: t2, headers: SIGNED });
    assert.equal(r2.status, 403, r2.text);
    assert.equal(r2.body.details.reason, 'journal_invalid');

    // Envelope tampered: bad signature.
    const r3 = await t.request('POST', `${A}/edge/journals`, {
      token: t.adminKey,
      rawBody: text.replace('"completed"', '"failed"'),
      headers: SIGNED,
    });
    assert.equal(r3.status, 403);
    assert.equal(r3.body.details.reason, 'bad_signature');

    // Unregistered device.
    const stranger = await generateEd25519();
    const ss = signerFromJwk(stranger.kid, stranger.privateJwk);
    const js = await journal(ss, 'run_x', 1);
    const t4 = await buildJournalExport({
      deviceId: stranger.kid,
      signer: ss,
      audience: 'cell-test',
      exportedAt: 1,
      run: { run_id: 'run_x', crew_id: 'c', graph_hash: js.graphHash, outcome: 'completed' },
      records: js.records,
      values: js.values,
    });
    const r4 = await t.request('POST', `${A}/edge/journals`, { token: t.adminKey, rawBody: t4, headers: SIGNED });
    assert.equal(r4.status, 404);
  } finally {
    await t.close();
  }
});
