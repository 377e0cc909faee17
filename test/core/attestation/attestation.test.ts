// Attestations (core/attestation): deterministic CBOR, DSSE, the COSE_Sign1 signed statement, the run's
// in-toto Statement and the attestation file with its log proof, and what each verifier refuses.
// Known answers: CBOR from RFC 8949 Appendix A; PAE from the DSSE protocol (secure-systems-lab/dsse,
// protocol.md, "DSSEv1 29 http://example.com/HelloWorld 11 hello world").
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { b64std, fromB64std } from '../../../core/base64.ts';
import { contentHash } from '../../../core/canonical.ts';
import { generateEd25519, signEd25519 } from '../../../core/crypto/ed25519.ts';
import { recordHash } from '../../../core/journal/hash.ts';
import { GENESIS_HASH, type JournalRecord } from '../../../core/journal/record.ts';
import { sealRecord } from '../../../core/journal/seal.ts';
import { CborTag, cborDecode, cborEncode, type CborValue } from '../../../core/attestation/cbor.ts';
import { pae, signDsse, verifyDsse } from '../../../core/attestation/dsse.ts';
import { signStatement, verifyStatement } from '../../../core/attestation/cose-sign1.ts';
import { PREDICATE_TYPE, runStatement } from '../../../core/attestation/statement.ts';
import { buildAttestation, verifyAttestation } from '../../../core/attestation/bundle.ts';
import { consistencyRanges, inclusionRanges, leafHash, rangeHash, rootOf } from '../../../core/transparency/merkle.ts';
import { signCheckpoint } from '../../../core/transparency/checkpoint.ts';
import { runLeafHash } from '../../../core/transparency/run-leaf.ts';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

test('CBOR: RFC 8949 Appendix A encodings, decoded back; non-deterministic encodings refused', () => {
  const cases: [CborValue, string][] = [
    [0, '00'],
    [23, '17'],
    [24, '1818'],
    [100, '1864'],
    [1000, '1903e8'],
    [1000000, '1a000f4240'],
    [1000000000000, '1b000000e8d4a51000'],
    [-1, '20'],
    [-10, '29'],
    [-100, '3863'],
    [-1000, '3903e7'],
    [new Uint8Array(0), '40'],
    [Uint8Array.of(1, 2, 3, 4), '4401020304'],
    ['', '60'],
    ['a', '6161'],
    ['IETF', '6449455446'],
    ['\u00fc', '62c3bc'],
    [[], '80'],
    [[1, 2, 3], '83010203'],
    [new Map(), 'a0'],
    [
      new Map<CborValue, CborValue>([
        [3, 4],
        [1, 2],
      ]),
      'a201020304',
    ],
    [
      new Map<CborValue, CborValue>([
        ['b', [2, 3]],
        ['a', 1],
      ]),
      'a26161016162820203',
    ],
    [false, 'f4'],
    [true, 'f5'],
    [null, 'f6'],
    [new CborTag(1, 1363896240), 'c11a514b67b0'],
  ];
  for (const [v, h] of cases) {
    assert.equal(hex(cborEncode(v)), h, h);
    assert.equal(hex(cborEncode(cborDecode(Buffer.from(h, 'hex'))!)), h, `round trip ${h}`);
  }
  // Refused: a non-shortest head, unsorted map keys, a duplicate key, an indefinite length, a float, trailing bytes.
  for (const bad of ['1817', 'a203040102', 'a201020102', '9f01ff', 'f93c00', '0000', '62c3'])
    assert.equal(cborDecode(Buffer.from(bad, 'hex')), null, bad);
});

test('DSSE: the PAE of the protocol example; sign, verify, and every tampering refused', async () => {
  assert.equal(
    Buffer.from(pae('http://example.com/HelloWorld', new TextEncoder().encode('hello world'))).toString(),
    'DSSEv1 29 http://example.com/HelloWorld 11 hello world',
  );
  const kp = await generateEd25519();
  const other = await generateEd25519();
  const env = await signDsse(new TextEncoder().encode('{"a":1}'), 'application/vnd.in-toto+json', {
    kid: kp.kid,
    sign: (b) => signEd25519(kp.privateJwk, b),
  });
  const keys = (kid: string) => (kid === kp.kid ? kp.publicJwk : undefined);
  assert.equal((await verifyDsse(env, keys)).ok, true);
  assert.equal((await verifyDsse({ ...env, payload: b64std(new TextEncoder().encode('{"a":2}')) }, keys)).ok, false, 'payload');
  assert.equal((await verifyDsse({ ...env, payloadType: 'application/json' }, keys)).ok, false, 'payload type');
  const sig = fromB64std(env.signatures[0]!.sig);
  sig[5]! ^= 1;
  assert.equal((await verifyDsse({ ...env, signatures: [{ keyid: kp.kid, sig: b64std(sig) }] }, keys)).ok, false, 'signature');
  assert.equal(
    (await verifyDsse({ ...env, signatures: [{ keyid: other.kid, sig: env.signatures[0]!.sig }] }, keys)).ok,
    false,
    'unknown keyid',
  );
  assert.equal((await verifyDsse(env, (kid) => (kid === kp.kid ? other.publicJwk : undefined))).ok, false, 'another key under the kid');
  assert.equal((await verifyDsse('nope', keys)).ok, false);
});

