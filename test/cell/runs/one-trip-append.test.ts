// A lone driver's journal append in one round trip (cell/runs/group-commit.ts writeAtOnce), in
// process, both engines. On PostgreSQL, once an append of this process left the run's tail, the
// next one's records are sealed first and every statement (the lock, the guard, the staged writes,
// the records) leaves with its COMMIT; whatever the guard finds (a lost lease, an ended run, a tail
// someone else wrote, a storage limit) aborts it whole, and the append written locked first says so,
// as before. On the embedded store every append is written locked first.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, connect, type AddressInfo, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import pgLib from 'pg';
import { inProcessCell, TEST_ENGINE, type InProcess } from '../../helpers/inproc.ts';
import { pgDatabase } from '../../helpers/postgres.ts';
import { parseExposition } from '../../helpers/prometheus.ts';
import { crewFixture, ok, roleOf, T, team } from '../../helpers/teams.ts';
import { LeaseLostError } from '../../../cell/runs/lease.ts';
import { RunClosedError } from '../../../cell/runs/journal.ts';
import { RunStorageLimitError } from '../../../cell/runs/storage.ts';
import { verifyJournal } from '../../../core/journal/verify.ts';
import { recordHash } from '../../../core/journal/hash.ts';
import type { Store, Tx } from '../../../cell/store/types.ts';

const pg = (t: InProcess) => t.engine === 'postgres';

/** The append transactions by path (the metric cell_run_journal_append_transactions_total). */
async function paths(t: InProcess): Promise<Record<string, number>> {
  const out: Record<string, number> = { one_round_trip: 0, one_round_trip_refused: 0, locked: 0 };
  for (const s of parseExposition(await t.modules.ops.ops.exposition()))
    if (s.name === 'cell_run_journal_append_transactions_total') out[s.labels['path']!] = s.value;
  return out;
}

async function movedPaths<T>(t: InProcess, fn: () => Promise<T>): Promise<{ out: T; moved: Record<string, number> }> {
  const before = await paths(t);
  const out = await fn();
  const after = await paths(t);
  return { out, moved: Object.fromEntries(Object.keys(after).map((k) => [k, after[k]! - (before[k] ?? 0)])) };
}

/**
 * Watches the write transactions naming `runId`: for each, the statements issued after one of its
 * answers had come back (0: every statement left before any answer, one round trip with the COMMIT).
 */
function watchTrips(t: InProcess, runId: string): number[] {
  const store = t.core.store as Store;
  const write = store.write.bind(store);
  const late: number[] = [];
  (store as { write: Store['write'] }).write = (fn, o) => {
    if (!o?.subjects?.includes(runId)) return write(fn, o);
    return write((tx) => {
      let answered = false;
      const i = late.push(0) - 1;
      const watch =
        <A extends unknown[], R>(f: (...a: A) => Promise<R>) =>
        (...a: A): Promise<R> => {
          if (answered) late[i]!++;
          const p = f(...a);
          p.then(
            () => {
              answered = true;
            },
            () => {
              answered = true;
            },
          );
          return p;
        };
      const watched: Tx = { get: watch(tx.get), all: watch(tx.all), run: watch(tx.run), afterCommit: tx.afterCommit };
      return fn(watched);
    }, o);
  };
  return late;
}

/** A running run held by this cell under lease epoch 1, with its first record appended (its tail known here). */
async function heldRun(t: InProcess): Promise<string> {
  const runs = t.modules.runs.runs;
  const id = await t.core.store.write((tx) =>
    runs.createRunTx(tx, { kind: 'job', job_type: 'compute', requester: 'p1', spec: {}, at: t.clock.now() }),
  );
  await t.core.store.write((tx) =>
    tx.run("UPDATE runs SET state = 'running', lease_owner = ?, lease_epoch = 1 WHERE run_id = ?", ['cell-test', id]),
  );
  await runs.appendJournal(id, { step_id: 'run', kind: 'run_started' }, [], { epoch: 1 });
  return id;
}

const step = (n: number) => ({ step_id: `s${n}`, kind: 'step', data: { n } });

