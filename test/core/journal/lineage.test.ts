// The lineage of a forked journal (core/journal/lineage.ts, through verifyJournal): a `forked`
// record opens it, its reused records name parent records before the fork point, and given the
// parent's records the fork point and every copy are checked against them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { contentHash } from '../../../core/canonical.ts';
import { generateEd25519, signEd25519 } from '../../../core/crypto/ed25519.ts';
import { recordHash } from '../../../core/journal/hash.ts';
import { GENESIS_HASH, type JournalRecord, type JsonObject } from '../../../core/journal/record.ts';
import { sealRecord } from '../../../core/journal/seal.ts';
import { verifyJournal } from '../../../core/journal/verify.ts';

type Spec = { step_id: string; kind: string; out?: number; data?: JsonObject };

async function setup() {
  const kp = await generateEd25519();
  const s = { kid: kp.kid, sign: (b: Uint8Array) => signEd25519(kp.privateJwk, b) };
  const keys = (kid: string) => (kid === kp.kid ? kp.publicJwk : undefined);
  const write = async (runId: string, specs: Spec[]): Promise<JournalRecord[]> => {
    const out: JournalRecord[] = [];
    let prev = GENESIS_HASH;
    for (const [i, x] of specs.entries()) {
      const r = await sealRecord(
        {
          run_id: runId,
          seq: i + 1,
          step_id: x.step_id,
          kind: x.kind,
          graph_hash: contentHash({ g: runId }),
          input_hash: contentHash({ in: x.step_id }),
          output_hash: contentHash({ out: x.out ?? i }),
          at: 1_700_000_000_000 + i,
          cell_id: 'cell-a',
          epoch: 1,
          ...(x.data ? { data: x.data } : {}),
        },
        prev,
        s,
      );
      prev = recordHash(r);
      out.push(r);
    }
    return out;
  };
  return { keys, write };
}

test('a fork verifies alone and against its parent; a copy or a fork point that is not the parent’s fails', async () => {
  const { keys, write } = await setup();
  const parent = await write('run_parent', [
    { step_id: 'run', kind: 'run_started' },
    { step_id: 'a/model/0', kind: 'step', out: 10 },
    { step_id: 'a', kind: 'step', out: 11 },
    { step_id: 'b/model/0', kind: 'step', out: 12 },
    { step_id: 'b', kind: 'step', out: 13 },
  ]);
  const at = parent[3]!; // b/model/0: a is reused, b runs again
  const from = { run_id: 'run_parent', seq: at.seq, record_hash: recordHash(at) };
  const reused = (r: JournalRecord) => ({
    step_id: r.step_id,
    kind: r.kind,
    data: { reused: { run_id: 'run_parent', seq: r.seq, record_hash: recordHash(r) } },
  });
  const specs: Spec[] = [
    { step_id: 'run', kind: 'forked', data: { from } },
    { ...reused(parent[1]!), out: 10 },
    { ...reused(parent[2]!), out: 11 },
    { step_id: 'b/model/0', kind: 'step', out: 99 },
  ];
  // Copies carry the parent's hashes: input hashes are of the step id, outputs of `out`.
  const fork = await write('run_fork', specs);
  const prefix = { records: parent.slice(0, at.seq) };
  assert.deepEqual(await verifyJournal(fork, keys), { ok: true });
  assert.deepEqual(await verifyJournal(fork, keys, { parent: prefix }), { ok: true });

  // A copy whose output is not the parent's.
  const lying = await write(
    'run_fork',
    specs.map((x, i) => (i === 2 ? { ...x, out: 7 } : x)),
  );
  assert.deepEqual(await verifyJournal(lying, keys, { parent: prefix }), {
    ok: false,
    seq: 3,
    reason: 'reused: the record is not the parent record it names',
  });
  // A fork point that is not the parent's record.
  const other = await write('run_parent', [
    { step_id: 'run', kind: 'run_started' },
    { step_id: 'x', kind: 'step' },
    { step_id: 'y', kind: 'step' },
    { step_id: 'z', kind: 'step' },
  ]);
  const v = await verifyJournal(fork, keys, { parent: { records: other } });
  assert.equal(v.ok, false);
  // A parent journal that does not verify.
  const tampered = prefix.records.map((r) => ({ ...r })) as JournalRecord[];
  tampered[1] = { ...tampered[1]!, output_hash: contentHash('x') };
  const pv = await verifyJournal(fork, keys, { parent: { records: tampered } });
  assert.equal(pv.ok, false);
  assert.match((pv as { reason: string }).reason, /^parent journal/);
});

test('a forked record must open the journal; reused records only in a fork, before its fork point', async () => {
  const { keys, write } = await setup();
  const from = { run_id: 'run_parent', seq: 3, record_hash: contentHash('p') };
  const late = await write('run_f', [
    { step_id: 'run', kind: 'run_started' },
    { step_id: 'run', kind: 'forked', data: { from } },
  ]);
  assert.deepEqual(await verifyJournal(late, keys), { ok: false, seq: 2, reason: 'forked: the forked record must open the journal' });
  const notForked = await write('run_f', [
    { step_id: 'run', kind: 'run_started' },
    { step_id: 'a', kind: 'step', data: { reused: { run_id: 'run_parent', seq: 1, record_hash: contentHash('p') } } },
  ]);
  assert.equal((await verifyJournal(notForked, keys)).ok, false);
  const beyond = await write('run_f', [
    { step_id: 'run', kind: 'forked', data: { from } },
    { step_id: 'a', kind: 'step', data: { reused: { run_id: 'run_parent', seq: 3, record_hash: contentHash('p') } } },
  ]);
  assert.deepEqual(await verifyJournal(beyond, keys), {
    ok: false,
    seq: 2,
    reason: 'reused: must name a record of the parent before the fork point',
  });
  const self = await write('run_f', [{ step_id: 'run', kind: 'forked', data: { from: { ...from, run_id: 'run_f' } } }]);
  assert.equal((await verifyJournal(self, keys)).ok, false);
  const malformed = await write('run_f', [{ step_id: 'run', kind: 'forked', data: { from: { run_id: 'run_parent', seq: 0 } } }]);
  assert.equal((await verifyJournal(malformed, keys)).ok, false);
});
