/**
 * Approvals for agent job runs: a scheduled `agent` definition produces a job
 * run (kind job, job_type agent) that can wait on an approval (a side-effecting
 * tool call under `ask`, or a human_approval stage). It is decided through
 * POST /admin/jobs/runs/{run_id}/approvals/{step_id} with the crew route's
 * rules, and then completes.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { FakeOpenAI } from '../../fixtures/openai-server.ts';
import type { InProcess } from '../../helpers/inproc.ts';
import { fireAgent } from './_agent.ts';
import { A, T, ok, team, type Api, crewFixture } from '../../helpers/teams.ts';

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

/** Polls (bounded) the job run until `pred` holds. */
async function until(runId: string, pred: (r: any) => boolean): Promise<any> {
  let r: any;
  for (let i = 0; i < 400; i++) {
    await t.modules.teams.teams.settled(runId);
    r = await ok(api, 'GET', `${J}/runs/${runId}`);
    if (pred(r)) return r;
    await new Promise((res) => setTimeout(res, 10));
  }
  assert.fail(`run ${runId} never reached the expected state: ${JSON.stringify(r)}`);
}

async function approverKey(name: string): Promise<string> {
  const p = await ok(api, 'POST', `${A}/principals`, { kind: 'service', name, roles: ['operator'] });
  const k = await ok(api, 'POST', `${A}/api-keys`, { owner_id: p.id, name: `${name}-key` });
  return k.secret;
}

test('an agent job run waiting on a tool-call approval is approved through the jobs route and completes', async () => {
  ai.setResponder((req) => {
    const last = req.messages.at(-1)!;
    if (last.role === 'tool') return { content: 'stored it' };
    return { tool_calls: [{ name: 'kv__put', arguments: { key: 'agent-job-key', value: 'v' } }] };
  });
  const cap = { allowed_tools: ['kv.put'], permission_mode: 'ask', egress_allowlist: ['kv:*'] };
  const tm = await team(api, 'sequential', [{ role: 'scribe', cap }]);
  const runId = (await fireAgent(t, api, tm.crew, 'ask-agent')).runId;
  const w = await until(runId, (r) => r.state === 'waiting');
  assert.equal(w.kind, 'job');
  assert.equal(w.job_type, 'agent');
  assert.equal(w.pending_approvals.length, 1, JSON.stringify(w));
  assert.equal(w.pending_approvals[0].kind, 'tool_call');
  const step = w.pending_approvals[0].step_id as string;
  assert.equal(await t.row('SELECT 1 AS x FROM tool_kv WHERE key = ?', ['agent-job-key']), undefined, 'nothing runs before the approval');

  // The crew route is for crew runs only; the jobs route is the one for this run.
  const viaCrew = await t.request('POST', `${T}/crews/${tm.crew}/runs/${runId}/approvals/${encodeURIComponent(step)}`, {
    token: t.adminKey,
    body: { decision: 'approve' },
  });
  assert.equal(viaCrew.status, 404);
  const unknownStep = await t.request('POST', `${J}/runs/${runId}/approvals/nope`, { token: t.adminKey, body: { decision: 'approve' } });
  assert.equal(unknownStep.status, 404);
  const badBody = await t.request('POST', `${J}/runs/${runId}/approvals/${encodeURIComponent(step)}`, {
    token: t.adminKey,
    body: { decision: 'maybe' },
  });
  assert.equal(badBody.status, 400);

  const d = await t.request('POST', `${J}/runs/${runId}/approvals/${encodeURIComponent(step)}`, {
    token: t.adminKey,
    body: { decision: 'approve', comment: 'ok' },
  });
  assert.equal(d.status, 200, d.text);
  assert.equal(d.body.run_id, runId);
  const done = await until(runId, (r) => !['waiting', 'running', 'queued'].includes(r.state));
  assert.equal(done.state, 'completed', JSON.stringify(done.error));
  assert.equal(done.output, 'stored it');
  assert.ok(await t.row('SELECT 1 AS x FROM tool_kv WHERE key = ?', ['agent-job-key']), 'the approved tool call ran');
  const kinds = (await t.modules.runs.runs.readJournal(runId)).map((r) => r.kind);
  assert.ok(kinds.includes('approval_received'), kinds.join(','));
  const audit = await t.row("SELECT COUNT(*) AS n FROM audit WHERE action = 'jobs.run.approval' AND target LIKE ?", [`${runId}:%`]);
  assert.ok(Number(audit?.['n'] ?? 0) >= 1, 'the decision is audited');

  // After the end: the step is no longer pending.
  const late = await t.request('POST', `${J}/runs/${runId}/approvals/${encodeURIComponent(step)}`, {
    token: t.adminKey,
    body: { decision: 'approve' },
  });
  assert.equal(late.status, 404);
});

test('same rules as crews: two-person refuses the requester, one decision per principal; a rejection refuses the run', async () => {
  ai.setResponder(() => ({ content: 'draft' }));
  const tm = await team(api, 'sequential', [{ role: 'drafter' }], {
    post: [{ kind: 'human_approval', config: { rule: 'two_person', timeout_ms: 3_600_000, prompt: 'ship?' } }],
  });
  const runId = (await fireAgent(t, api, tm.crew, 'two-person-agent')).runId;
  const w = await until(runId, (r) => r.state === 'waiting');
  assert.equal(w.pending_approvals[0].rule, 'two_person');
  const path = `${J}/runs/${runId}/approvals/${encodeURIComponent(w.pending_approvals[0].step_id)}`;

  const self = await t.request('POST', path, { token: t.adminKey, body: { decision: 'approve' } });
  assert.equal(self.status, 403, 'the definition author (the run requester) cannot approve');
  assert.equal(self.body.details.reason, 'requester_cannot_approve');
  const k1 = await approverKey('job-approver-one');
  const k2 = await approverKey('job-approver-two');
  assert.equal((await t.request('POST', path, { token: k1, body: { decision: 'approve' } })).status, 200);
  const mid = await until(runId, (r) => r.state === 'waiting' && r.pending_approvals[0]?.decisions.length === 1);
  assert.equal(mid.state, 'waiting', 'one approval is not two');
  const twice = await t.request('POST', path, { token: k1, body: { decision: 'approve' } });
  assert.equal(twice.status, 409);
  assert.equal(twice.body.details.reason, 'already_decided');
  assert.equal((await t.request('POST', path, { token: k2, body: { decision: 'reject' } })).status, 200);
  const end = await until(runId, (r) => !['waiting', 'running', 'queued'].includes(r.state));
  assert.equal(end.state, 'refused');
  assert.equal(end.error.reason, 'approval_rejected');
});

test('only agent job runs take approvals: other job runs answer 404; without agent_teams.approve 403', async () => {
  const sub = await ok(api, 'POST', `${J}/runs`, {
    job_type: 'single',
    workspace_id: 'w',
    spec: { tool: 'calc', args: { expression: '1+1' } },
  });
  const r = await t.request('POST', `${J}/runs/${sub.run_id}/approvals/x`, { token: t.adminKey, body: { decision: 'approve' } });
  assert.equal(r.status, 404);
  const p = await ok(api, 'POST', `${A}/principals`, { kind: 'service', name: 'jobs-only', roles: [] });
  const k = await ok(api, 'POST', `${A}/api-keys`, {
    owner_id: p.id,
    name: 'jobs-only-key',
    scopes: ['system.orchestration.admin.read', 'system.orchestration.admin.write'],
  });
  const denied = await t.request('POST', `${J}/runs/${sub.run_id}/approvals/x`, { token: k.secret, body: { decision: 'approve' } });
  assert.equal(denied.status, 403);
});
