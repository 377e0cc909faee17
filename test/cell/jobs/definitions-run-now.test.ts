/**
 * Run a definition now (issue 43 §4): `POST /admin/jobs/definitions/{id}/run` starts one run of the
 * template as the caller, outside the cron. The run is the caller's (requester, authority), it records
 * who fired it (source, flags, audit), and the definition is left as it was. Refused: a caller without
 * the write permission, without agent_teams.write for a crew template, or whose authority does not
 * cover the crew's seats (nothing is started); an unknown or deleted definition.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { InProcess } from '../../helpers/inproc.ts';
import type { FakeOpenAI } from '../../fixtures/openai-server.ts';
import { A, ok, team, type Api, crewFixture } from '../../helpers/teams.ts';
import { waitFinished } from './_wait.ts';

const DEFS = `${A}/jobs/definitions`;
let t: InProcess;
let ai: FakeOpenAI;
let api: Api;
before(async () => {
  ({ t, ai, api } = await crewFixture());
  ai.setResponder(() => ({ content: 'done' }));
});
after(async () => {
  await t.close();
  await ai.close();
});

/** A principal with `roles` and an API key of `scopes` (empty: its whole authority); its id and secret. */
async function caller(name: string, roles: string[], scopes: string[] = []): Promise<{ id: string; key: string }> {
  const p = await ok(api, 'POST', `${A}/principals`, { kind: 'service', name, roles });
  const k = await ok(api, 'POST', `${A}/api-keys`, { name: `${name}-key`, owner_id: p.id, scopes });
  return { id: p.id as string, key: k.secret as string };
}

const call = (method: string, path: string, token: string) => api.request(method, path, { token });

/** The run once its journal holds its end (awaited on the runs module's events, not polled). */
async function finished(runId: string): Promise<any> {
  await waitFinished(t.modules.runs.runs, runId);
  return ok(api, 'GET', `${A}/jobs/runs/${runId}`);
}

test("a definition runs now as the caller, who is recorded; the definition's schedule is untouched", async () => {
  const def = await ok(api, 'POST', DEFS, {
    name: 'squares',
    job_type: 'compute',
    workspace_id: 'w1',
    spec: { code: 'return input.xs.map((x) => x * x)', input: { xs: [2, 3] } },
    cron: '0 3 * * *',
  });
  const bob = await caller('bob-runs-now', ['operator']);
  const before = await ok(api, 'GET', `${DEFS}/${def.schedule_id}`);
  const r = await call('POST', `${DEFS}/${def.schedule_id}/run`, bob.key);
  assert.equal(r.status, 202, r.text);
  assert.equal(r.body.requester, bob.id, 'the run is the caller’s, not the author’s');
  assert.equal(r.body.kind, 'job');
  assert.equal(r.body.schedule_id, def.schedule_id);
  const run = await finished(r.body.run_id);
  assert.equal(run.state, 'completed', JSON.stringify(run.error));
  assert.deepEqual(run.output.result, [4, 9]);
  assert.equal(run.requester, bob.id);
  assert.equal(run.source, `schedule:${def.schedule_id}`);
  assert.deepEqual([run.flags.schedule_id, run.flags.fired_by, run.flags.manual], [def.schedule_id, bob.id, true]);
  // Found with the schedule's runs.
  const listed = await ok(api, 'GET', `${A}/jobs/runs?source=schedule:${def.schedule_id}`);
  assert.deepEqual(
    listed.items.map((x: { run_id: string }) => x.run_id),
    [r.body.run_id],
  );
  const after = await ok(api, 'GET', `${DEFS}/${def.schedule_id}`);
  for (const k of ['next_fire_at', 'fire_count', 'last_run_id', 'last_fire_at', 'author_id', 'enabled'])
    assert.deepEqual(after[k], before[k], `${k} is unchanged`);
  const audit = await ok(api, 'GET', `${A}/audit?action=jobs.definition.run&target=${def.schedule_id}`);
  assert.equal(audit.entries.length, 1);
  assert.equal(audit.entries[0].actor, bob.id);
  assert.equal(audit.entries[0].details.run_id, r.body.run_id);

  // Paused, it still runs on demand; deleted, it does not.
  await ok(api, 'POST', `${DEFS}/${def.schedule_id}/disable`);
  const paused = await call('POST', `${DEFS}/${def.schedule_id}/run`, bob.key);
  assert.equal(paused.status, 202, paused.text);
  assert.equal((await ok(api, 'GET', `${DEFS}/${def.schedule_id}`)).enabled, false, 'still paused');
  await ok(api, 'DELETE', `${DEFS}/${def.schedule_id}`);
  const gone = await call('POST', `${DEFS}/${def.schedule_id}/run`, bob.key);
  assert.equal(gone.status, 409);
  assert.equal(gone.body.details.reason, 'definition_deleted');
  const unknown = await call('POST', `${DEFS}/sch_00000000000000000000/run`, bob.key);
  assert.equal(unknown.status, 404);
});