test('COSE_Sign1 signed statement: registered headers, verified; tampering refused', async () => {
  const kp = await generateEd25519();
  const keys = (kid: string) => (kid === kp.kid ? kp.publicJwk : undefined);
  const payload = new TextEncoder().encode('{"_type":"x"}');
  const bytes = await signStatement(
    payload,
    { contentType: 'application/vnd.in-toto+json', iss: 'cell-a', sub: 'run_1', iat: 1700000000 },
    {
      kid: kp.kid,
      sign: (b) => signEd25519(kp.privateJwk, b),
    },
  );
  assert.equal(bytes[0], 0xd2, 'tag 18');
  const v = await verifyStatement(bytes, keys);
  assert.equal(v.ok, true);
  if (v.ok) assert.deepEqual(v.header, { contentType: 'application/vnd.in-toto+json', iss: 'cell-a', sub: 'run_1', iat: 1700000000 });
  // Any byte changed (header, payload or signature) is refused, as is a key unknown.
  for (let i = 0; i < bytes.length; i += 7) {
    const t = Uint8Array.from(bytes);
    t[i]! ^= 0x01;
    assert.equal((await verifyStatement(t, keys)).ok, false, `byte ${i}`);
  }
  assert.equal((await verifyStatement(bytes, () => undefined)).ok, false);
});

async function journal(n: number) {
  const kp = await generateEd25519();
  const signer = { kid: kp.kid, sign: (b: Uint8Array) => signEd25519(kp.privateJwk, b) };
  const graph_hash = contentHash({ g: 1 });
  const records: JournalRecord[] = [];
  let prev = GENESIS_HASH;
  for (let i = 1; i <= n; i++) {
    const kind = i === 1 ? 'run_started' : i === n ? 'run_finished' : i === 3 ? 'approval_received' : 'step';
    const data =
      i === 2
        ? { seat: 'lead', agent_id: 'agt_1', usage: 10 }
        : i === 3
          ? { by: 'usr_bob', decision: 'approve', digest: contentHash({ approved: true }) }
          : i === n
            ? { outcome: 'completed' }
            : { seat: 'lead' };
    const r = await sealRecord(
      {
        run_id: 'run_0123456789abcdef0123',
        seq: i,
        step_id: i === 2 ? 'agent:lead/model/0' : `s${i}`,
        kind,
        graph_hash,
        input_hash: contentHash({ in: i }),
        output_hash: contentHash({ out: i }),
        at: 1_700_000_000_000 + i,
        data,
        cell_id: 'cell-a',
        epoch: 1,
      },
      prev,
      signer,
    );
    prev = recordHash(r);
    records.push(r);
  }
  return { kp, signer, records, graph_hash };
}

test('the run statement: subjects, predicate fields, approvals as the records carry them, values only when given', async () => {
  const { records, graph_hash } = await journal(5);
  const ev = {
    run: {
      run_id: records[0]!.run_id,
      kind: 'job',
      state: 'completed',
      reason: null,
      requester: 'usr_alice',
      created_at: 1_700_000_000_000,
      finished_at: 1_700_000_000_005,
    },
    crew: null,
    graph_hash,
    graph: null,
    records,
    issuer: { id: 'cell-a', kind: 'cell' as const },
  };
  const st = runStatement(ev);
  assert.equal(st._type, 'https://in-toto.io/Statement/v1');
  assert.equal(st.predicateType, PREDICATE_TYPE);
  assert.deepEqual(st.subject, [
    { name: `${records[0]!.run_id}/journal`, digest: { sha256: recordHash(records[4]!).slice(7) } },
    { name: `${records[0]!.run_id}/graph`, digest: { sha256: graph_hash.slice(7) } },
  ]);
  const p = st.predicate as Record<string, any>;
  assert.equal(p.steps.length, 5);
  assert.deepEqual(p.steps[1], {
    seq: 2,
    step_id: 'agent:lead/model/0',
    kind: 'step',
    seat: 'lead',
    input_hash: records[1]!.input_hash,
    output_hash: records[1]!.output_hash,
    at: '2023-11-14T22:13:20.002Z',
  });
  assert.equal(p.approvals[0].by, 'usr_bob');
  assert.equal(p.approvals[0].digest, contentHash({ approved: true }));
  assert.ok(p.actors.some((a: any) => a.role === 'approver' && a.id === 'usr_bob'));
  assert.ok(p.actors.some((a: any) => a.role === 'requester' && a.id === 'usr_alice'));
  assert.deepEqual(p.models, [{ seat: 'lead', agent_id: 'agt_1', model: null, calls: 1, tokens: 10 }]);
  assert.equal(p.values_included, false);
  assert.equal('values' in p, false);
  const withValues = runStatement({ ...ev, values: { [contentHash({ in: 1 })]: { in: 1 } } }).predicate as Record<string, any>;
  assert.equal(withValues.values_included, true);
  assert.deepEqual(Object.keys(withValues.values), [contentHash({ in: 1 })]);
});

