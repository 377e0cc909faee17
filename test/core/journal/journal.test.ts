// The signed journal: sealing, chaining, verification and tamper detection.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { contentHash } from '../../../core/canonical.ts';
import { generateEd25519, signEd25519 } from '../../../core/crypto/ed25519.ts';
import { GENESIS_HASH, type JournalRecord, type UnsignedRecord } from '../../../core/journal/record.ts';
import { sealRecord } from '../../../core/journal/seal.ts';
import { recordHash } from '../../../core/journal/hash.ts';
import { verifyJournal } from '../../../core/journal/verify.ts';

async function signer() {
  const kp = await generateEd25519();
  return { kp, signer: { kid: kp.kid, sign: (b: Uint8Array) => signEd25519(kp.privateJwk, b) } };
}

async function journal(n: number, writer: (i: number) => { cell_id: string; epoch: number } = () => ({ cell_id: 'cell-a', epoch: 1 })) {
  const { kp, signer: s } = await signer();
  const graph_hash = contentHash({ g: 1 });
  const out: JournalRecord[] = [];
  let prev = GENESIS_HASH;
  for (let i = 1; i <= n; i++) {
    const u: UnsignedRecord = {
      run_id: 'run_abc',
      seq: i,
      step_id: `seat:b${i}`,
      kind: i === 1 ? 'run_started' : 'step',
      graph_hash,
      input_hash: contentHash({ in: i }),
      output_hash: contentHash({ out: i }),
      at: 1_700_000_000_000 + i,
      ...writer(i),
      ...(i === 2 ? { data: { reason: 'gate_declined', contract: 'c1' } } : {}),
    };
    const r = await sealRecord(u, prev, s);
    prev = recordHash(r);
    out.push(r);
  }
  const keys = (kid: string) => (kid === kp.kid ? kp.publicJwk : undefined);
  return { records: out, keys, kp };
}

test('a sealed journal verifies; genesis and chain are as documented', async () => {
  const { records, keys } = await journal(5);
  assert.equal(records[0]!.prev_hash, GENESIS_HASH);
  assert.equal(records[1]!.prev_hash, recordHash(records[0]!));
  assert.equal(records[0]!.v, 2);
  assert.equal(records[0]!.v === 2 && records[0]!.cell_id, 'cell-a');
  assert.match(records[0]!.sig, /^[A-Za-z0-9_-]{86}$/);
  assert.deepEqual(await verifyJournal(records, keys), { ok: true });
  assert.deepEqual(await verifyJournal([], keys), { ok: true });
});

test('an unknown signer key, a reordered, truncated-at-start or spliced journal is refused', async () => {
  const { records, keys } = await journal(4);
  assert.equal((await verifyJournal(records, () => undefined)).ok, false);
  const swapped = [records[0]!, records[2]!, records[1]!, records[3]!];
  assert.deepEqual(await verifyJournal(swapped, keys), { ok: false, seq: 3, reason: 'seq not contiguous: expected 2' });
  assert.equal((await verifyJournal(records.slice(1), keys)).ok, false);
  // a record from another run with the same key is refused
  const other = await journal(2);
  const mixed = [records[0]!, other.records[1]!];
  const v = await verifyJournal(mixed, (kid) => keys(kid) ?? other.keys(kid));
  assert.equal(v.ok, false);
  // a signature by another key under this key's kid is refused
  const forged = { ...records[3]!, sig: other.records[1]!.sig };
  const v2 = await verifyJournal([...records.slice(0, 3), forged], keys);
  assert.deepEqual(v2, { ok: false, seq: 4, reason: 'signature does not verify' });
});

test('changing any field of any record is detected', async () => {
  const { records, keys } = await journal(3);
  for (let i = 0; i < records.length; i++) {
    for (const field of Object.keys(records[i]!) as (keyof JournalRecord)[]) {
      const copy = records.map((r) => structuredClone(r));
      const r = copy[i] as unknown as Record<string, unknown>;
      const val = r[field];
      if (typeof val === 'number') r[field] = val + 1;
      else if (typeof val === 'string') r[field] = val.slice(0, -1) + (val.endsWith('a') ? 'b' : 'a');
      else r[field] = { ...(val as object), extra: true };
      const verdict = await verifyJournal(copy as JournalRecord[], keys);
      assert.equal(verdict.ok, false, `record ${i} field ${field}`);
    }
    // adding a field is detected, removing data is detected
    const added = records.map((r) => structuredClone(r)) as unknown as Record<string, unknown>[];
    added[i]!.data = { injected: 1 };
    if (records[i]!.data === undefined) assert.equal((await verifyJournal(added as unknown as JournalRecord[], keys)).ok, false);
  }
  const removed = records.map((r) => structuredClone(r));
  delete removed[1]!.data;
  assert.equal((await verifyJournal(removed, keys)).ok, false);
});