test('refused: read-only, a crew template without agent_teams.write, seats beyond the caller; nothing starts', async () => {
  const tm = await team(api, 'sequential', [{ role: 'writer' }]);
  const teamDef = await ok(api, 'POST', DEFS, {
    name: 'crew-nightly',
    job_type: 'team',
    spec: { crew_id: tm.crew, input: 'x' },
    cron: '0 4 * * *',
  });
  const compute = await ok(api, 'POST', DEFS, {
    name: 'plain',
    job_type: 'compute',
    workspace_id: 'w1',
    spec: { code: 'return 1' },
    cron: '0 4 * * *',
  });
  const runsBefore = (await ok(api, 'GET', `${A}/jobs/runs?kind=all&limit=1`)).total as number;

  const reader = await caller('reader-runs-now', ['viewer']);
  const ro = await call('POST', `${DEFS}/${compute.schedule_id}/run`, reader.key);
  assert.equal(ro.status, 403);
  assert.equal(ro.body.details.required_permission, 'system.orchestration.admin.write');

  // Jobs only (no agent_teams.write): a crew template is refused, a compute one is not.
  const jobsOnly = await caller(
    'jobs-only-runs-now',
    ['operator'],
    ['system.orchestration.admin.write', 'system.orchestration.admin.read'],
  );
  const noTeams = await call('POST', `${DEFS}/${teamDef.schedule_id}/run`, jobsOnly.key);
  assert.equal(noTeams.status, 403, noTeams.text);
  assert.equal(noTeams.body.details.reason, 'missing_permission');
  assert.equal(noTeams.body.details.required_permission, 'agent_teams.write');

  // An operator whose envelope is the default (no tools): the crew's seat holds tools the caller does not.
  const narrow = await caller('narrow-runs-now', ['operator']);
  const wider = await call('POST', `${DEFS}/${teamDef.schedule_id}/run`, narrow.key);
  assert.equal(wider.status, 403, wider.text);
  assert.equal(wider.body.details.reason, 'wider_than_caller');
  assert.equal((await ok(api, 'GET', `${A}/jobs/runs?kind=all&limit=1`)).total, runsBefore, 'no run was started');

  // The owner (whose authority covers the seats) runs the crew now: a crew run from the schedule, as the owner.
  const me = (await ok(api, 'GET', `${A}/whoami`)).principal.id as string;
  const okRun = await ok(api, 'POST', `${DEFS}/${teamDef.schedule_id}/run`);
  assert.equal(okRun.kind, 'crew');
  await t.modules.teams.teams.settled(okRun.run_id);
  const run = await finished(okRun.run_id);
  assert.equal(run.state, 'completed', JSON.stringify(run.error));
  assert.equal(run.crew_id, tm.crew);
  assert.equal(run.source, `schedule:${teamDef.schedule_id}`);
  assert.equal(run.flags.fired_by, me);
});
