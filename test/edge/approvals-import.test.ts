// Back at the cell (issue #39, section 4, approvals): a device run held by a two-person approval, decided on
// the device by two principals the cell's key bundle carried with agent_teams.approve, imports and shows its
// approvals. Journals the device key signed but whose approvals the device was not entitled to record are
// refused naming the record: an approver the bundle did not carry, one it carried without the permission to
// decide, a bundle this cell never issued to the device, another digest, and a requester counted as its own
// second person (the recorded decisions replayed through core's rule).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inProcessCell, type InProcess } from '../helpers/inproc.ts';
import { generateEd25519, signerFromJwk, type Signer } from '../../bundles/codec.ts';
import { newEdgeRun } from '../../bundles/run-id.ts';
import { contentHash } from '../../core/canonical.ts';
import { memoryJournal } from '../../core/journal/memory.ts';
import type { JournalKind, JournalRecord } from '../../core/journal/record.ts';
import { approvedRun, crewOnDevice, exportRun, type DeviceRun } from './_device-run.ts';

const A = '/api/public/v1/admin';
const STEP = 'pre:0';

async function must(t: InProcess, method: string, path: string, body?: unknown): Promise<any> {
  const r = await t.request(method, path, { token: t.adminKey, ...(body !== undefined ? { body } : {}) });
  assert.ok(r.status >= 200 && r.status < 300, `${method} ${path} -> ${r.status} ${r.text}`);
  return r.body;
}

/** The same journal under a new run id, every record signed again by the device, `change` applied to each. */
async function rewritten(signer: Signer, r: DeviceRun, change: (rec: JournalRecord) => JournalRecord): Promise<DeviceRun> {
  const run = await newEdgeRun(signer.kid);
  const j = memoryJournal(run.run_id, signer);
  for (const rec of r.records.map((x) => change(structuredClone(x)))) {
    await j.port.append(
      {
        step_id: rec.step_id,
        kind: rec.kind as JournalKind,
        graph_hash: rec.graph_hash,
        input_hash: rec.input_hash,
        output_hash: rec.output_hash,
        at: rec.at,
        ...(rec.data !== undefined ? { data: rec.data } : {}),
      },
      { input: r.values[rec.input_hash], output: r.values[rec.output_hash] },
    );
  }
  return { run, records: j.records, values: r.values, result: r.result };
}

