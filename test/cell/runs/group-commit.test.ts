// Group commit of drivers' journal appends (cell/runs/group-commit.ts), in process, both engines:
// the appends that drivers of many runs make at one moment share one transaction, each run keeping
// its own seq, chain and signatures; and one run's failure (a lost lease, an ended run, a write that
// fails, a storage limit) is that run's answer only; and on PostgreSQL a group lingers for runs whose
// steps come apart, never for a lone run.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { crewFixture, ok, roleOf, T, team } from '../../helpers/teams.ts';
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
    // The group, refused for two of its runs, then the two others together (the ended run's meter was reloaded: alone);
    // on PostgreSQL the group is first sent whole, in one round trip, and its guard aborts it.
    const most = t.engine === 'postgres' ? 4 : 3;
    assert.ok(writes.count <= most, `${writes.count} transactions`);
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

/**
 * Two crew runs of two seats at once whose model answers come 5 ms apart, every call answered `stepMs`
 * after both runs asked: the transactions that wrote the two runs' appends together, and how long after
 * the second run's answer each of them started.
 */
async function twoRunsApart(appendLingerMs: number, stepMs: number): Promise<{ shared: number; after: number[]; engine: string }> {
  const { t, ai, api } = await crewFixture({ appendLingerMs });
  try {
    const waiting = new Map<string, Map<string, () => void>>();
    let counting = false;
    let answeredB = 0;
    ai.setResponder(async (req) => {
      const tag = JSON.stringify(req.messages).includes('run-B') ? 'B' : 'A';
      const seat = roleOf(req);
      await new Promise<void>((answer) => {
        const both = waiting.get(seat) ?? new Map<string, () => void>();
        waiting.set(seat, both);
        both.set(tag, answer);
        if (both.size < 2) return;
        setTimeout(() => {
          // From here on: the appends of the steps (the runs' first appends, before their first calls, are left out).
          counting = true;
          both.get('A')!();
          setTimeout(() => {
            answeredB = performance.now();
            both.get('B')!();
          }, 5);
        }, stepMs);
      });
      return { content: `run-${tag} ${seat} done`, usage: { prompt_tokens: 3, completion_tokens: 2 } };
    });
    const tm = await team(api, 'sequential', [{ role: 'a' }, { role: 'b' }]);
    const store = t.core.store as Store;
    const write = store.write.bind(store);
    const named: { subjects: readonly string[]; after: number }[] = [];
    (store as { write: Store['write'] }).write = (fn, o) => {
      if (counting && o?.subjects) named.push({ subjects: o.subjects, after: performance.now() - answeredB });
      return write(fn, o);
    };
    const [a, b] = await Promise.all(['run-A', 'run-B'].map((input) => ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input })));
    await Promise.all([a, b].map((r) => t.modules.teams.teams.settled(r.run_id)));
    for (const r of [a, b]) {
      const run = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${r.run_id}`);
      assert.equal(run.state, 'completed', JSON.stringify(run.error));
    }
    const both = named.filter((n) => n.subjects.includes(a.run_id) && n.subjects.includes(b.run_id));
    return { shared: both.length, after: both.map((n) => n.after), engine: t.engine };
  } finally {
    await t.close();
    await ai.close();
  }
}

test('runs whose steps come apart: on PostgreSQL a group lingers for the other run, and goes once every run driven here waits', async () => {
  // A linger of 400 ms; each step takes 2.1 s, more than five lingers.
  const lingering = await twoRunsApart(400, 2100);
  if (lingering.engine === 'postgres') {
    assert.ok(lingering.shared >= 1, 'the run 5 ms behind joined the group of the first');
    // Both runs driven here wait once the second has appended: the group goes then, not when the linger ends
    // (~395 ms after the second run's answer).
    for (const after of lingering.after) assert.ok(after < 200, `the group went ${after.toFixed(0)} ms after the second run's answer`);
  }
  // The embedded store writes one transaction at a time and never lingers.
  else assert.equal(lingering.shared, 0);
  const never = await twoRunsApart(0, 150);
  assert.equal(never.shared, 0, 'without a linger, each run commits its own step');
});

test('a run alone never lingers, whatever its pace: each of its appends goes at once', async () => {
  // A linger of 400 ms and steps of 2.1 s (more than five lingers): only its being alone keeps it from waiting.
  const { t, ai, api } = await crewFixture({ appendLingerMs: 400 });
  try {
    let answered = 0;
    ai.setResponder(async (req) => {
      await new Promise((r) => setTimeout(r, 2100));
      answered = performance.now();
      return { content: `${roleOf(req)} done`, usage: { prompt_tokens: 3, completion_tokens: 2 } };
    });
    const tm = await team(api, 'sequential', [{ role: 'a' }, { role: 'b' }]);
    const store = t.core.store as Store;
    const write = store.write.bind(store);
    const after: number[] = [];
    (store as { write: Store['write'] }).write = (fn, o) => {
      if (answered > 0 && o?.subjects) after.push(performance.now() - answered);
      return write(fn, o);
    };
    const r = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'go' });
    await t.modules.teams.teams.settled(r.run_id);
    assert.equal((await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${r.run_id}`)).state, 'completed');
    assert.ok(after.length >= 2, 'its steps were written');
    for (const ms of after) assert.ok(ms < 200, `a write went ${ms.toFixed(0)} ms after the model's answer`);
  } finally {
    await t.close();
    await ai.close();
  }
});
