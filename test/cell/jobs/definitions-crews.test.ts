/**
 * agent and team definitions fire through the Agent Teams crew-run path:
 * team names a crew; agent pins a compiled crew graph by its hash (graph_id).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { InProcess } from '../../helpers/inproc.ts';
import type { FakeOpenAI } from '../../fixtures/openai-server.ts';
import { ok, team, type Api, crewFixture } from '../../helpers/teams.ts';

const DEFS = '/api/public/v1/admin/jobs/definitions';
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

test('team and agent definitions launch the crew on their cron, with the schedule recorded on the run', async () => {
  const tm = await team(api, 'sequential', [{ role: 'writer' }]);
  const crew = await ok(api, 'GET', `/api/public/v1/admin/agent-teams/crews/${tm.crew}`);
  const graphId = crew.graph_hash as string;
  assert.match(graphId, /^sha256:/);

  const teamDef = await ok(api, 'POST', DEFS, {
    name: 'team',
    job_type: 'team',
    spec: { crew_id: tm.crew, input: 'hello' },
    cron: '*/10 * * * *',
  });
  const agentDef = await ok(api, 'POST', DEFS, {
    name: 'agent',
    job_type: 'agent',
    spec: { graph_id: graphId, input: 'hi' },
    cron: '*/10 * * * *',
  });
  t.clock.advance(10 * 60_000);
  assert.equal(await t.modules.jobs.scheduler.tick(), 2);
  for (const id of [teamDef.schedule_id, agentDef.schedule_id]) {
    const d = await ok(api, 'GET', `${DEFS}/${id}`);
    assert.equal(d.fire_count, 1);
    assert.match(d.last_run_id, /^run_/, JSON.stringify(d));
    await t.modules.teams.teams.settled(d.last_run_id);
    await waitDone(d.last_run_id);
    const run = await ok(api, 'GET', `/api/public/v1/admin/jobs/runs/${d.last_run_id}`);
    assert.equal(run.flags.schedule_id, id);
    assert.equal(run.state, 'completed', JSON.stringify(run));
    assert.equal(run.source, `schedule:${id}`, 'the runs of a schedule say so, crew runs too');
    if (id === teamDef.schedule_id) {
      assert.equal(run.kind, 'crew', 'team: the crew is launched');
      assert.equal(run.crew_id, tm.crew);
    } else {
      assert.equal(run.kind, 'job', 'agent: a job run through the jobs submit path');
      assert.equal(run.job_type, 'agent');
      assert.equal(run.graph_hash, graphId, 'it ran the pinned graph');
    }
  }
  assert.equal(await t.modules.jobs.scheduler.tick(), 0, 'no double fire');
  const fires = await t.rows('SELECT state FROM job_fires');
  assert.deepEqual(fires.map((f) => f['state']).sort(), ['dispatched', 'dispatched']);

  // The pinned graph changes (the crew is rebound to another agent): the agent fire is refused, with a record.
  const other = await team(api, 'sequential', [{ role: 'writer' }]);
  assert.notEqual(other.crew, tm.crew);
  // (The crew's body is JSON text: changed here rather than in SQL, whose JSON functions differ between the engines.)
  const row = await t.row('SELECT body FROM team_crews WHERE crew_id = ?', [tm.crew]);
  const body = JSON.parse(String(row!['body'])) as Record<string, unknown>;
  body['assignments'] = { [tm.billets['writer']!]: other.agents['writer'] };
  await t.core.store.write((tx) => tx.run('UPDATE team_crews SET body = ? WHERE crew_id = ?', [JSON.stringify(body), tm.crew]));
  t.clock.advance(10 * 60_000);
  assert.equal(await t.modules.jobs.scheduler.tick(), 2);
  const d = await ok(api, 'GET', `${DEFS}/${agentDef.schedule_id}`);
  await waitDone(d.last_run_id);
  const refused = await ok(api, 'GET', `/api/public/v1/admin/jobs/runs/${d.last_run_id}`);
  assert.equal(refused.state, 'refused');
  assert.equal(refused.error.reason, 'graph_unknown');
});

test('a team fire launched but not settled (its cell died in between) is settled with its run, not launched again', async () => {
  const tm = await team(api, 'sequential', [{ role: 'once' }]);
  const def = await ok(api, 'POST', DEFS, { name: 'team-once', job_type: 'team', spec: { crew_id: tm.crew }, cron: '*/10 * * * *' });
  t.clock.advance(10 * 60_000);
  assert.ok((await t.modules.jobs.scheduler.tick()) >= 1, 'it fired (with the definitions of the test before)');
  const fired = await t.row('SELECT fire_at, state, run_id FROM job_fires WHERE schedule_id = ?', [def.schedule_id]);
  assert.equal(fired!['state'], 'dispatched');
  const runId = String(fired!['run_id']);
  await waitDone(runId);
  const crewRuns = async () => Number((await t.row('SELECT COUNT(*) AS n FROM runs WHERE crew_id = ?', [tm.crew]))!['n']);
  assert.equal(await crewRuns(), 1);

  // As a cell that launched the run and died before settling the fire leaves it: pending, under the run's reserved id.
  await t.core.store.write((tx) =>
    tx.run("UPDATE job_fires SET state = 'pending', cell_id = 'cell-dead', created_at = ? WHERE schedule_id = ?", [
      t.clock.now() - 120_000,
      def.schedule_id,
    ]),
  );
  await t.modules.jobs.scheduler.tick();
  const settled = await t.row('SELECT state, run_id, cell_id FROM job_fires WHERE schedule_id = ?', [def.schedule_id]);
  assert.deepEqual({ ...settled }, { state: 'dispatched', run_id: runId, cell_id: t.core.config.cellId }, 'taken over and settled');
  assert.equal(await crewRuns(), 1, 'the crew run was not launched a second time');
  assert.equal((await ok(api, 'GET', `${DEFS}/${def.schedule_id}`)).last_run_id, runId);

  // A pending fire whose reserved run was never created (the cell died before launching): launched once, under that id.
  const reserved = 'run_' + '0'.repeat(19) + '1';
  await t.core.store.write((tx) =>
    tx.run("UPDATE job_fires SET state = 'pending', run_id = ?, cell_id = 'cell-dead', created_at = ? WHERE schedule_id = ?", [
      reserved,
      t.clock.now() - 120_000,
      def.schedule_id,
    ]),
  );
  await t.modules.jobs.scheduler.tick();
  const launched = await t.row('SELECT state, run_id FROM job_fires WHERE schedule_id = ?', [def.schedule_id]);
  assert.deepEqual({ ...launched }, { state: 'dispatched', run_id: reserved });
  await waitDone(reserved);
  assert.equal(await crewRuns(), 2);
  assert.equal((await ok(api, 'GET', `/api/public/v1/admin/jobs/runs/${reserved}`)).crew_id, tm.crew);
});

async function waitDone(runId: string): Promise<void> {
  await t.modules.teams.teams.settled(runId);
  for (let i = 0; i < 400; i++) {
    const r = await ok(api, 'GET', `/api/public/v1/admin/jobs/runs/${runId}`);
    if (['completed', 'failed', 'refused', 'cancelled'].includes(r.state)) return;
    await new Promise((res) => setTimeout(res, 25));
  }
}
