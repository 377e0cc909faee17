// recordedFrom (the recorded-step port over a stored journal) and the in-memory journal.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { contentHash } from '../../../core/canonical.ts';
import { generateEd25519, signEd25519 } from '../../../core/crypto/ed25519.ts';
import { memoryJournal } from '../../../core/journal/memory.ts';
import { recordedFrom } from '../../../core/journal/recorded.ts';
import { verifyJournal } from '../../../core/journal/verify.ts';

async function journal() {
  const kp = await generateEd25519();
  const j = memoryJournal('run_r', { kid: kp.kid, sign: (b) => signEd25519(kp.privateJwk, b) });
  const g = contentHash('graph');
  const add = (
    step_id: string,
    kind: 'run_started' | 'step' | 'decision' | 'refusal' | 'waiting',
    output: unknown,
    data?: Record<string, unknown>,
  ) =>
    j.port.append(
      {
        step_id,
        kind,
        graph_hash: g,
        input_hash: contentHash(null),
        output_hash: contentHash(output ?? null),
        at: 1,
        ...(data ? { data } : {}),
      },
      { input: null, output },
    );
  return { j, kp, add };
}

test('recordedFrom returns the last reusable record of a step with its stored output and data', async () => {
  const { j, add } = await journal();
  await add('run', 'run_started', null);
  await add('a', 'step', { n: 1 });
  await add('g', 'decision', 'ok', { decision: 'allow', route: 'then' });
  await add('w', 'waiting', null, { reason: 'timer_pending' });
  await add('x', 'refusal', null, { reason: 'gate_declined' });
  const rec = recordedFrom(j.records, (h) => j.blobs.get(h));
  const inNull = contentHash(null);
  assert.deepEqual(rec('a'), { output: { n: 1 }, input_hash: inNull });
  assert.deepEqual(rec('g'), { output: 'ok', data: { decision: 'allow', route: 'then' }, input_hash: inNull });
  assert.deepEqual(rec('run'), { output: null, input_hash: inNull });
  assert.equal(rec('w'), undefined, 'a waiting record is not a completed step');
  assert.equal(rec('x'), undefined, 'a refusal is not a completed step');
  assert.equal(rec('nope'), undefined);
  // the in-memory port agrees
  assert.deepEqual(await j.recorded('g'), rec('g'));
  // a referenced output missing from the store is corruption, never a silent re-execution
  const broken = recordedFrom(j.records, () => undefined);
  assert.throws(() => broken('a'), TypeError);
});

test('concurrent appends stay contiguous and chained; a journal can be continued', async () => {
  const { j, kp, add } = await journal();
  await Promise.all(Array.from({ length: 20 }, (_, i) => add(`s${i}`, 'step', i)));
  const keys = (kid: string) => (kid === kp.kid ? kp.publicJwk : undefined);
  assert.deepEqual(await verifyJournal(j.records, keys), { ok: true });
  assert.deepEqual(
    j.records.map((r) => r.seq),
    Array.from({ length: 20 }, (_, i) => i + 1),
  );
  const cont = memoryJournal('run_r', { kid: kp.kid, sign: (b) => signEd25519(kp.privateJwk, b) }, { records: j.records, blobs: j.blobs });
  await cont.port.append(
    {
      step_id: 'more',
      kind: 'step',
      graph_hash: j.records[0]!.graph_hash,
      input_hash: contentHash(null),
      output_hash: contentHash(1),
      at: 2,
    },
    { input: null, output: 1 },
  );
  assert.equal(cont.records.length, 21);
  assert.deepEqual(await verifyJournal(cont.records, keys), { ok: true });
  assert.deepEqual(await cont.recorded('s3'), { output: 3, input_hash: contentHash(null) });
});