async function seqs(t: InProcess, runId: string): Promise<number[]> {
  return (await t.modules.runs.runs.readJournal(runId)).map((r) => r.seq);
}

async function verifies(t: InProcess, runId: string): Promise<boolean> {
  const keys = new Map(t.modules.iam.iam.identityKeys().map((k) => [k.kid, k.jwk]));
  return (await verifyJournal(await t.modules.runs.runs.readJournal(runId), (kid) => keys.get(kid))).ok;
}

test("a driver's appends after its first leave whole with their COMMIT, with the writes staged at once", async () => {
  const t = await inProcessCell();
  try {
    const runs = t.modules.runs.runs;
    const id = await heldRun(t);
    const late = watchTrips(t, id);
    // A write staged at once rides along, ahead of the records (as a budget reservation does).
    let counted = -1;
    runs.stageRunWrite(
      id,
      Object.assign(
        async (tx: Tx) => {
          counted = Number((await tx.get('SELECT COUNT(*) AS n FROM journal WHERE run_id = ?', [id]))!['n']);
        },
        { atOnce: true as const },
      ),
    );
    const { moved } = await movedPaths(t, async () => {
      await runs.appendJournal(id, step(2), [{ a: 1 }], { epoch: 1 });
      await runs.appendJournal(id, step(3), [{ b: 2 }], { epoch: 1 });
    });
    assert.equal(counted, 1, 'the staged read ran in the append, before its records');
    assert.deepEqual(await seqs(t, id), [1, 2, 3]);
    assert.ok(await verifies(t, id), 'the chain and signatures as ever');
    if (pg(t)) {
      assert.deepEqual(moved, { one_round_trip: 2, one_round_trip_refused: 0, locked: 0 });
      assert.deepEqual(late, [0, 0], 'nothing sent after an answer came back');
    } else {
      assert.deepEqual(moved, { one_round_trip: 0, one_round_trip_refused: 0, locked: 2 });
      assert.ok(
        late.every((n) => n > 0),
        'the embedded store locks, reads, then writes',
      );
    }
  } finally {
    await t.close();
  }
});

test("a group of drivers' appends after their first leave whole too: one transaction, one round trip, each run its own chain", async () => {
  const t = await inProcessCell();
  try {
    const runs = t.modules.runs.runs;
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push(await heldRun(t));
    const late = watchTrips(t, ids[0]!);
    const { out, moved } = await movedPaths(t, () =>
      Promise.all(ids.map((id) => runs.appendJournal(id, step(2), [{ of: id }], { epoch: 1 }))),
    );
    for (const [i, id] of ids.entries()) {
      assert.equal(out[i]!.seq, 2);
      assert.deepEqual(await seqs(t, id), [1, 2]);
      assert.ok(await verifies(t, id), 'its own chain and signatures');
    }
    if (pg(t)) {
      assert.deepEqual(moved, { one_round_trip: 1, one_round_trip_refused: 0, locked: 0 }, 'the six in one transaction, sent whole');
      assert.deepEqual(late, [0], 'nothing sent after an answer came back');
    } else assert.deepEqual(moved, { one_round_trip: 0, one_round_trip_refused: 0, locked: 1 });
  } finally {
    await t.close();
  }
});

test('a group that passes the storage quota only together: sent whole and aborted, the locked write refuses the run past it', async () => {
  const t = await inProcessCell({ config: { runStorageQuotaBytes: 48 * 1024 } });
  try {
    const runs = t.modules.runs.runs;
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push(await heldRun(t));
    // Each alone within the quota (~20 KiB), two together too, the three not.
    const { out, moved } = await movedPaths(t, () =>
      Promise.allSettled(ids.map((id, i) => runs.appendJournal(id, step(2), ['abc'[i]!.repeat(20 * 1024)], { epoch: 1 }))),
    );
    assert.deepEqual(
      out.map((o) => o.status),
      ['fulfilled', 'fulfilled', 'rejected'],
    );
    const refused = out[2]!;
    assert.ok(refused.status === 'rejected' && refused.reason instanceof RunStorageLimitError, 'refused for storage');
    assert.equal((refused.reason as RunStorageLimitError).reason, 'cell_storage_quota');
    assert.deepEqual(await seqs(t, ids[2]!), [1], 'nothing of the refused run kept');
    for (const id of ids.slice(0, 2)) assert.deepEqual(await seqs(t, id), [1, 2]);
    // The group whole (aborted by the third run's guard), locked (which refuses it), then the two again, whole.
    if (pg(t)) assert.deepEqual(moved, { one_round_trip: 1, one_round_trip_refused: 1, locked: 1 });
  } finally {
    await t.close();
  }
});

