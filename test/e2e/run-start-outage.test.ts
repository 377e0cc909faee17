/**
 * A run-starting request answers as its commit did (issue 22's pg-stop
 * scenario, made deterministic), PostgreSQL, the real cell process: a store
 * outage after the run's commit never turns into a refusal of a run that
 * exists, and one before it leaves nothing behind. The test holds a table in
 * an exclusive lock and ends the cell's connections that wait on it while the
 * request is in flight:
 * - `journal` while a crew run the cell drives is recorded (its `run_requested`
 *   is written in its creating transaction): a 503 and no run recorded;
 * - `journal` after a crew run refused at its start commits (its refusal's
 *   records follow the commit) and `journal_blobs` (read to copy the steps a
 *   rerun reuses): the request answers as the run was recorded (409 with the
 *   run, 201), and its opening is written once the store is back, before
 *   anything else of it; nothing is written twice;
 * - `team_ledgers` (read to decide a crew run's refusal, no_budget_ledger):
 *   the request is refused with a 503 and no run is recorded.
 * And a crash in the window a run recorded claimed opens (runs/opening.ts
 * recordDrivenRunTx): the cell is SIGKILLed after the run's commit, before
 * its drive wrote anything (held on `team_reservations`); restarted, it takes
 * the run back at epoch 2 and drives it once.
 * Needs `node scripts/build.mjs` first.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { JournalRecord } from '../../core/journal/record.ts';
import { startOpenAIServer, type FakeOpenAI } from '../fixtures/openai-server.ts';
import { startCellProcess, type CellProcess } from '../helpers/cell-process.ts';
import { startGroup, type Group } from '../helpers/group.ts';
import { adminQuery, lockTable, pgDatabase, pgUnavailable, type PgDatabase } from '../helpers/postgres.ts';
import { A, T, ok, provider, roleOf, team, type Api } from '../helpers/teams.ts';
import { httpApi, jobRunEnded, metric, metricsUrl, until, verifiedJournal } from './_runs.ts';

const skip = pgUnavailable() ?? false;

describe('a store outage while a run is started', { skip, timeout: 180_000 }, () => {
  let g: Group;
  let ai: FakeOpenAI;
  let api: Api;
  let crew: string;
  before(async () => {
    ai = await startOpenAIServer({ apiKey: 'sk-fake' });
    g = await startGroup(1);
    api = httpApi(g.cells[0]!.url, g.adminKey);
    await provider(api, ai);
    crew = (await team(api, 'sequential', [{ role: 's1' }, { role: 's2' }])).crew;
  });
  after(async () => {
    await g?.stop();
    await ai?.close();
  });

  /**
   * Sends `request` while `table` is locked, ending every connection of the cell that waits on it until
   * the request is answered (at least one ended); then lets the lock go. Answers the request's reply.
   */
  async function throughOutage<R>(table: string, request: () => Promise<R>): Promise<{ reply: R; ended: number }> {
    const lock = await lockTable(g.db.url, table);
    try {
      let answered = false;
      let ended = 0;
      const pending = request().finally(() => {
        answered = true;
      });
      // The request's first wait on the lock is ended; the ones after it too, until it answers.
      await until(
        'the request to be answered after a connection was ended',
        async () => {
          ended += await lock.endWaiters();
          return answered && ended > 0 ? true : undefined;
        },
        90_000,
      );
      return { reply: await pending, ended };
    } finally {
      await lock.release();
    }
  }

  const runIds = async () =>
    new Set((await adminQuery(g.db.url, 'SELECT run_id FROM runs')).rows.map((r) => String((r as { run_id: string }).run_id)));

  const finished = (runId: string) => jobRunEnded(api, runId);

  test('the journal goes away while a crew run is recorded: a 503 and nothing recorded, then the same request runs', async () => {
    const asked = ai.requests.length;
    const before = await runIds();
    const { reply, ended } = await throughOutage('journal', () =>
      api.request('POST', `${T}/crews/${crew}/runs`, { body: { input: 'task' } }),
    );
    assert.ok(ended >= 1, 'a connection of the cell was ended');
    assert.equal(reply.status, 503, reply.text);
    assert.equal(reply.body.error, 'service_unavailable');
    assert.notEqual(reply.body.details?.reason, 'commit_unknown');
    assert.deepEqual(
      [...(await runIds())].filter((id) => !before.has(id)),
      [],
      'the run and its opening are one transaction: none of it is kept',
    );
    assert.equal(ai.requests.length, asked, 'no model asked');
    // The store back, the same request: recorded with its opening, claimed, driven.
    const again = await api.request('POST', `${T}/crews/${crew}/runs`, { body: { input: 'task' } });
    assert.equal(again.status, 201, again.text);
    assert.equal(again.body.state, 'running', 'recorded claimed by the cell that drives it');
    const done = await finished(again.body.run_id);
    assert.equal(done.state, 'completed', JSON.stringify(done.error));
    assert.equal(ai.requests.length - asked, 2, 'each model asked once');
    const { records, verdict } = await verifiedJournal(api, g.cells[0]!.url, again.body.run_id);
    assert.deepEqual(verdict, { ok: true });
    assert.equal(records[0]!.kind, 'run_requested', 'the journal opens with the request');
    assert.equal(records.filter((r: JournalRecord) => r.kind === 'run_requested').length, 1, 'run_requested written once');
    assert.ok(
      records.every((r: JournalRecord) => (r as { epoch?: number }).epoch === 1),
      'one drive, under the claim the run was recorded with',
    );
  });

  test('the journal goes away after a refused crew run commits: 409 with the run, ended refused once the store is back', async () => {
    const broke = (await team(api, 'sequential', [{ role: 'broke', ledger: null }])).crew;
    const asked = ai.requests.length;
    const { reply, ended } = await throughOutage('journal', () =>
      api.request('POST', `${T}/crews/${broke}/runs`, { body: { input: 'task' } }),
    );
    assert.ok(ended >= 1, 'a connection of the cell was ended');
    assert.equal(reply.status, 409, `a recorded run answers with its refusal: ${reply.text}`);
    assert.equal(reply.body.details.reason, 'no_budget_ledger');
    const runId = reply.body.details.run_id as string;
    const done = await finished(runId);
    assert.equal(done.state, 'refused', JSON.stringify(done));
    assert.equal(ai.requests.length, asked, 'no model asked');
    const { records, verdict } = await verifiedJournal(api, g.cells[0]!.url, runId);
    assert.deepEqual(verdict, { ok: true });
    assert.deepEqual(
      records.map((r: JournalRecord) => r.kind),
      ['run_requested', 'refusal', 'run_finished'],
      'the opening first, each record once',
    );
    assert.match(g.cells[0]!.output(), /the store went away after a run was recorded/);
  });

  test('the ledgers go away while a crew run is decided: a 503 and nothing recorded', async () => {
    // A crew of its own: the cell has not read its agents' ledgers yet (it keeps the ones it has seen).
    const fresh = (await team(api, 'sequential', [{ role: 'f1' }])).crew;
    const before = await runIds();
    const { reply } = await throughOutage('team_ledgers', () =>
      api.request('POST', `${T}/crews/${fresh}/runs`, { body: { input: 'refused' } }),
    );
    assert.equal(reply.status, 503, reply.text);
    assert.equal(reply.body.error, 'service_unavailable');
    assert.notEqual(reply.body.details?.reason, 'commit_unknown');
    const now = await runIds();
    assert.deepEqual(
      [...now].filter((id) => !before.has(id)),
      [],
      'a refusal leaves no run behind',
    );
  });

  test('the journal goes away after a job rerun commits: 201, its lineage written once the store is back', async () => {
    // A notebook whose second cell fails: its rerun reuses the first cell's step, whose values it reads
    // (journal_blobs) only after its own commit.
    const failed = await ok(api, 'POST', `${A}/jobs/runs`, {
      job_type: 'notebook',
      workspace_id: 'outage',
      spec: {
        cells: [
          { type: 'compute', code: 'return 1' },
          { type: 'compute', code: 'throw new Error("boom")' },
        ],
      },
    });
    assert.equal((await finished(failed.run_id)).state, 'failed');
    const { reply } = await throughOutage('journal_blobs', () => api.request('POST', `${A}/jobs/runs/${failed.run_id}/rerun`));
    assert.equal(reply.status, 201, `a recorded rerun is never refused: ${reply.text}`);
    const rerun = await finished(reply.body.run_id);
    assert.equal(rerun.state, 'failed', 'the rerun ran (and failed as its parent did)');
    const { records, verdict } = await verifiedJournal(api, g.cells[0]!.url, reply.body.run_id);
    assert.deepEqual(verdict, { ok: true }, 'the rerun journal verifies, its opening records included');
    assert.equal(records[0]!.kind, 'forked', 'the rerun opens with its lineage');
    assert.equal(records.filter((r: JournalRecord) => r.kind === 'forked').length, 1);
    const reused = records.filter((r: JournalRecord) => (r.data as { reused?: unknown } | null)?.reused !== undefined);
    const seqs = reused.map((r: JournalRecord) => (r.data as { reused: { seq: number } }).reused.seq);
    assert.ok(seqs.length >= 1, "the first cell's step is reused");
    assert.equal(new Set(seqs).size, seqs.length, `no parent record copied twice (${seqs.join(',')})`);
    const parent = await ok(api, 'GET', `${A}/jobs/runs/${failed.run_id}`);
    assert.deepEqual(
      parent.forks.map((f: { run_id: string }) => f.run_id),
      [reply.body.run_id],
      'the parent lists its rerun once',
    );
  });
});

