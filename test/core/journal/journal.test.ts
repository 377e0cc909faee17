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

async function journal(n: number) {
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
  assert.equal(records[0]!.v, 1);
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
  for (const bad of [null, 1, 'x', [], { v: 1 }, { v: 2 }]) {
    const v = await verifyJournal([bad as unknown as JournalRecord], keys);
    assert.equal(v.ok, false);
  }
});
