/**
 * Shared by the agent job tests (agent-approvals, rerun-agent): fires an agent
 * job definition pinned to a crew's graph on the in-process cell's test clock,
 * and disables it again, so exactly one run is started.
 */
import assert from 'node:assert/strict';
import type { InProcess } from '../../helpers/inproc.ts';
import { A, T, ok, type Api } from '../../helpers/teams.ts';

const J = `${A}/jobs`;

/** The run id of the one fire of a new agent definition named `name` for `crewId`, with the definition's id. */
export async function fireAgent(t: InProcess, api: Api, crewId: string, name: string): Promise<{ runId: string; scheduleId: string }> {
  const crew = await ok(api, 'GET', `${T}/crews/${crewId}`);
  const def = await ok(api, 'POST', `${J}/definitions`, {
    name,
    job_type: 'agent',
    spec: { graph_id: crew.graph_hash, input: 'go' },
    cron: '*/10 * * * *',
  });
  t.clock.advance(10 * 60_000);
  assert.ok((await t.modules.jobs.scheduler.tick()) >= 1);
  const d = await ok(api, 'GET', `${J}/definitions/${def.schedule_id}`);
  assert.match(d.last_run_id, /^run_/);
  await ok(api, 'POST', `${J}/definitions/${def.schedule_id}/disable`, {});
  return { runId: d.last_run_id as string, scheduleId: def.schedule_id as string };
}
