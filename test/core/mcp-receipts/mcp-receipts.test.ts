// MCP receipts (core/mcp-receipts): signed with the RFC 8032 §7.1 TEST 1 key, checked by an
// independent verifier (node:crypto's Ed25519 over the `canonicalize` package's RFC 8785
// output, neither of which core uses), every refusal of verifyReceipt, the output and
// journal checks, and the pinned version 1 fixture (test/fixtures/mcp-receipts/v1.json).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createPublicKey, verify as nodeVerify } from 'node:crypto';
import { readFileSync } from 'node:fs';
import canonicalize from 'canonicalize';
import { signEd25519 } from '../../../core/crypto/ed25519.ts';
import { memoryJournal } from '../../../core/journal/memory.ts';
import { recordHash } from '../../../core/journal/hash.ts';
import type { JournalSigner } from '../../../core/journal/record.ts';
import { outputHash, RECEIPT_TYPE, type Receipt } from '../../../core/mcp-receipts/format.ts';
import { signReceipt } from '../../../core/mcp-receipts/sign.ts';
import { verifyReceipt } from '../../../core/mcp-receipts/verify.ts';

// RFC 8032 §7.1, TEST 1.
const d = Buffer.from('9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60', 'hex').toString('base64url');
const x = Buffer.from('d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a', 'hex').toString('base64url');
const PUBLIC: JsonWebKey = { kty: 'OKP', crv: 'Ed25519', x };
const KID = 'rfc8032-test-1';
const signer: JournalSigner = { kid: KID, sign: (b) => signEd25519({ ...PUBLIC, d }, b) };
const keys = (kid: string) => (kid === KID ? PUBLIC : undefined);
const H = (c: string) => `sha256:${c.repeat(64)}`;

const claims = {
  run_id: 'run_00000000000000000001',
  graph_hash: H('a'),
  journal_seq: 7,
  journal_head: H('b'),
  state: 'completed',
  output_hash: outputHash({ answer: 42 }),
  issuer: 'cell-1',
  issued_at: 1_767_225_600_000,
};

test('a receipt verifies with an independent Ed25519 and RFC 8785 implementation', async () => {
  const r = await signReceipt(claims, signer);
  assert.equal(r.v, 1);
  assert.equal(r.typ, RECEIPT_TYPE);
  assert.equal(r.kid, KID);
  const { sig, ...body } = r;
  const bytes = Buffer.from(canonicalize(body)!, 'utf8');
  const key = createPublicKey({ key: { ...PUBLIC } as never, format: 'jwk' });
  assert.equal(nodeVerify(null, bytes, key, Buffer.from(sig, 'base64url')), true);
  assert.deepEqual(await verifyReceipt(r, keys), { ok: true, receipt: r });
});

test('every member is under the signature; a changed one is refused', async () => {
  const r = await signReceipt(claims, signer);
  const changes: [keyof Receipt, unknown][] = [
    ['run_id', 'run_00000000000000000002'],
    ['graph_hash', H('c')],
    ['journal_seq', 8],
    ['journal_head', H('d')],
    ['state', 'failed'],
    ['output_hash', null],
    ['issuer', 'cell-2'],
    ['issued_at', claims.issued_at + 1],
  ];
  for (const [k, v] of changes) {
    const v2 = await verifyReceipt({ ...r, [k]: v }, keys);
    assert.deepEqual(v2, { ok: false, reason: 'signature does not verify' }, k);
  }
});