test('the attestation file: verified with its log proof; a changed statement, another key, or a leaf not in the checkpoint refused', async () => {
  const { kp, signer, records, graph_hash } = await journal(4);
  const st = runStatement({
    run: { run_id: records[0]!.run_id, kind: 'job', state: 'completed', reason: null, requester: 'usr_a', created_at: 1, finished_at: 2 },
    crew: null,
    graph_hash,
    graph: null,
    records,
    issuer: { id: 'cell-a', kind: 'cell' },
  });
  const leaf = runLeafHash({ run_id: records[0]!.run_id, journal_head: recordHash(records.at(-1)!), graph_hash });
  const leaves = [leafHash(Uint8Array.of(1)), leafHash(Uint8Array.of(2)), leaf, leafHash(Uint8Array.of(4)), leafHash(Uint8Array.of(5))];
  const node = (ls: Uint8Array[]) => (n: { level: number; index: number }) =>
    rootOf(ls.slice(n.index * 2 ** n.level, (n.index + 1) * 2 ** n.level));
  const origin = 'agent-cell/grp';
  const noteSigner = { name: origin, publicJwk: kp.publicJwk, sign: signer.sign };
  const checkpoint = await signCheckpoint({ origin, size: 5, root: rootOf(leaves), extensions: [] }, [noteSigner]);
  const log = {
    origin,
    leaf_index: 2,
    tree_size: 5,
    inclusion_proof: inclusionRanges(2, 5).map((r) => b64std(rangeHash(r, node(leaves)))),
    checkpoint,
  };
  const bundle = await buildAttestation(st, signer, log);
  const keys = [{ kid: kp.kid, jwk: kp.publicJwk }];
  const v = await verifyAttestation(bundle, keys);
  assert.equal(v.ok, true, v.ok ? '' : v.reason);
  if (v.ok) assert.equal(v.attestation.log?.tree_size, 5);
  // Consistency with a checkpoint seen before: holds for this log, fails for a rewritten one.
  const older = await signCheckpoint({ origin, size: 3, root: rootOf(leaves.slice(0, 3)), extensions: [] }, [noteSigner]);
  const consistency = { first: 3, second: 5, proof: consistencyRanges(3, 5).map((r) => b64std(rangeHash(r, node(leaves)))) };
  assert.equal((await verifyAttestation(bundle, keys, { previous: older, consistency })).ok, true);
  const forged = [leafHash(Uint8Array.of(9)), ...leaves.slice(1, 3)];
  const olderForged = await signCheckpoint({ origin, size: 3, root: rootOf(forged), extensions: [] }, [noteSigner]);
  const r = await verifyAttestation(bundle, keys, { previous: olderForged, consistency });
  assert.equal(r.ok, false);
  // Refusals.
  const other = await generateEd25519();
  assert.equal((await verifyAttestation(bundle, [{ kid: other.kid, jwk: other.publicJwk }])).ok, false, 'unknown key');
  assert.equal((await verifyAttestation({ ...bundle, log: null }, keys)).ok, false, 'no log proof');
  assert.equal((await verifyAttestation({ ...bundle, log: { ...log, leaf_index: 3 } }, keys)).ok, false, 'another leaf index');
  const stBad = { ...st, subject: [{ name: 'run_x/journal', digest: { sha256: '0'.repeat(64) } }] };
  assert.equal((await verifyAttestation(await buildAttestation(stBad, signer, log), keys)).ok, false, 'subjects not the predicate run');
  const env = { ...bundle.dsse_envelope, payload: b64std(new TextEncoder().encode(JSON.stringify({ ...st, predicateType: 'x' }))) };
  assert.equal((await verifyAttestation({ ...bundle, dsse_envelope: env }, keys)).ok, false, 'a changed payload');
});
