// List filters and the journal's paging (issue 25, part 3), on both engines:
// job and crew runs by state, job_type, crew_id, source and creation time;
// the audit trail by actor, action, target and time; the journal by limit and
// offset with total (after_seq kept). Runs are seeded at chosen times with the
// runs module's own insert (terminal states, so nothing drives them); the
// journal comes from a real compute job.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { waitFinished } from '../jobs/_wait.ts';
import { backfillErrorReasons } from '../../../cell/runs/repository.ts';

let t: InProcess;
const T0 = Date.UTC(2026, 0, 1);
const iso = (ms: number) => new Date(ms).toISOString();
const RUNS = '/api/public/v1/admin/jobs/runs';
const CREW_RUNS = '/api/public/v1/admin/agent-teams/runs';

before(async () => {
  t = await inProcessCell();
  const runs = t.modules.runs.runs;
  const seed = [
    { kind: 'job', job_type: 'sql', state: 'completed', source: 'api', at: T0 + 1000 },
    { kind: 'job', job_type: 'compute', state: 'failed', source: 'schedule:def_a', at: T0 + 2000 },
    { kind: 'job', job_type: 'sql', state: 'failed', source: 'endpoint:ep_1', at: T0 + 3000 },
    { kind: 'crew', crew_id: 'crw_a', state: 'completed', source: 'api', at: T0 + 4000 },
    { kind: 'crew', crew_id: 'crw_b', state: 'cancelled', source: 'schedule:def_b', at: T0 + 5000 },
  ] as const;
  await t.core.store.write(async (tx) => {
    for (const r of seed) await runs.createRunTx(tx, { requester: 'usr_seed', spec: {}, ...r });
  });
});
after(() => t?.close());

const withoutError = <T extends { error: unknown }>({ error: _, ...rest }: T) => rest;

const ids = async (path: string, key = 'items'): Promise<{ n: number; total: number; rows: Record<string, unknown>[] }> => {
  const r = await t.request('GET', path, { token: t.adminKey });
  assert.equal(r.status, 200, `${path}: ${r.text}`);
  return { n: r.body[key].length, total: r.body.total, rows: r.body[key] };
};

test('job runs: by state, job_type, crew_id, source, created_after/before; total counts the filtered list', async () => {
  assert.equal((await ids(`${RUNS}?state=failed`)).total, 2);
  assert.equal((await ids(`${RUNS}?job_type=sql`)).total, 2);
  assert.equal((await ids(`${RUNS}?job_type=sql&state=failed`)).total, 1);
  assert.equal((await ids(`${RUNS}?source=schedule`)).total, 1, 'schedule matches schedule:<id>');
  assert.equal((await ids(`${RUNS}?source=schedule:def_a`)).total, 1);
  assert.equal((await ids(`${RUNS}?source=sched`)).total, 0, 'a prefix of the kind is not a match');
  assert.equal((await ids(`${RUNS}?created_after=${iso(T0 + 1000)}`)).total, 2, 'exclusive');
  assert.equal((await ids(`${RUNS}?created_after=${iso(T0 + 1000)}&created_before=${iso(T0 + 3000)}`)).total, 1);
  const p = await ids(`${RUNS}?kind=all&crew_id=crw_b`);
  assert.equal(p.total, 1);
  assert.equal(p.rows[0]!['state'], 'cancelled');
  assert.equal((await ids(`${RUNS}?kind=all&state=completed&limit=1`)).n, 1);
  assert.equal((await ids(`${RUNS}?kind=all&state=completed&limit=1`)).total, 2);
});

test('crew runs: by state, crew_id, source, time; job_type matches none', async () => {
  assert.equal((await ids(`${CREW_RUNS}?crew_id=crw_a`, 'runs')).total, 1);
  assert.equal((await ids(`${CREW_RUNS}?source=schedule`, 'runs')).total, 1);
  assert.equal((await ids(`${CREW_RUNS}?created_before=${iso(T0 + 4500)}`, 'runs')).total, 1);
  assert.equal((await ids(`${CREW_RUNS}?state=cancelled`, 'runs')).total, 1);
  assert.equal((await ids(`${CREW_RUNS}?job_type=sql`, 'runs')).total, 0);
});