test('flipping any byte of the serialized journal is detected (or no longer parses)', async () => {
  const { records, keys } = await journal(2);
  let checked = 0;
  for (let i = 0; i < records.length; i++) {
    const text = JSON.stringify(records[i]);
    for (let p = 0; p < text.length; p++) {
      const c = text.charCodeAt(p);
      const flipped = text.slice(0, p) + String.fromCharCode(c ^ 0x01) + text.slice(p + 1);
      let parsed: JournalRecord;
      try {
        parsed = JSON.parse(flipped) as JournalRecord;
      } catch {
        continue;
      }
      const copy = [...records];
      copy[i] = parsed;
      const verdict = await verifyJournal(copy, keys);
      assert.equal(verdict.ok, false, `record ${i} byte ${p}: ${flipped}`);
      checked++;
    }
  }
  assert.ok(checked > 500, `checked ${checked}`);
});

test('hostile input never throws', async () => {
  const { keys } = await journal(1);
  for (const bad of [null, 1, 'x', [], { v: 1 }, { v: 2 }, { v: 3 }]) {
    const v = await verifyJournal([bad as unknown as JournalRecord], keys);
    assert.equal(v.ok, false);
  }
});

/** A version 1 record, sealed as the code before version 2 did (no writer fields). */
async function sealV1(
  u: Omit<UnsignedRecord, 'cell_id' | 'epoch'>,
  prev: string,
  s: { kid: string; sign(b: Uint8Array): Promise<Uint8Array> },
) {
  const { b64url } = await import('../../../core/canonical.ts');
  const { signingBytes } = await import('../../../core/journal/record.ts');
  const body = { ...u, prev_hash: prev, signer_kid: s.kid, v: 1 as const };
  return { ...body, sig: b64url(await s.sign(signingBytes(body))) } as JournalRecord;
}

test('version 1 records still verify, alone or followed by version 2 records; never v2 then v1', async () => {
  const { kp, signer: s } = await signer();
  const keys = (kid: string) => (kid === kp.kid ? kp.publicJwk : undefined);
  const base = { run_id: 'run_x', graph_hash: contentHash({ g: 1 }), input_hash: contentHash(null), output_hash: contentHash(null) };
  const r1 = await sealV1({ ...base, seq: 1, step_id: 'run', kind: 'run_started', at: 1 }, GENESIS_HASH, s);
  const r2 = await sealV1({ ...base, seq: 2, step_id: 'a', kind: 'step', at: 2 }, recordHash(r1), s);
  assert.deepEqual(await verifyJournal([r1, r2], keys), { ok: true });
  const r3 = await sealRecord({ ...base, seq: 3, step_id: 'b', kind: 'step', at: 3, cell_id: 'cell-a', epoch: 1 }, recordHash(r2), s);
  assert.deepEqual(await verifyJournal([r1, r2, r3], keys), { ok: true });
  // a version 1 record after a version 2 one: refused
  const w1 = await sealRecord(
    { ...base, seq: 1, step_id: 'run', kind: 'run_started', at: 1, cell_id: 'cell-a', epoch: 1 },
    GENESIS_HASH,
    s,
  );
  const w2 = await sealV1({ ...base, seq: 2, step_id: 'a', kind: 'step', at: 2 }, recordHash(w1), s);
  assert.deepEqual(await verifyJournal([w1, w2], keys), { ok: false, seq: 2, reason: 'format version 1 after version 2' });
  // writer fields are not allowed on a version 1 record
  const odd = { ...r1, cell_id: 'cell-a' } as unknown as JournalRecord;
  assert.deepEqual(await verifyJournal([odd], keys), { ok: false, seq: 1, reason: 'malformed: unknown field cell_id' });
});

test('epochs never go back along a journal; a later owner with a higher epoch verifies', async () => {
  const grows = await journal(4, (i) => (i <= 2 ? { cell_id: 'cell-a', epoch: 1 } : { cell_id: 'cell-b', epoch: 3 }));
  assert.deepEqual(await verifyJournal(grows.records, grows.keys), { ok: true });
  const back = await journal(4, (i) => (i === 3 ? { cell_id: 'cell-a', epoch: 1 } : { cell_id: 'cell-b', epoch: 2 }));
  assert.deepEqual(await verifyJournal(back.records, back.keys), { ok: false, seq: 3, reason: 'epoch went back: 1 after 2' });
  for (const bad of [{ cell_id: '' }, { epoch: -1 }, { epoch: 1.5 }, { epoch: '1' }]) {
    const copy = grows.records.map((r) => structuredClone(r)) as unknown as Record<string, unknown>[];
    Object.assign(copy[0]!, bad);
    assert.equal((await verifyJournal(copy as unknown as JournalRecord[], grows.keys)).ok, false, JSON.stringify(bad));
  }
  // sealRecord refuses a missing writer (a programming mistake)
  await assert.rejects(
    sealRecord({ ...(grows.records[0] as unknown as UnsignedRecord), cell_id: '' }, GENESIS_HASH, {
      kid: 'k',
      sign: async () => new Uint8Array(64),
    }),
    TypeError,
  );
});
