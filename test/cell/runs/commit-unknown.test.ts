// A driver's COMMIT whose outcome is unknown (the connection was cut during it, and the store could not
// say afterwards), in process, both engines: the store's write is wrapped to answer `commit_unknown` for
// one chosen transaction, after committing it (kept) or instead of committing it (not kept). Whichever
// it was, the drive finds out once the store answers and goes on: no model is asked twice, and no call
// is flagged re-issued, since none left twice (the fault suite's pg-stop counts both under a 20 s outage).
// - A run's finish (its last step's record rides in it): not kept, it is written again; kept, it is not.
// - A model call's reservation committed alone (the first of a drive that has no record held back, as
//   after a wait): kept, the call leaves on it; not kept, it is made again.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ServiceError } from '../../../core/errors.ts';
import type { JournalRecord } from '../../../core/journal/record.ts';
import { verifyJournal } from '../../../core/journal/verify.ts';
import type { Store, Tx } from '../../../cell/store/types.ts';
import type { FakeOpenAI } from '../../fixtures/openai-server.ts';
import type { InProcess } from '../../helpers/inproc.ts';
import { T, agent, crewFixture, ok, roleOf, team, type Api } from '../../helpers/teams.ts';

/** Each test's own cell and provider (its store's write is wrapped while it runs). */
let t: InProcess;
let ai: FakeOpenAI;
let api: Api;
async function inCell(body: () => Promise<void>): Promise<void> {
  ({ t, ai, api } = await crewFixture());
  try {
    await body();
  } finally {
    await t.close();
    await ai.close();
  }
}

/** What a transaction of the run did, from its statements. */
interface Seen {
  finish: boolean;
  reservation: boolean;
  records: number;
}

/**
 * Answers `commit_unknown` for the first write transaction naming `runId` that `pick` chooses from
 * its statements: committed first when `kept`, rolled back when not. Returns how many it answered so.
 */
function cutOne(runId: string, kept: boolean, pick: (s: Seen) => boolean): () => number {
  const store = t.core.store as Store;
  const write = store.write.bind(store);
  let cut = 0;
  const marker = new Error('rolled back by the test');
  (store as { write: Store['write'] }).write = async (fn, o) => {
    if (cut > 0 || !o?.subjects?.includes(runId)) return write(fn, o);
    const seen: Seen = { finish: false, reservation: false, records: 0 };
    let picked = false;
    try {
      const out = await write(async (tx) => {
        const watch =
          <A extends [string, ...unknown[]], R>(f: (...a: A) => Promise<R>) =>
          (...a: A): Promise<R> => {
            const [sql, params] = a as unknown as [string, unknown[] | undefined];
            if (/^\s*INSERT INTO journal \(/.test(sql)) {
              seen.records++;
              if ((params ?? []).includes('run_finished')) seen.finish = true;
            }
            if (/^\s*INSERT INTO team_reservations/.test(sql)) seen.reservation = true;
            return f(...a);
          };
        // What the write does after its commit is not done for a commit answered unknown (as the store's).
        const effects: (() => void)[] = [];
        const watched: Tx = { get: watch(tx.get), all: watch(tx.all), run: watch(tx.run), afterCommit: (e) => effects.push(e) };
        const r = await fn(watched);
        picked = cut === 0 && pick(seen);
        if (picked && !kept) throw marker;
        if (!picked) for (const e of effects) tx.afterCommit(e);
        return r;
      }, o);
      if (!picked) return out;
    } catch (e) {
      if (!(picked && e === marker)) throw e;
    }
    cut++;
    throw new ServiceError('service_unavailable', 'The connection to the store was lost during commit and its outcome is unknown.', {
      details: { reason: 'commit_unknown' },
      retryable: false,
    });
  };
  return () => {
    (store as { write: Store['write'] }).write = write;
    return cut;
  };
}

/** cutOne for the next run a write names (its id is known once the crew starts it). Returns cutOne's restore. */
function cutNextRun(kept: boolean, pick: (s: Seen) => boolean): () => number {
  const store = t.core.store as Store;
  const write = store.write.bind(store);
  let restore: (() => number) | undefined;
  (store as { write: Store['write'] }).write = (fn, o) => {
    const id = o?.subjects?.[0];
    if (id === undefined || !id.startsWith('run_')) return write(fn, o);
    (store as { write: Store['write'] }).write = write;
    restore = cutOne(id, kept, pick);
    return store.write(fn, o);
  };
  return () => {
    if (restore === undefined) {
      (store as { write: Store['write'] }).write = write;
      return 0;
    }
    return restore();
  };
}

async function finished(runId: string): Promise<string> {
  for (let i = 0; i < 3000; i++) {
    const state = (await t.modules.runs.runs.getRun(runId))?.state ?? '';
    if (['completed', 'failed', 'refused', 'cancelled'].includes(state)) return state;
    // A backoff wait passes when the test moves the cell's clock on.
    if (state === 'waiting') t.clock.advance(60);
    await new Promise((res) => setTimeout(res, 20));
  }
  assert.fail(`run ${runId} did not finish`);
}

/** The run's journal verifies, records no step twice and no re-issue; the run flags none. */
async function noReissue(runId: string): Promise<JournalRecord[]> {
  const j = await t.modules.runs.runs.readJournal(runId, 0, 10_000);
  const keys = new Map(t.modules.iam.iam.identityKeys().map((k) => [k.kid, k.jwk]));
  assert.deepEqual(await verifyJournal(j, (kid) => keys.get(kid)), { ok: true });
  const steps = j.filter((r) => r.kind === 'step').map((r) => r.step_id);
  assert.equal(new Set(steps).size, steps.length, `no step recorded twice (${steps.join(', ')})`);
  assert.deepEqual(
    j.filter(
      (r) => (r.data as { reissued?: unknown } | null)?.reissued === true || (r.data as { reissue?: unknown } | null)?.reissue === true,
    ),
    [],
    'no call flagged re-issued',
  );
  assert.equal((await t.modules.runs.runs.getRun(runId))?.flags?.['reissued'], undefined, 'the run flags no re-issue');
  assert.equal(j.filter((r) => r.kind === 'run_finished').length, 1, 'one finish');
  return j;
}

for (const kept of [false, true]) {
  test(`a run's finish whose COMMIT's outcome is unknown (${kept ? 'kept' : 'not kept'}): the run completes, each model asked once`, () =>
    inCell(async () => {
      ai.setResponder((req) => ({ content: `${roleOf(req)} done`, usage: { prompt_tokens: 3, completion_tokens: 2 } }));
      const tm = await team(api, 'sequential', [{ role: 'a' }, { role: 'b' }, { role: 'c' }]);
      const asked = ai.requests.length;
      const restore = cutNextRun(kept, (s) => s.finish);
      const r = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'go' }, [201]);
      const state = await finished(r.run_id);
      assert.equal(restore(), 1, 'the finish was cut');
      assert.equal(state, 'completed');
      assert.deepEqual(
        ai.requests.slice(asked).map((q) => roleOf(q.body)),
        ['a', 'b', 'c'],
        'each model asked once',
      );
      await noReissue(r.run_id);
      const open = await t.row('SELECT COUNT(*) AS n FROM team_reservations WHERE run_id = ? AND committed_at IS NULL', [r.run_id]);
      assert.equal(Number(open!['n']), 0, 'every reservation committed');
    }));
}