test('a staged write that reads before it writes makes the append lock first', async () => {
  const t = await inProcessCell();
  try {
    const runs = t.modules.runs.runs;
    const id = await heldRun(t);
    let ran = 0;
    runs.stageRunWrite(id, async (tx) => {
      await tx.get('SELECT 1 AS one');
      await tx.run('UPDATE runs SET updated_at = updated_at WHERE run_id = ?', [id]);
      ran++;
    });
    const { moved } = await movedPaths(t, () => runs.appendJournal(id, step(2), [], { epoch: 1 }));
    assert.equal(ran, 1);
    assert.deepEqual(moved, { one_round_trip: 0, one_round_trip_refused: 0, locked: 1 });
    assert.deepEqual(await seqs(t, id), [1, 2]);
  } finally {
    await t.close();
  }
});

test('a lost lease or an ended run aborts the append whole; the locked write says why', async () => {
  const t = await inProcessCell();
  try {
    const runs = t.modules.runs.runs;
    const [lost, ended] = [await heldRun(t), await heldRun(t)];
    await t.core.store.write((tx) => tx.run('UPDATE runs SET lease_epoch = 2 WHERE run_id = ?', [lost]));
    await t.core.store.write((tx) => tx.run("UPDATE runs SET state = 'completed' WHERE run_id = ?", [ended]));
    runs.stageRunWrite(
      lost,
      Object.assign(
        async (tx: Tx) => {
          await tx.run('UPDATE runs SET progress_at = 1 WHERE run_id = ?', [lost]);
        },
        { atOnce: true as const },
      ),
    );
    // One after the other: together they would make a group, which is written locked (group-commit.ts).
    const refusal = (p: Promise<unknown>) =>
      p.then(
        () => null,
        (e: unknown) => e,
      );
    const { out, moved } = await movedPaths(t, async () => [
      await refusal(runs.appendJournal(lost, step(2), [], { epoch: 1 })),
      await refusal(runs.appendJournal(ended, step(2), [], { epoch: 1 })),
    ]);
    assert.ok(out[0] instanceof LeaseLostError, 'the lost lease');
    assert.ok(out[1] instanceof RunClosedError, 'the ended run');
    assert.deepEqual(await seqs(t, lost), [1], 'nothing written');
    assert.deepEqual(await seqs(t, ended), [1], 'nothing written');
    assert.notEqual(
      Number((await t.row('SELECT progress_at FROM runs WHERE run_id = ?', [lost]))!['progress_at']),
      1,
      'nor the staged write',
    );
    if (pg(t))
      assert.deepEqual(moved, { one_round_trip: 0, one_round_trip_refused: 2, locked: 2 }, 'both sent whole, aborted by the guard');
    else assert.deepEqual(moved, { one_round_trip: 0, one_round_trip_refused: 0, locked: 2 });
  } finally {
    await t.close();
  }
});