test('malformed receipts are refused by name, never thrown', async () => {
  const r = await signReceipt(claims, signer);
  const cases: [unknown, string][] = [
    [null, 'malformed: not an object'],
    [[r], 'malformed: not an object'],
    [{ ...r, v: 2 }, 'unsupported format version 2'],
    [{ ...r, typ: 'other' }, 'malformed: typ'],
    [{ ...r, extra: 1 }, 'malformed: unknown field extra'],
    [{ ...r, graph_hash: 'sha256:xyz' }, 'malformed: graph_hash'],
    [{ ...r, journal_seq: 0 }, 'malformed: journal_seq'],
    [{ ...r, output_hash: 5 }, 'malformed: output_hash'],
    [{ ...r, sig: '' }, 'malformed: sig'],
    [{ ...r, kid: 'someone-else' }, 'unknown signer key someone-else'],
    [{ ...r, sig: r.sig.slice(0, -2) + (r.sig.endsWith('AA') ? 'BB' : 'AA') }, 'signature does not verify'],
  ];
  for (const [input, reason] of cases) assert.deepEqual(await verifyReceipt(input, keys), { ok: false, reason }, reason);
});

test('the output the answer carried must hash to output_hash', async () => {
  const r = await signReceipt(claims, signer);
  assert.equal((await verifyReceipt(r, keys, { output: { answer: 42 } })).ok, true);
  assert.equal((await verifyReceipt(r, keys, { output: { answer: 43 } })).ok, false);
  const none = await signReceipt({ ...claims, output_hash: outputHash(null) }, signer);
  assert.equal(none.output_hash, null);
  assert.equal((await verifyReceipt(none, keys, { output: null })).ok, true);
  assert.equal((await verifyReceipt(none, keys, { output: 0 })).ok, false);
});

test('against the journal: the head record, its run and graph, and the chain', async () => {
  const j = memoryJournal('run_00000000000000000001', signer);
  const graph_hash = H('e');
  const step = { graph_hash, input_hash: H('1'), output_hash: H('2'), at: 1 };
  for (const kind of ['run_started', 'step', 'step', 'run_finished'] as const)
    await j.port.append({ step_id: 's', kind, ...step }, { input: 1, output: 2 });
  const at3 = await signReceipt({ ...claims, graph_hash, journal_seq: 3, journal_head: recordHash(j.records[2]!) }, signer);
  // Records written after the receipt may follow its head.
  assert.equal((await verifyReceipt(at3, keys, { journal: j.records })).ok, true);
  assert.deepEqual(await verifyReceipt(at3, keys, { journal: j.records.slice(0, 2) }), {
    ok: false,
    reason: 'the journal has no record 3',
  });
  const wrongHead = await signReceipt({ ...claims, graph_hash, journal_seq: 2, journal_head: recordHash(j.records[2]!) }, signer);
  assert.deepEqual(await verifyReceipt(wrongHead, keys, { journal: j.records }), {
    ok: false,
    reason: 'journal_head is not the hash of that record',
  });
  const otherGraph = await signReceipt({ ...claims, journal_seq: 3, journal_head: recordHash(j.records[2]!) }, signer);
  assert.deepEqual(await verifyReceipt(otherGraph, keys, { journal: j.records }), {
    ok: false,
    reason: 'the journal executes another graph',
  });
  const tampered = j.records.map((rec, i) => (i === 1 ? { ...rec, at: 2 } : rec));
  const v = await verifyReceipt(at3, keys, { journal: tampered });
  assert.equal(v.ok, false);
  assert.match((v as { reason: string }).reason, /^journal record 2: /);
});

test('the recorded version 1 receipt still verifies (test/fixtures/mcp-receipts/v1.json)', async () => {
  const f = JSON.parse(readFileSync('test/fixtures/mcp-receipts/v1.json', 'utf8')) as {
    public_jwk: JsonWebKey;
    output: unknown;
    receipt: Receipt;
  };
  const v = await verifyReceipt(f.receipt, (kid) => (kid === f.receipt.kid ? f.public_jwk : undefined), { output: f.output });
  assert.deepEqual(v, { ok: true, receipt: f.receipt });
  // Ed25519 is deterministic: today's code signs the same claims to the same bytes.
  const { v: _v, typ: _t, kid: _k, sig: _s, ...rest } = f.receipt;
  assert.deepEqual(await signReceipt(rest, signer), f.receipt);
});
