// The cell side of the edge: device registration, key bundles, journal import (in-process).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inProcessCell } from '../helpers/inproc.ts';
import { openKeyBundle } from '../../bundles/key-bundle.ts';
import { acceptArtifact, emptyDeviceState } from '../../bundles/accept.ts';
import { sealEnvelope } from '../../bundles/envelope.ts';
import { generateEd25519, signerFromJwk } from '../../bundles/codec.ts';
import { sealRecord } from '../../core/journal/seal.ts';
import { GENESIS_HASH, type JournalRecord } from '../../core/journal/record.ts';
import { recordHash } from '../../core/journal/hash.ts';
import { contentHash } from '../../core/canonical.ts';
import { crewOnDevice, deviceRun, exportRun } from './_device-run.ts';

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

/** A synthetic journal of `n` steps (the format 1 export below: refused before its records are judged). */
async function journal(signer: Signer, runId: string, n: number) {
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

type Signer = { kid: string; sign(b: Uint8Array): Promise<Uint8Array> };

/** A device registered at the cell, its signer, and the cell's crew carried to it (the graph its runs run). */
async function deviceWithCrew(t: Awaited<ReturnType<typeof inProcessCell>>, name: string) {
  const k = await generateEd25519();
  const r = await t.request('POST', `${A}/edge/devices`, { token: t.adminKey, body: { name, public_jwk: k.publicJwk } });
  assert.equal(r.status, 201, r.text);
  const signer = signerFromJwk(k.kid, k.privateJwk);
  return { signer, ...(await crewOnDevice(t, k.kid, r.body.trust.keys)) };
}

/** A device's signed export of a completed run of its crew; the run id and nonce default to a fresh bound pair. */
async function exportOf(
  d: Awaited<ReturnType<typeof deviceWithCrew>>,
  o: { run?: { run_id: string; run_nonce: string }; input?: string; tamper?: (r: JournalRecord[]) => JournalRecord[] } = {},
) {
  const r = await deviceRun(d.signer, d.graph, d.graphHash, { ...(o.run ? { run: o.run } : {}), ...(o.input ? { input: o.input } : {}) });
  assert.equal(r.result.outcome, 'completed');
  const text = await exportRun(d.signer, r, { crewId: d.crewId, ...(o.tamper ? { records: o.tamper(r.records) } : {}) });
  return { run: r.run, records: r.records, text };
}

test('import a journal exported by a registered device; refuse tampering and unknown devices', async () => {
  const t = await inProcessCell();
  try {
    const d = await deviceWithCrew(t, 'd');
    const dev = d.signer;
    const { run, records, text } = await exportOf(d);
    assert.match(run.run_id, /^run_[0-9a-f]{20}$/);
    const ok = await t.request('POST', `${A}/edge/journals`, { token: t.adminKey, rawBody: text, headers: SIGNED });
    assert.equal(ok.status, 201, ok.text);
    assert.equal(ok.body.record_count, records.length);
    assert.equal(ok.body.outcome, 'completed');
    assert.equal(ok.body.verified, true);
    const again = await t.request('POST', `${A}/edge/journals`, { token: t.adminKey, rawBody: text, headers: SIGNED });
    assert.equal(again.status, 201, 'importing the same export twice is idempotent');
    const got = await t.request('GET', `${A}/edge/journals/run_edge1`, { token: t.adminKey });
    assert.equal(got.status, 400, 'a malformed run id is refused');
    assert.equal((await t.request('GET', `${A}/edge/journals/run_ffffffffffffffffffff`, { token: t.adminKey })).status, 404);
    const read = await t.request('GET', `${A}/edge/journals/${run.run_id}`, { token: t.adminKey });
    assert.equal(read.status, 200, read.text);
    assert.equal(read.body.records.length, records.length);
    assert.equal(read.body.records[0].signer_kid, dev.kid);
    assert.equal(read.body.device_id, dev.kid);
    assert.ok(read.body.values !== undefined && Object.keys(read.body.values).length > 0, 'the owner reads the values');
    // The step values are the run's content: edge.read alone reads the records, not the values.
    const reader = await t.request('POST', `${A}/api-keys`, { token: t.adminKey, body: { name: 'edge-reader', scopes: ['edge.read'] } });
    assert.equal(reader.status, 201, reader.text);
    const narrow = await t.request('GET', `${A}/edge/journals/${run.run_id}`, { token: reader.body.secret });
    assert.equal(narrow.status, 200, narrow.text);
    assert.equal(narrow.body.records.length, records.length);
    assert.equal(narrow.body.values, undefined, 'no values without the run values permission');
    // Another export for the same run (by the same device; another input, so not an extension of it): 409.
    const other = await exportOf(d, { run, input: 'something else' });
    const dup = await t.request('POST', `${A}/edge/journals`, { token: t.adminKey, rawBody: other.text, headers: SIGNED });
    assert.equal(dup.status, 409, dup.text);
    assert.equal(dup.body.details.reason, 'journal_exists');

    // A record altered after signing (re-sealed envelope by the device key): the record signature fails.
    const bad = await exportOf(d, {
      tamper: (rs) => {
        const b = structuredClone(rs);
        b[1]!.at = 99;
        return b;
      },
    });
    const r2 = await t.request('POST', `${A}/edge/journals`, { token: t.adminKey, rawBody: bad.text, headers: SIGNED });
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
    const r4 = await t.request('POST', `${A}/edge/journals`, {
      token: t.adminKey,
      rawBody: (await exportOf({ ...d, signer: signerFromJwk(stranger.kid, stranger.privateJwk) })).text,
      headers: SIGNED,
    });
    assert.equal(r4.status, 404);
  } finally {
    await t.close();
  }
});

test('a run id is bound to the device that ran it: another registered device cannot import under it first', async () => {
  const t = await inProcessCell();
  try {
    const victimDevice = await deviceWithCrew(t, 'victim');
    const attackerDevice = await deviceWithCrew(t, 'attacker');
    const victim = victimDevice.signer;
    const attacker = attackerDevice.signer;
    const real = await exportOf(victimDevice);
    const stored = async () => (await t.rows('SELECT device_id FROM edge_journals WHERE run_id = ?', [real.run.run_id])).length;
    const refusals = async () =>
      (await t.rows("SELECT details FROM audit WHERE action = 'edge.journal.import' AND outcome = 'refused'")).map(
        (r) => JSON.parse(String(r['details'])).reason as string,
      );

    // The attacker learned the victim's run id (and even its nonce) and imports its own journal under it first.
    for (const run of [real.run, { run_id: real.run.run_id, run_nonce: 'f'.repeat(32) }]) {
      const forged = await exportOf(attackerDevice, { run });
      const r = await t.request('POST', `${A}/edge/journals`, { token: t.adminKey, rawBody: forged.text, headers: SIGNED });
      assert.equal(r.status, 403, r.text);
      assert.equal(r.body.error, 'forbidden');
      assert.equal(r.body.details.reason, 'run_not_of_device');
      assert.equal(await stored(), 0, 'nothing was stored under the run id');
    }
    assert.deepEqual(await refusals(), ['run_not_of_device', 'run_not_of_device'], 'each refusal is on the audit trail');

    // The device that ran it imports its journal, and the journal is its own.
    const ok = await t.request('POST', `${A}/edge/journals`, { token: t.adminKey, rawBody: real.text, headers: SIGNED });
    assert.equal(ok.status, 201, ok.text);
    assert.equal(ok.body.device_id, victim.kid);
    const read = await t.request('GET', `${A}/edge/journals/${real.run.run_id}`, { token: t.adminKey });
    assert.equal(read.body.device_id, victim.kid);
    assert.equal(read.body.record_count, real.records.length);

    // The list of carried journals: by device (each its own only, with its count), and every device's.
    const own = await exportOf(attackerDevice);
    assert.equal((await t.request('POST', `${A}/edge/journals`, { token: t.adminKey, rawBody: own.text, headers: SIGNED })).status, 201);
    const list = async (q: string) => (await t.request('GET', `${A}/edge/journals${q}`, { token: t.adminKey })).body;
    for (const [dev, run] of [
      [victim.kid, real.run.run_id],
      [attacker.kid, own.run.run_id],
    ] as const) {
      const l = await list(`?device_id=${encodeURIComponent(dev)}`);
      assert.deepEqual(
        l.journals.map((j: { run_id: string }) => j.run_id),
        [run],
      );
      assert.equal(l.total, 1);
    }
    const all = await list('');
    assert.deepEqual(all.journals.map((j: { run_id: string }) => j.run_id).sort(), [real.run.run_id, own.run.run_id].sort());
    assert.equal(all.total, 2);
    assert.equal((await list(`?device_id=${'A'.repeat(43)}`)).total, 0, 'a device with no journal');
    assert.equal((await t.request('GET', `${A}/edge/journals?device_id=nobody`, { token: t.adminKey })).status, 400);

    // A format 1 export (no nonce: its run id is bound to nothing) is refused.
    const j = await journal(attacker, 'run_00000000000000000042', 1);
    const v1 = await sealEnvelope(
      {
        format_version: 1,
        type: 'journal',
        issuer: attacker.kid,
        kid: attacker.kid,
        audience: 'cell-test',
        version: 1,
        issued_at: 1,
        expires_at: null,
        run: { run_id: 'run_00000000000000000042', crew_id: 'crew_1', graph_hash: j.graphHash, outcome: 'completed' },
        records: j.records,
        values: j.values,
      } as never,
      attacker,
    );
    const r1 = await t.request('POST', `${A}/edge/journals`, { token: t.adminKey, rawBody: v1, headers: SIGNED });
    assert.equal(r1.status, 403, r1.text);
    assert.equal(r1.body.details.reason, 'run_unbound');
    assert.equal((await t.rows("SELECT run_id FROM edge_journals WHERE run_id = 'run_00000000000000000042'")).length, 0);
    assert.equal((await refusals()).at(-1), 'run_unbound');
  } finally {
    await t.close();
  }
});