test('a record another writer appended meanwhile: the append is sealed after it, locked first', async () => {
  const t = await inProcessCell();
  try {
    const runs = t.modules.runs.runs;
    const id = await heldRun(t);
    // A record this process did not write (another cell's, as the store holds it): the tail this process left is stale.
    const [first] = await runs.readJournal(id);
    const other = { ...first!, seq: 2, step_id: 'other' };
    await t.core.store.write((tx) =>
      tx.run('INSERT INTO journal (run_id, seq, kind, record) VALUES (?, ?, ?, ?)', [id, 2, other.kind, JSON.stringify(other)]),
    );
    const { out, moved } = await movedPaths(t, () => runs.appendJournal(id, step(3), [], { epoch: 1 }));
    assert.equal(out.seq, 3, 'after the record it did not write');
    assert.equal(out.prev_hash, recordHash(other as typeof first & object), 'chained to it');
    if (pg(t)) assert.deepEqual(moved, { one_round_trip: 0, one_round_trip_refused: 1, locked: 1 });
    // Its tail is known again: the next append goes in one round trip.
    const next = await movedPaths(t, () => runs.appendJournal(id, step(4), [], { epoch: 1 }));
    assert.equal(next.out.seq, 4);
    if (pg(t)) assert.equal(next.moved['one_round_trip'], 1);
  } finally {
    await t.close();
  }
});

test("a record appended by a writer the append's lock waited for: the journal's key aborts it, sealed after it locked first", {
  skip: TEST_ENGINE !== 'postgres' && 'PostgreSQL only (the embedded store has one connection)',
}, async () => {
  const db = await pgDatabase();
  const t = await inProcessCell({ config: { storeUrl: db.url } });
  const other = new pgLib.Client({ connectionString: db.url });
  await other.connect();
  try {
    const runs = t.modules.runs.runs;
    const id = await heldRun(t);
    // Another writer holds the run's row and adds a record: the append's lock and guard, one statement,
    // waits for it and reads the journal's last seq with the snapshot it started with (before that record).
    const [first] = await runs.readJournal(id);
    const rec = { ...first!, seq: 2, step_id: 'other' };
    await other.query('BEGIN');
    await other.query('SELECT run_id FROM runs WHERE run_id = $1 FOR UPDATE', [id]);
    await other.query('INSERT INTO journal (run_id, seq, kind, record) VALUES ($1, $2, $3, $4)', [id, 2, rec.kind, JSON.stringify(rec)]);
    const appended = movedPaths(t, () => runs.appendJournal(id, step(3), [], { epoch: 1 }));
    for (let i = 0; ; i++) {
      const waiting = await other.query('SELECT COUNT(*) AS n FROM pg_locks WHERE NOT granted');
      if (Number(waiting.rows[0].n) > 0) break;
      assert.ok(i < 1000, 'the append waits for the run');
      await sleep(10);
    }
    await other.query('COMMIT');
    const { out, moved } = await appended;
    assert.deepEqual(moved, { one_round_trip: 0, one_round_trip_refused: 1, locked: 1 }, 'aborted whole, then written locked first');
    assert.equal(out.seq, 3, 'after the record it did not write');
    assert.equal(out.prev_hash, recordHash(rec as typeof first & object), 'chained to it');
    assert.deepEqual(await seqs(t, id), [1, 2, 3]);
  } finally {
    await other.end();
    await t.close();
    await db.drop();
  }
});

test('a storage limit found by the guard: the locked write refuses the record, as before', async () => {
  const t = await inProcessCell({ config: { runStorageQuotaBytes: 48 * 1024 } });
  try {
    const runs = t.modules.runs.runs;
    const id = await heldRun(t);
    const { out, moved } = await movedPaths(t, () =>
      Promise.allSettled([runs.appendJournal(id, step(2), ['x'.repeat(64 * 1024)], { epoch: 1 })]),
    );
    assert.ok(out[0].status === 'rejected' && out[0].reason instanceof RunStorageLimitError, 'refused');
    assert.equal((out[0].reason as RunStorageLimitError).reason, 'cell_storage_quota');
    assert.deepEqual(await seqs(t, id), [1]);
    if (pg(t)) assert.deepEqual(moved, { one_round_trip: 0, one_round_trip_refused: 1, locked: 1 });
    // Within the quota: kept, in one round trip.
    const small = await movedPaths(t, () => runs.appendJournal(id, step(2), ['small'], { epoch: 1 }));
    assert.equal(small.out.seq, 2);
    if (pg(t)) assert.equal(small.moved['one_round_trip'], 1);
  } finally {
    await t.close();
  }
});