for (const kept of [false, true]) {
  test(`a reservation committed alone whose outcome is unknown (${kept ? 'kept' : 'not kept'}): the call leaves once, not flagged`, () =>
    inCell(async () => {
      const CAP = { allowed_tools: [], permission_mode: 'auto', clearance_level: 0 };
      const f = await ok(api, 'POST', `${T}/formations`, { name: `cut-${kept}` });
      const b = await ok(api, 'POST', `${T}/formations/${f.formation_id}/billets`, {
        role_label: 'patient',
        required_skills: [],
        authority_cap: CAP,
        retry: { max_attempts: 2, backoff_ms: 100, max_backoff_ms: 100, on: ['provider_error'] },
      });
      const a = await agent(api, 'patient', CAP);
      const crew = (await ok(api, 'POST', `${T}/crews`, { formation_id: f.formation_id, assignments: { [b.billet_id]: a } })).crew_id;
      // The first call fails; its retry, after the wait, is the first call of a drive with nothing held back.
      let n = 0;
      ai.setResponder(() => (n++ === 0 ? { status: 503 } : { content: 'after the wait' }));
      const asked = ai.requests.length;
      const restore = cutNextRun(kept, (s) => s.reservation && s.records === 0);
      const r = await ok(api, 'POST', `${T}/crews/${crew}/runs`, { input: 'go' }, [201]);
      const state = await finished(r.run_id);
      assert.equal(restore(), 1, 'a reservation committed alone was cut');
      assert.equal(state, 'completed');
      assert.equal(ai.requests.length - asked, 2, 'the failed call and its retry, nothing more');
      const j = await noReissue(r.run_id);
      const attempts = j.filter((x) => x.kind === 'attempt').map((x) => [(x.data as any).attempt, (x.data as any).outcome]);
      assert.deepEqual(attempts, [
        [1, 'failed'],
        [2, 'ok'],
      ]);
      const rsv = await t.rows('SELECT committed_at FROM team_reservations WHERE run_id = ?', [r.run_id]);
      assert.equal(rsv.length, 2, 'one reservation an attempt');
      assert.ok(
        rsv.every((x) => x['committed_at'] !== null),
        'every reservation committed',
      );
    }));
}