describe("the cell dies between a run's commit and its first step", { skip, timeout: 180_000 }, () => {
  let ai: FakeOpenAI;
  let db: PgDatabase;
  const procs: CellProcess[] = [];
  before(async () => {
    ai = await startOpenAIServer({ apiKey: 'sk-fake' });
    ai.setResponder((req) => ({ content: `${roleOf(req)} done` }));
    db = await pgDatabase();
  });
  after(async () => {
    for (const p of procs) await p.kill().catch(() => undefined);
    procs[0]?.cleanup();
    await db?.drop();
    await ai?.close();
  });

  test('restarted, the cell takes the run it recorded claimed back at epoch 2 and drives it once', async () => {
    const args = ['--store', db.url, '--posture', 'multi-cell', '--cell-id', 'cell-s', '--metrics-port', '0'];
    const a = await startCellProcess({ args });
    procs.push(a);
    const apiA = httpApi(a.url, a.adminKey);
    await provider(apiA, ai);
    const tm = await team(apiA, 'sequential', [{ role: 'c1' }, { role: 'c2' }]);
    // A first run: the cell has seen the agents' ledgers (a run's start reads them once, then keeps them).
    const first = await ok(apiA, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'warm' });
    await until('the first run to finish', async () => {
      const s = await ok(apiA, 'GET', `${T}/crews/${tm.crew}/runs/${first.run_id}`);
      return s.state === 'completed' ? s : undefined;
    });
    // The drive's first write (the run's opening records with its first budget reservation) waits on the
    // lock: nothing of it is written.
    const lock = await lockTable(db.url, 'team_reservations');
    const asked = ai.requests.length;
    let reply;
    try {
      reply = await apiA.request('POST', `${T}/crews/${tm.crew}/runs`, { body: { input: 'task' } });
      assert.equal(reply.status, 201, reply.text);
      assert.equal(reply.body.state, 'running');
      await until('the drive to wait on the lock', async () => {
        const r = await adminQuery(
          db.url,
          "SELECT 1 FROM pg_stat_activity WHERE application_name = 'agent-cell' AND wait_event_type = 'Lock' AND query LIKE '%team_reservations%'",
        );
        return r.rows.length > 0 ? true : undefined;
      });
      await a.kill('SIGKILL');
      // The cell sent that transaction's COMMIT with its statements (one Sync a batch: docs/storage.md). Were
      // the session to wait on, the server would run it once the lock goes, after the cell's death. The
      // server ends a session whose client is gone within a second, even while it waits for a lock
      // (client_connection_check_interval, set by the store), and the transaction with it.
      await until(
        "the dead cell's session to end",
        async () => {
          const r = await adminQuery(
            db.url,
            "SELECT 1 FROM pg_stat_activity WHERE application_name = 'agent-cell' AND wait_event_type = 'Lock'",
          );
          return r.rows.length === 0 ? true : undefined;
        },
        15_000,
      );
    } finally {
      await lock.release();
    }
    const runId = reply.body.run_id as string;
    const kept = await adminQuery(db.url, `SELECT kind FROM journal WHERE run_id = '${runId}' ORDER BY seq`);
    assert.deepEqual(
      kept.rows.map((r) => (r as { kind: string }).kind),
      ['run_requested'],
      'the run was recorded with its opening, and nothing after',
    );
    assert.equal(ai.requests.length, asked, 'no model was asked before the kill');

    const b = await startCellProcess({ dataDir: a.dataDir, args });
    procs.push(b);
    const apiB = httpApi(b.url, a.adminKey);
    const done = await until('the run to finish after the restart', async () => {
      const s = await ok(apiB, 'GET', `${T}/crews/${tm.crew}/runs/${runId}`);
      return ['completed', 'failed', 'refused', 'cancelled'].includes(s.state) ? s : undefined;
    });
    assert.equal(done.state, 'completed', JSON.stringify(done.error));
    assert.equal(done.output, 'c2 done');
    for (const role of ['c1', 'c2'])
      assert.equal(ai.requests.slice(asked).filter((r) => roleOf(r.body) === role).length, 1, `${role} asked once`);
    const { records, verdict } = await verifiedJournal(apiB, b.url, runId);
    assert.deepEqual(verdict, { ok: true });
    assert.deepEqual(
      records.slice(0, 3).map((r: JournalRecord) => [r.kind, r.v === 2 ? r.epoch : null]),
      [
        ['run_requested', 1],
        ['taken_over', 2],
        ['run_started', 2],
      ],
      'recorded claimed at epoch 1, taken back at epoch 2 before anything else',
    );
    assert.ok(
      records.slice(1).every((r: JournalRecord) => r.v === 2 && r.epoch === 2),
      'every record after the opening is the restarted drive',
    );
    assert.equal(await metric(metricsUrl(b), 'cell_run_takeovers_total', { previous: 'restart' }), 1);
    await b.stop();
  });
});