test("a crew run's steps with budget ledgers: reservations ride at once, every one committed, the ledgers charged", async () => {
  const { t, ai, api } = await crewFixture();
  try {
    ai.setResponder((req) => ({ content: `${roleOf(req)} done`, usage: { prompt_tokens: 7, completion_tokens: 5 } }));
    const tm = await team(api, 'sequential', [{ role: 'a' }, { role: 'b' }, { role: 'c' }, { role: 'd' }]);
    const { out: r, moved } = await movedPaths(t, async () => {
      const r = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'go' }, [201]);
      await t.modules.teams.teams.settled(r.run_id);
      return r;
    });
    const run = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${r.run_id}`);
    assert.equal(run.state, 'completed');
    assert.ok(await verifies(t, r.run_id));
    const open = await t.row('SELECT COUNT(*) AS n FROM team_reservations WHERE run_id = ? AND committed_at IS NULL', [r.run_id]);
    assert.equal(Number(open!['n']), 0, 'every reservation committed');
    for (const role of ['a', 'b', 'c', 'd']) {
      const l = await ok(api, 'GET', `${T}/agents/${tm.agents[role]}/budget-ledger`);
      assert.deepEqual([l.spent, l.reserved], [12, 0], `${role}: its call's tokens, charged once`);
    }
    if (pg(t)) {
      assert.ok(moved['one_round_trip']! >= 3, `${JSON.stringify(moved)}: the steps after the first in one round trip`);
      assert.equal(moved['one_round_trip_refused'], 0);
    } else assert.equal(moved['one_round_trip'], 0);
  } finally {
    await t.close();
    await ai.close();
  }
});

