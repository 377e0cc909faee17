// Group commit of drivers' journal appends (cell/runs/group-commit.ts), in process, both engines:
// the appends that drivers of many runs make at one moment share one transaction, each run keeping
// its own seq, chain and signatures; and one run's failure (a lost lease, an ended run, a write that
// fails, a storage limit) is that run's answer only.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { LeaseLostError } from '../../../cell/runs/lease.ts';
import { RunClosedError } from '../../../cell/runs/journal.ts';
import { RunStorageLimitError } from '../../../cell/runs/storage.ts';
import { verifyJournal } from '../../../core/journal/verify.ts';

import { contentHash } from '../../../core/canonical.ts';
import type { Store } from '../../../cell/store/types.ts';

/** Counts the store's write transactions that name any of `runIds` (journal appends name their runs). */
function journalWrites(t: InProcess, runIds: readonly string[]): { count: number } {
  const store = t.core.store as Store;
  const write = store.write.bind(store);
  const seen = { count: 0 };
  (store as { write: Store['write'] }).write = (fn, o) => {
    if (o?.subjects?.some((id) => runIds.includes(id))) seen.count++;
    return write(fn, o);
  };
  return seen;
}

/** `n` running runs held by this cell under lease epoch 1, each with a first record (their meters loaded). */
async function heldRuns(t: InProcess, n: number): Promise<string[]> {
  const runs = t.modules.runs.runs;
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const id = await t.core.store.write((tx) =>
      runs.createRunTx(tx, { kind: 'job', job_type: 'compute', requester: 'p1', spec: { i }, at: t.clock.now() }),
    );
    await t.core.store.write((tx) =>
      tx.run("UPDATE runs SET state = 'running', lease_owner = ?, lease_epoch = 1 WHERE run_id = ?", ['cell-test', id]),
    );
    await runs.appendJournal(id, { step_id: 'run', kind: 'run_started' }, [], { epoch: 1 });
    ids.push(id);
  }
  return ids;
}

const step = (n: number) => ({ step_id: `s${n}`, kind: 'step', data: { n } });

async function verifies(t: InProcess, runId: string): Promise<boolean> {
  const keys = new Map(t.modules.iam.iam.identityKeys().map((k) => [k.kid, k.jwk]));
  return (await verifyJournal(await t.modules.runs.runs.readJournal(runId), (kid) => keys.get(kid))).ok;
}

test('sixteen drivers appending at once share one transaction; each run keeps its own chain', async () => {
  const t = await inProcessCell();
  try {
    const runs = t.modules.runs.runs;
    const ids = await heldRuns(t, 16);
    const writes = journalWrites(t, ids);
    const recs = await Promise.all(
      ids.map((id) => runs.appendJournal(id, { ...step(2), output_hash: contentHash({ out: id }) }, [{ out: id }], { epoch: 1 })),
    );
    assert.equal(writes.count, 1, 'one transaction for the sixteen appends');
    for (const [i, id] of ids.entries()) {
      assert.equal(recs[i]!.run_id, id);
      assert.equal(recs[i]!.seq, 2, 'its own seq');
      const journal = await runs.readJournal(id);
      assert.deepEqual(
        journal.map((r) => r.seq),
        [1, 2],
      );
      assert.ok(await verifies(t, id), 'its own chain and signatures');
      assert.deepEqual(await runs.getBlob(journal[1]!.output_hash), { out: id });
    }
  } finally {
    await t.close();
  }
});

test('a run whose lease was lost, or that ended, is told so; the others of its group are written', async () => {
  const t = await inProcessCell();
  try {
    const runs = t.modules.runs.runs;
    const [a, lost, b, ended] = await heldRuns(t, 4);
    await t.core.store.write((tx) => tx.run('UPDATE runs SET lease_epoch = 2 WHERE run_id = ?', [lost!]));
    assert.equal(await runs.finishRun(ended!, 'completed', { output: null }), true);
    const writes = journalWrites(t, [a!, lost!, b!, ended!]);
    const r = await Promise.allSettled([a, lost, b, ended].map((id) => runs.appendJournal(id!, step(2), [], { epoch: 1 })));
    assert.equal(r[0]!.status, 'fulfilled');
    assert.equal(r[2]!.status, 'fulfilled');
    assert.ok(r[1]!.status === 'rejected' && r[1]!.reason instanceof LeaseLostError, "the lost lease is that run's answer");
    assert.ok(r[3]!.status === 'rejected' && r[3]!.reason instanceof RunClosedError, 'so is the ended run');
    // The group, refused for two of its runs, then the two others together (the ended run's meter was reloaded: alone).
    assert.ok(writes.count <= 3, `${writes.count} transactions`);
    assert.deepEqual(
      (await runs.readJournal(lost!)).map((x) => x.seq),
      [1],
      'nothing written to the lost run',
    );
    for (const id of [a!, b!]) assert.ok(await verifies(t, id));
  } finally {
    await t.close();
  }
});

test('a write of one run that fails does not fail the others: each is written alone', async () => {
  const t = await inProcessCell();
  try {
    const runs = t.modules.runs.runs;
    const ids = await heldRuns(t, 4);
    // A staged write of the second run fails (as a bug would): its append fails, and only its own.
    runs.stageRunWrite(ids[1]!, async (tx) => {
      await tx.run('INSERT INTO no_such_table (x) VALUES (?)', [1]);
    });
    const r = await Promise.allSettled(ids.map((id) => runs.appendJournal(id, step(2), [], { epoch: 1 })));
    assert.deepEqual(
      r.map((x) => x.status),
      ['fulfilled', 'rejected', 'fulfilled', 'fulfilled'],
    );
    assert.deepEqual(
      (await runs.readJournal(ids[1]!)).map((x) => x.seq),
      [1],
    );
    for (const id of [ids[0]!, ids[2]!, ids[3]!])
      assert.deepEqual(
        (await runs.readJournal(id)).map((x) => x.seq),
        [1, 2],
      );
  } finally {
    await t.close();
  }
});

test('a storage limit refuses one run of a group, not the others', async () => {
  const t = await inProcessCell({ config: { runStorageCapBytes: 64 * 1024 } });
  try {
    const runs = t.modules.runs.runs;
    const ids = await heldRuns(t, 3);
    let staged = 0;
    // The refused run's staged write is not kept: it waits for the run's next append, as alone.
    runs.stageRunWrite(ids[1]!, async () => {
      staged++;
    });
    const r = await Promise.allSettled(
      ids.map((id, i) => runs.appendJournal(id, step(2), [i === 1 ? 'x'.repeat(80 * 1024) : 'small'], { epoch: 1 })),
    );
    assert.equal(r[0]!.status, 'fulfilled');
    assert.equal(r[2]!.status, 'fulfilled');
    assert.ok(r[1]!.status === 'rejected' && r[1]!.reason instanceof RunStorageLimitError);
    assert.deepEqual(
      (await runs.readJournal(ids[1]!)).map((x) => x.seq),
      [1],
    );
    // Its next append (within the cap) carries the staged write.
    await runs.appendJournal(ids[1]!, step(3), [], { epoch: 1 });
    assert.ok(staged >= 1);
    assert.deepEqual(
      (await runs.readJournal(ids[1]!)).map((x) => x.seq),
      [1, 2],
    );
  } finally {
    await t.close();
  }
});
