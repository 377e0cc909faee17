/**
 * A SQL job step whose workspace connection is lost mid-task (issue 22's
 * pg-stop scenario, made deterministic), PostgreSQL, the real cell process:
 * the step is run again once the database answers and the run completes, its
 * statements applied exactly once (the effect key), instead of the run
 * failing with `sql_error`. The test holds the workspace's table in an
 * exclusive lock and ends the job's connection while it waits on it.
 * Needs `node scripts/build.mjs` first.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startGroup, type Group } from '../helpers/group.ts';
import { adminQuery, lockTable, pgUnavailable, workspaceDb } from '../helpers/postgres.ts';
import { A, ok, type Api } from '../helpers/teams.ts';
import { httpApi, jobRunEnded, TERMINAL, until } from './_runs.ts';

const skip = pgUnavailable() ?? false;

let g: Group;
let api: Api;
before(async () => {
  if (skip) return;
  g = await startGroup(1);
  api = httpApi(g.cells[0]!.url, g.adminKey);
});
after(async () => {
  await g?.stop();
});

const finished = (runId: string) => jobRunEnded(api, runId);

const sqlJob = (statements: { sql: string }[]) => ({ job_type: 'sql', workspace_id: 'lost', spec: { statements } });

test('a SQL step whose connection is lost runs again once the database answers, and applies once', { skip, timeout: 180_000 }, async () => {
  const first = await ok(api, 'POST', `${A}/jobs/runs`, sqlJob([{ sql: 'CREATE TABLE IF NOT EXISTS effects (id TEXT PRIMARY KEY)' }]));
  assert.equal((await finished(first.run_id)).state, 'completed');
  // The workspace's own database on the group's server.
  const ws = workspaceDb(g.db.url, 'lost');
  const schema = ws.schema;
  const lock = await lockTable(ws.url, `"${schema}".effects`);
  let ended = 0;
  let runId = '';
  try {
    const run = await ok(api, 'POST', `${A}/jobs/runs`, sqlJob([{ sql: "INSERT INTO effects (id) VALUES ('once')" }]));
    runId = run.run_id;
    // The job's connection waits on the lock: ended (twice, so the retry meets the outage too), unless the run
    // ends first (it failed on the lost connection).
    await until(
      "the job's connection to be ended twice",
      async () => {
        ended += await lock.endWaiters('agent-cell-job');
        if (ended >= 2) return true;
        return TERMINAL.includes((await ok(api, 'GET', `${A}/jobs/runs/${runId}`)).state) ? true : undefined;
      },
      60_000,
    );
  } finally {
    await lock.release();
  }
  const done = await finished(runId);
  assert.equal(done.state, 'completed', JSON.stringify(done.error));
  assert.ok(ended >= 2, `the job's connection was ended twice (${ended})`);
  const rows = await adminQuery(ws.url, `SELECT count(*)::int AS n FROM "${schema}".effects WHERE id = 'once'`);
  assert.equal(Number(rows.rows[0]!.n), 1, 'the statement applied once');
  assert.match(g.cells[0]!.output(), /a SQL step waits for the workspace database/);
});