test("a drive that ends its run answers the state it wrote: the run's row is not read back", async () => {
  const { t, ai, api } = await crewFixture();
  try {
    ai.setResponder((req) => ({ content: `${roleOf(req)} done` }));
    const tm = await team(api, 'sequential', [{ role: 'a' }, { role: 'b' }]);
    // The reads of the runs table naming a run, and when its last write naming it (its finish) settled.
    const store = t.core.store as Store;
    const reads: { at: number; sql: string; params: readonly unknown[] }[] = [];
    const lastWrite = new Map<string, number>();
    let tick = 0;
    const { get, all, write } = { get: store.get.bind(store), all: store.all.bind(store), write: store.write.bind(store) };
    const s = store as { get: Store['get']; all: Store['all']; write: Store['write'] };
    s.get = (sql, params) => {
      if (/\bFROM runs\b/.test(sql)) reads.push({ at: ++tick, sql, params: params ?? [] });
      return get(sql, params);
    };
    s.all = (sql, params) => {
      if (/\bFROM runs\b/.test(sql)) reads.push({ at: ++tick, sql, params: params ?? [] });
      return all(sql, params);
    };
    s.write = async (fn, o) => {
      const out = await write(fn, o);
      for (const k of o?.subjects ?? []) lastWrite.set(k, ++tick);
      return out;
    };
    const r = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'go' }, [201]);
    await t.modules.teams.teams.settled(r.run_id);
    const settledAt = ++tick;
    assert.equal((await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${r.run_id}`)).state, 'completed');
    const finishedAt = lastWrite.get(r.run_id);
    assert.ok(finishedAt !== undefined, 'the run was written');
    const readBack = reads.filter((x) => x.at > finishedAt && x.at < settledAt && x.params.includes(r.run_id));
    assert.deepEqual(readBack, [], 'nothing read of the run between its finish and the drive’s answer');
  } finally {
    await t.close();
    await ai.close();
  }
});

/**
 * A TCP proxy to the database that, once armed, cuts the connection of the first transaction sent
 * whole (BEGIN and COMMIT in one write from the cell: writeAtOnce) right after the server committed
 * it: the cell reads BEGIN's answer (the transaction's id) and nothing after it, so the answers of
 * the statements between are lost, and the store asks the server whether it committed.
 */
async function cuttingProxy(url: string): Promise<{ url: string; arm(): void; cut: () => number; close(): void }> {
  const target = new URL(url);
  let armed = false;
  let cut = 0;
  const socks = new Set<Socket>();
  const proxy = createServer((c) => {
    const s = connect(Number(target.port), target.hostname);
    socks.add(c).add(s);
    let cutting = false;
    let held = Buffer.alloc(0);
    let forwarded = false;
    c.on('data', (d: Buffer) => {
      const text = d.toString('latin1');
      if (armed && text.includes('BEGIN ISOLATION LEVEL READ COMMITTED') && /Q[\s\S]{4}COMMIT\0/.test(text)) {
        armed = false;
        cutting = true;
      }
      s.write(d);
    });
    s.on('data', (d: Buffer) => {
      if (!cutting) return void c.write(d);
      held = Buffer.concat([held, d]);
      // Messages: a type byte and a 4-byte length (which counts itself).
      let at = 0;
      for (;;) {
        if (held.length < at + 5) break;
        const len = held.readUInt32BE(at + 1);
        if (held.length < at + 1 + len) break;
        const type = String.fromCharCode(held[at]!);
        const body = held.subarray(at + 5, at + 1 + len);
        at += 1 + len;
        if (!forwarded) {
          c.write(held.subarray(0, at));
          held = held.subarray(at);
          at = 0;
          if (type === 'Z') forwarded = true;
          continue;
        }
        if (type === 'C' && body.toString('latin1').startsWith('COMMIT')) {
          cut++;
          cutting = false;
          c.destroy();
          s.destroy();
          return;
        }
      }
    });
    const end = () => {
      c.destroy();
      s.destroy();
    };
    c.on('close', end);
    s.on('close', end);
    c.on('error', end);
    s.on('error', end);
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  const u = new URL(url);
  u.port = String((proxy.address() as AddressInfo).port);
  return {
    url: u.toString(),
    arm: () => {
      armed = true;
    },
    cut: () => cut,
    close: () => {
      for (const x of socks) x.destroy();
      proxy.close();
    },
  };
}

test("the connection lost after a one-round-trip append committed: the step's reservation is read back, no model asked twice", {
  skip: TEST_ENGINE !== 'postgres' && 'PostgreSQL only (the embedded store has no connection)',
}, async () => {
  const db = await pgDatabase();
  const proxy = await cuttingProxy(db.url);
  const { t, ai, api } = await crewFixture({ storeUrl: proxy.url });
  try {
    ai.setResponder((req) => ({ content: `${roleOf(req)} done`, usage: { prompt_tokens: 7, completion_tokens: 5 } }));
    const tm = await team(api, 'sequential', [{ role: 'a' }, { role: 'b' }, { role: 'c' }]);
    const asked = ai.requests.length;
    proxy.arm();
    const r = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'go' }, [201]);
    await t.modules.teams.teams.settled(r.run_id);
    assert.equal(proxy.cut(), 1, 'a one-round-trip append was cut after its commit');
    const run = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${r.run_id}`);
    assert.equal(run.state, 'completed', JSON.stringify(run.error));
    assert.deepEqual(
      ai.requests.slice(asked).map((q) => roleOf(q.body)),
      ['a', 'b', 'c'],
      'each model asked once',
    );
    assert.ok(await verifies(t, r.run_id));
    const steps = (await t.modules.runs.runs.readJournal(r.run_id)).filter((x) => x.kind === 'step').map((x) => x.step_id);
    assert.equal(new Set(steps).size, steps.length, 'no step recorded twice');
    const open = await t.row('SELECT COUNT(*) AS n FROM team_reservations WHERE run_id = ? AND committed_at IS NULL', [r.run_id]);
    assert.equal(Number(open!['n']), 0, 'every reservation committed');
    for (const role of ['a', 'b', 'c']) {
      const l = await ok(api, 'GET', `${T}/agents/${tm.agents[role]}/budget-ledger`);
      assert.deepEqual([l.spent, l.reserved], [12, 0], `${role}: its call's tokens, charged once`);
    }
  } finally {
    await t.close();
    await ai.close();
    proxy.close();
    await db.drop();
  }
});