test('job and crew runs by the reason they ended with; runs that ended before the column are filled in', async () => {
  const runs = t.modules.runs.runs;
  const ended: string[] = [];
  const errors = [
    {
      kind: 'job',
      job_type: 'sql',
      error: { code: 'failed', message: 'no such column: nope', reason: 'sql_error', details: { statement: 1 } },
    },
    {
      kind: 'crew',
      crew_id: 'crw_r',
      error: { code: 'refused', message: 'rejected', reason: 'approval_rejected', details: { by: 'usr_x' } },
    },
    { kind: 'crew', crew_id: 'crw_r', error: { code: 'failed', message: 'the run failed', reason: 'step_timeout' } },
    // An error that names no reason is found by its code.
    { kind: 'job', job_type: 'compute', error: { code: 'internal_error', message: 'the run failed' } },
  ] as const;
  for (const e of errors) {
    const id = await t.core.store.write((tx) =>
      runs.createRunTx(tx, { requester: 'usr_seed', spec: {}, state: 'running', source: 'api', at: T0 + 9000, ...withoutError(e) }),
    );
    assert.ok(await runs.setRunState(id, e.error.code === 'refused' ? 'refused' : 'failed', { error: e.error }));
    ended.push(id);
  }
  const found = async (q: string, key = 'items') => (await ids(q, key)).rows.map((r) => r['run_id']);
  assert.deepEqual(await found(`${RUNS}?kind=all&reason=sql_error`), [ended[0]]);
  assert.deepEqual(await found(`${RUNS}?kind=all&reason=approval_rejected`), [ended[1]]);
  assert.deepEqual(await found(`${CREW_RUNS}?reason=step_timeout`, 'runs'), [ended[2]]);
  assert.deepEqual(await found(`${RUNS}?reason=internal_error`), [ended[3]]);
  assert.deepEqual(await found(`${RUNS}?kind=all&reason=approval`), [], 'a prefix is not a match');
  assert.deepEqual(await found(`${RUNS}?kind=all&reason=sql_error&state=completed`), [], 'combined with the other filters');
  assert.equal((await ids(`${RUNS}?kind=all&reason=sql_error`)).rows[0]!['error'] !== null, true);
  // A store from before the column: the reasons are empty until the module fills them in.
  await t.core.store.write((tx) => tx.run('UPDATE runs SET error_reason = NULL'));
  assert.deepEqual(await found(`${RUNS}?kind=all&reason=sql_error`), []);
  assert.equal(await backfillErrorReasons(t.core.store, 2), 2, 'one batch');
  assert.equal(await backfillErrorReasons(t.core.store, 100), 2, 'the rest');
  assert.equal(await backfillErrorReasons(t.core.store, 100), 0, 'nothing left');
  assert.deepEqual(await found(`${RUNS}?kind=all&reason=sql_error`), [ended[0]]);
  assert.deepEqual(await found(`${CREW_RUNS}?reason=approval_rejected`, 'runs'), [ended[1]]);
});

test('bad filter values are 400 naming the parameter', async () => {
  for (const [q, path] of [
    ['reason=Not%20a%20reason', 'reason'],
    ['reason=', 'reason'],
    ['state=done', 'state'],
    ['created_after=yesterday', 'created_after'],
    ['created_after=2026-01-01', 'created_after'],
    ['job_type=', 'job_type'],
  ] as const) {
    const r = await t.request('GET', `${RUNS}?${q}`, { token: t.adminKey });
    assert.equal(r.status, 400, q);
    assert.equal(r.body.error, 'invalid_request');
    assert.equal(r.body.details.issues[0].path, path, q);
  }
});

test('audit: by actor, action, target and time', async () => {
  const start = t.clock.now();
  t.clock.advance(1000);
  const p = await t.request('POST', '/api/public/v1/admin/principals', { token: t.adminKey, body: { kind: 'service', name: 'audited' } });
  assert.equal(p.status, 201);
  t.clock.advance(1000);
  const mid = t.clock.now();
  t.clock.advance(1000);
  const k = await t.request('POST', '/api/public/v1/admin/api-keys', { token: t.adminKey, body: { name: 'k', owner_id: p.body.id } });
  assert.equal(k.status, 201, k.text);
  const A = '/api/public/v1/admin/audit';
  const all = await ids(`${A}?after=${iso(start)}`, 'entries');
  assert.ok(all.total >= 2);
  const created = await ids(`${A}?after=${iso(start)}&before=${iso(mid)}`, 'entries');
  assert.ok(created.rows.every((e) => Date.parse(String(e['at'])) < mid));
  assert.ok(created.rows.some((e) => e['target'] === p.body.id));
  const mints = await ids(`${A}?action=api_key.mint&after=${iso(mid)}`, 'entries');
  assert.equal(mints.total, 1);
  assert.equal(mints.rows[0]!['target'], k.body.key_id ?? k.body.id);
  assert.equal((await ids(`${A}?target=${p.body.id}&action=api_key.mint`, 'entries')).total, 0);
  const bootstrap = await ids(`${A}?actor=system:bootstrap`, 'entries');
  assert.equal(bootstrap.total, 1);
});

test('journal: limit and offset with total (seq offset+1 first); after_seq kept and combined', async () => {
  const run = await t.request('POST', RUNS, {
    token: t.adminKey,
    body: { job_type: 'compute', workspace_id: 'w', spec: { code: 'return 1' } },
  });
  assert.equal(run.status, 202, run.text);
  await waitFinished(t.modules.runs.runs, run.body.run_id);
  const J = `${RUNS}/${run.body.run_id}/journal`;
  const whole = await t.request('GET', J, { token: t.adminKey });
  const total = whole.body.total as number;
  assert.ok(total >= 3, `records: ${total}`);
  const page = await t.request('GET', `${J}?limit=2&offset=1`, { token: t.adminKey });
  assert.equal(page.status, 200, page.text);
  assert.deepEqual(
    page.body.records.map((r: { seq: number }) => r.seq),
    [2, 3],
  );
  assert.equal(page.body.limit, 2);
  assert.equal(page.body.offset, 1);
  assert.equal(page.body.total, total);
  const past = await t.request('GET', `${J}?offset=${total}`, { token: t.adminKey });
  assert.deepEqual(past.body.records, []);
  assert.equal(past.body.total, total);
  const both = await t.request('GET', `${J}?after_seq=1&offset=1&limit=1`, { token: t.adminKey });
  assert.deepEqual(
    both.body.records.map((r: { seq: number }) => r.seq),
    [3],
  );
  const bad = await t.request('GET', `${J}?offset=-1`, { token: t.adminKey });
  assert.equal(bad.status, 400);
  assert.match(bad.body.details.issues[0].message, /from 0 to/);
});
