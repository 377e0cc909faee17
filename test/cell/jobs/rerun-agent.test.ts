/**
 * Rerun of a failed agent job run (issue #24): a scheduled `agent` definition's
 * run whose second seat's model call failed is rerun by the caller; the first
 * seat's answer is reused from the parent's journal (one model call in all for
 * the rerun, the failed seat's), the rerun is requested by the caller, and both
 * runs show the link. A caller narrower than the crew's seats is refused
 * (403 wider_than_caller, the one containment check) and nothing is run; a run
 * whose pinned graph is gone cannot be rerun (409 rerun_unsupported).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { FakeOpenAI } from '../../fixtures/openai-server.ts';
import { actor } from '../../helpers/actors.ts';
import type { InProcess } from '../../helpers/inproc.ts';
import { fireAgent } from './_agent.ts';
import { A, T, ok, roleOf, team, type Api, crewFixture } from '../../helpers/teams.ts';

const J = `${A}/jobs`;
let t: InProcess;
let ai: FakeOpenAI;
let api: Api;
before(async () => {
  ({ t, ai, api } = await crewFixture());
});
after(async () => {
  await t.close();
  await ai.close();
});

async function ended(runId: string): Promise<any> {
  for (let i = 0; i < 3000; i++) {
    const state = (await t.modules.runs.runs.getRun(runId))?.state ?? '';
    if (['completed', 'failed', 'refused', 'cancelled'].includes(state)) return ok(api, 'GET', `${J}/runs/${runId}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.fail(`run ${runId} did not end`);
}

test('a failed agent job run is rerun as the caller, reusing the steps that completed', async () => {
  let down = true;
  ai.setResponder((req) => {
    if (roleOf(req) === 'checker' && down) return { status: 500 };
    return { content: `${roleOf(req)} says ok` };
  });
  const tm = await team(api, 'sequential', [{ role: 'drafter' }, { role: 'checker' }]);
  const parentId = (await fireAgent(t, api, tm.crew, 'rerun-agent')).runId;
  const parent = await ended(parentId);
  assert.equal(parent.state, 'failed', JSON.stringify(parent));
  assert.equal(parent.job_type, 'agent');

  // A caller who may read and run jobs but holds less than the crew's seats: refused, nothing runs.
  const narrow = await actor(t, {
    permissions: ['system.orchestration.admin.read', 'system.orchestration.admin.write'],
    authority: { allowed_tools: ['calc'] },
  });
  const calls0 = ai.requests.length;
  const refused = await t.request('POST', `${J}/runs/${parentId}/rerun`, { token: narrow.key });
  assert.equal(refused.status, 403, refused.text);
  assert.equal(refused.body.details.reason, 'wider_than_caller');
  assert.deepEqual((await ok(api, 'GET', `${J}/runs/${parentId}`)).forks, []);

  down = false;
  const r = await t.request('POST', `${J}/runs/${parentId}/rerun`, { token: t.adminKey });
  assert.equal(r.status, 201, r.text);
  const rerun = await ended(r.body.run_id);
  assert.equal(rerun.state, 'completed', JSON.stringify(rerun.error));
  assert.equal(rerun.job_type, 'agent');
  assert.deepEqual(rerun.spec, parent.spec, 'the same spec');
  assert.equal(rerun.source, `rerun:${parentId}`);
  assert.equal(rerun.requester, (await ok(api, 'GET', `${A}/whoami`)).principal.id, 'requested by the caller');
  assert.equal(rerun.forked_from.run_id, parentId);
  assert.deepEqual(
    (await ok(api, 'GET', `${J}/runs/${parentId}`)).forks.map((f: any) => f.run_id),
    [rerun.run_id],
  );
  // The drafter's answer was reused: the rerun asked the model once, for the checker.
  const asked = ai.requests.slice(calls0).map((q) => roleOf(q.body));
  assert.deepEqual(asked, ['checker']);
  const j = await t.modules.runs.runs.readJournal(rerun.run_id, 0, 1000);
  assert.equal(j[0]!.kind, 'forked');
  assert.ok(j.some((rec) => rec.step_id.startsWith('agent:') && (rec.data as any)?.reused));

  // A run whose pinned graph the cell no longer knows (its crew was deleted) has nothing to rerun.
  down = true;
  const gone = await team(api, 'sequential', [{ role: 'checker' }]);
  const { runId: goneRun, scheduleId } = await fireAgent(t, api, gone.crew, 'rerun-gone');
  assert.equal((await ended(goneRun)).state, 'failed');
  await ok(api, 'DELETE', `${J}/definitions/${scheduleId}`, undefined, [200, 204]);
  await ok(api, 'DELETE', `${T}/crews/${gone.crew}`, undefined, [200, 204]);
  const impossible = await t.request('POST', `${J}/runs/${goneRun}/rerun`, { token: t.adminKey });
  assert.equal(impossible.status, 409, impossible.text);
  assert.equal(impossible.body.details.reason, 'rerun_unsupported');
});