test('an edge journal imports with its approvals; one the device was not entitled to record is refused naming the record', async () => {
  const t = await inProcessCell();
  try {
    await must(t, 'POST', `${A}/roles`, { name: 'field-approver', permissions: ['agent_teams.approve', 'agent_teams.read'] });
    await must(t, 'POST', `${A}/roles`, { name: 'field-reader', permissions: ['agent_teams.read'] });
    const ap1 = (await must(t, 'POST', `${A}/principals`, { kind: 'service', name: 'lead-1', roles: ['field-approver'] })).id as string;
    const ap2 = (await must(t, 'POST', `${A}/principals`, { kind: 'service', name: 'lead-2', roles: ['field-approver'] })).id as string;
    const reader = (await must(t, 'POST', `${A}/principals`, { kind: 'service', name: 'reader', roles: ['field-reader'] })).id as string;

    const k = await generateEd25519();
    const reg = await t.request('POST', `${A}/edge/devices`, { token: t.adminKey, body: { name: 'field', public_jwk: k.publicJwk } });
    assert.equal(reg.status, 201, reg.text);
    const signer = signerFromJwk(k.kid, k.privateJwk);
    const kb = await t.request('POST', `${A}/edge/key-bundles`, { token: t.adminKey, body: { device_id: k.kid } });
    assert.equal(kb.status, 201, kb.text);
    const version = Number(kb.headers.get('x-bundle-version'));
    const d = await crewOnDevice(t, k.kid, reg.body.trust.keys, undefined, {
      pre: [{ kind: 'human_approval', config: { rule: 'two_person', timeout_ms: 3_600_000 } }],
    });

    const honest = await approvedRun(signer, d.graph, d.graphHash, 'prn_device_user', [ap1, ap2], version);
    assert.equal(honest.result.outcome, 'completed', JSON.stringify(honest.result));
    const importOf = async (r: DeviceRun) =>
      t.request('POST', `${A}/edge/journals`, {
        token: t.adminKey,
        rawBody: await exportRun(signer, r, { crewId: d.crewId }),
        headers: { 'content-type': 'application/vnd.agent-cell.signed' },
      });
    const ok = await importOf(honest);
    assert.equal(ok.status, 201, ok.text);
    // The approvals show at the cell with the imported journal.
    const shown = await must(t, 'GET', `${A}/edge/journals/${honest.run.run_id}`);
    const records = (shown.records ?? shown.journal?.records) as JournalRecord[];
    assert.deepEqual(
      records.filter((r) => r.kind === 'approval_received').map((r) => r.data?.['by']),
      [ap1, ap2],
    );
    assert.deepEqual(
      [...(records.find((r) => r.kind === 'decision' && r.step_id === STEP)!.data!['approved_by'] as string[])].sort(),
      [ap1, ap2].sort(),
    );

    const seqOf = (r: DeviceRun, pred: (x: JournalRecord) => boolean) => r.records.find(pred)!.seq;
    const secondDecision = (x: JournalRecord) => x.kind === 'approval_received' && x.data?.['by'] === ap2;
    const forged: [string, (x: JournalRecord) => JournalRecord, (x: JournalRecord) => boolean][] = [
      [
        'an approver the bundle did not carry',
        (x) => (secondDecision(x) ? { ...x, data: { ...x.data, by: 'prn_stranger', chain: ['prn_stranger'] } } : x),
        (x) => x.kind === 'approval_received' && x.data?.['by'] === 'prn_stranger',
      ],
      [
        'a principal the bundle carried without the permission to decide',
        (x) => (secondDecision(x) ? { ...x, data: { ...x.data, by: reader, chain: [reader] } } : x),
        (x) => x.kind === 'approval_received' && x.data?.['by'] === reader,
      ],
      [
        'a key bundle this cell never issued to the device',
        (x) => (secondDecision(x) ? { ...x, data: { ...x.data, key_bundle: version + 1000 } } : x),
        secondDecision,
      ],
      [
        'another digest',
        (x) => (secondDecision(x) ? { ...x, data: { ...x.data, input_hash: contentHash('something else') } } : x),
        secondDecision,
      ],
      [
        // The run's requester is one of the two: under two_person it never counts, so one person approved.
        'the requester as its own second person',
        (x) =>
          (x.kind === 'decision' && x.step_id === STEP) || x.kind === 'run_started' ? { ...x, data: { ...x.data, requester: ap2 } } : x,
        (x) => x.kind === 'decision' && x.step_id === STEP,
      ],
      [
        'an approval for another requester than the run',
        (x) => (x.kind === 'decision' && x.step_id === STEP ? { ...x, data: { ...x.data, requester: 'prn_someone' } } : x),
        (x) => x.kind === 'decision' && x.step_id === STEP,
      ],
    ];
    const WHY: Record<string, RegExp> = {
      'an approver the bundle did not carry': /prn_stranger is not a principal key bundle \d+ carried/,
      'a principal the bundle carried without the permission to decide': /is not a principal key bundle \d+ carried with the permission/,
      'a key bundle this cell never issued to the device': /issued no key bundle version/,
      'another digest': /the digest it approved is not the input/,
      'the requester as its own second person': /do not approve it under its rule \(two_person\): 1 of 2 count/,
      'an approval for another requester than the run': /another requester than the run/,
    };
    for (const [what, change, named] of forged) {
      const f = await rewritten(signer, honest, change);
      const r = await importOf(f);
      assert.equal(r.status, 403, `${what}: ${r.text}`);
      assert.equal(r.body.details.reason, 'approval_not_entitled', what);
      assert.match(r.body.message, WHY[what]!, what);
      assert.equal(r.body.details.seq, seqOf(f, named), `${what}: ${r.text}`);
      assert.equal(r.body.details.step_id, STEP, what);
      assert.equal((await t.request('GET', `${A}/edge/journals/${f.run.run_id}`, { token: t.adminKey })).status, 404, what);
    }
    // The honest journal re-signed under a new run id imports: the refusals above are the changes, not the rewrite.
    assert.equal((await importOf(await rewritten(signer, honest, (x) => x))).status, 201);
  } finally {
    await t.close();
  }
});
