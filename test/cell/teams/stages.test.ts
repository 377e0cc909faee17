/**
 * Formation stages around the team exercise the other executors end to end:
 * gate, transform, skill (a stored transformer skill), conditional, tool,
 * map, loop, timer, and human_approval under the two-person rule through the
 * approvals route.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { InProcess } from '../../helpers/inproc.ts';
import { lastUser, type FakeOpenAI } from '../../fixtures/openai-server.ts';
import { A, T, agent, ok, team, type Api, crewFixture } from '../../helpers/teams.ts';

let t: InProcess;
let ai: FakeOpenAI;
let api: Api;
before(async () => {
  ({ t, ai, api } = await crewFixture());
  ai.setResponder((req) => ({ content: `agent saw: ${lastUser(req)}` }));
  await ok(api, 'POST', `${T}/skills`, { name: 'exclaim', skill_kind: 'transformer', definition: { expr: 'input + "?"' } });
});
after(async () => {
  await t.close();
  await ai.close();
});

async function approverKey(name: string): Promise<string> {
  const p = await ok(api, 'POST', `${A}/principals`, { kind: 'service', name, roles: ['operator'] });
  const k = await ok(api, 'POST', `${A}/api-keys`, { owner_id: p.id, name: `${name}-key` });
  return k.secret;
}

const PRE = [
  { kind: 'gate', config: { rules: [{ name: 'nonempty', expr: 'size(input) > 0' }] } },
  { kind: 'transform', config: { expr: 'input + "!"' } },
  { kind: 'skill', config: { skill: 'skill:exclaim' } },
  { kind: 'conditional', config: { expr: 'input.endsWith("?")' } },
  { kind: 'tool', config: { tool: 'calc', args: { expression: '2+3' } } },
  { kind: 'transform', config: { expr: 'input.value' } },
  { kind: 'map', config: { over: '[input, input]', max_items: 10, body: { kind: 'transform', config: { expr: 'input * 2.0' } } } },
  { kind: 'loop', config: { body: { kind: 'transform', config: { expr: 'input' } }, until: 'iteration >= 2.0', max_iterations: 5 } },
  { kind: 'timer', config: { delay_ms: 0 } },
];

test('every stage executor runs; two-person approval holds the run until two non-requesters approve', async () => {
  const tm = await team(api, 'sequential', [{ role: 'solo' }], {
    pre: PRE,
    post: [{ kind: 'human_approval', config: { rule: 'two_person', timeout_ms: 3_600_000, prompt: 'ship it?' } }],
  });
  const graph = await ok(api, 'GET', `${T}/formations/${tm.formation}/graph`);
  const kinds = new Set(graph.graph.nodes.map((n: { kind: string }) => n.kind));
  for (const k of ['gate', 'transform', 'skill', 'conditional', 'tool', 'map', 'loop', 'timer', 'agent', 'human_approval'])
    assert.ok(kinds.has(k), k);
  const skillNode = graph.graph.nodes.find((n: { kind: string }) => n.kind === 'skill');
  assert.equal(skillNode.config.skill.skill_kind, 'transformer', 'the stored skill is inlined in the graph');

  const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'go' });
  await t.modules.teams.teams.settled(run.run_id);
  const s = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`);
  assert.equal(s.state, 'waiting', JSON.stringify(s.error));
  assert.match(lastUser(ai.requests.at(-1)!.body), /\[10,10\]|\[10\.0,10\.0\]/);
  const step = s.pending_approvals[0].step_id as string;
  assert.equal(s.pending_approvals[0].rule, 'two_person');
  const path = `${T}/crews/${tm.crew}/runs/${run.run_id}/approvals/${encodeURIComponent(step)}`;

  const self = await t.request('POST', path, { token: t.adminKey, body: { decision: 'approve' } });
  assert.equal(self.status, 403);
  assert.equal(self.body.details.reason, 'requester_cannot_approve');

  const k1 = await approverKey('approver-one');
  const k2 = await approverKey('approver-two');
  const first = await t.request('POST', path, { token: k1, body: { decision: 'approve', comment: 'checked the figures' } });
  assert.equal(first.status, 200, first.text);
  await t.modules.teams.teams.settled(run.run_id);
  const mid = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`);
  assert.equal(mid.state, 'waiting');
  assert.equal(mid.pending_approvals.length, 1);
  assert.equal(mid.pending_approvals[0].decisions.length, 1);
  assert.equal(mid.pending_approvals[0].decisions[0].comment, 'checked the figures', "the decider's comment is shown with the decision");
  const twice = await t.request('POST', path, { token: k1, body: { decision: 'approve' } });
  assert.equal(twice.status, 409);
  const second = await t.request('POST', path, { token: k2, body: { decision: 'approve', comment: 'lgtm' } });
  assert.equal(second.status, 200, second.text);
  await t.modules.teams.teams.settled(run.run_id);
  const done = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`);
  assert.equal(done.state, 'completed', JSON.stringify(done.error));
  assert.match(String(done.output), /^agent saw:/);
  const decisions = (await t.modules.runs.runs.readJournal(run.run_id)).filter((r) => r.kind === 'decision').map((r) => r.step_id);
  assert.ok(decisions.includes('pre:0') && decisions.includes('post:0'), decisions.join(','));
});

test('a gate stage that declines refuses the run with a decision record', async () => {
  const tm = await team(api, 'sequential', [{ role: 'gated-solo' }], { pre: [PRE[0]] });
  const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: '' });
  await t.modules.teams.teams.settled(run.run_id);
  const s = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`);
  assert.equal(s.state, 'refused');
  assert.equal(s.error.reason, 'gate_declined');
  const d = (await t.modules.runs.runs.readJournal(run.run_id)).find((r) => r.kind === 'decision');
  assert.equal((d!.data as { rule: string }).rule, 'nonempty');
});

test('a rejection of a side-effecting tool call refuses the run', async () => {
  ai.setResponder(() => ({ tool_calls: [{ name: 'kv__put', arguments: { key: 'no', value: 1 } }] }));
  const cap = { allowed_tools: ['kv.put'], permission_mode: 'ask', egress_allowlist: ['kv:*'] };
  const tm = await team(api, 'sequential', [{ role: 'rejected', cap }]);
  const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'x' });
  await t.modules.teams.teams.settled(run.run_id);
  const s = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`);
  const step = s.pending_approvals[0].step_id as string;
  await ok(api, 'POST', `${T}/crews/${tm.crew}/runs/${run.run_id}/approvals/${encodeURIComponent(step)}`, {
    decision: 'reject',
    comment: 'no',
  });
  await t.modules.teams.teams.settled(run.run_id);
  const done = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`);
  assert.equal(done.state, 'refused');
  assert.equal(done.error.reason, 'approval_rejected');
  assert.equal(await t.row('SELECT 1 AS x FROM tool_kv WHERE key = ?', ['no']), undefined);
});

test('egress: http.get outside the allowlist is refused; budget: a tiny ledger stops the agent', async () => {
  ai.setResponder(() => ({ tool_calls: [{ name: 'http__get', arguments: { url: 'http://127.0.0.1:1/secret' } }] }));
  const cap = { allowed_tools: ['http.get'], permission_mode: 'auto', egress_allowlist: ['https://example.com'] };
  const tm = await team(api, 'sequential', [{ role: 'fetcher', cap }]);
  const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'x' });
  await t.modules.teams.teams.settled(run.run_id);
  const s = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`);
  assert.equal(s.state, 'refused');
  assert.equal(s.error.reason, 'egress_denied');

  ai.setResponder(() => ({ content: 'expensive' }));
  const poor = await team(api, 'sequential', [{ role: 'poor', ledger: 10 }]);
  const r2 = await ok(api, 'POST', `${T}/crews/${poor.crew}/runs`, { input: 'x' });
  await t.modules.teams.teams.settled(r2.run_id);
  const s2 = await ok(api, 'GET', `${T}/crews/${poor.crew}/runs/${r2.run_id}`);
  assert.equal(s2.state, 'refused');
  assert.equal(s2.error.reason, 'budget_exceeded');
});

test('a provider failure fails the run with model_error, never a leak', async () => {
  ai.setResponder(() => ({ status: 500 }));
  const tm = await team(api, 'sequential', [{ role: 'unlucky' }]);
  const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'x' });
  await t.modules.teams.teams.settled(run.run_id);
  const s = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`);
  assert.equal(s.state, 'failed');
  assert.equal(s.error.reason, 'model_error');
  // What an operator needs to know why: the failing step, the provider's status, the attempts made, the cell's own words.
  assert.match(s.error.details.step_id, /^agent:/);
  assert.deepEqual(s.error.details.upstream, {
    code: 'service_unavailable',
    message: 'the model provider failed',
    reason: 'provider_error',
    provider_status: 500,
    attempts: 1,
  });
  const j = await ok(api, 'GET', `${A}/jobs/runs/${run.run_id}/journal`);
  const end = j.records.at(-1);
  assert.equal(end.kind, 'run_finished');
  assert.deepEqual(end.data.error.details.upstream, s.error.details.upstream, 'the signed end record says the same');
  assert.ok(!JSON.stringify(s).includes('scripted error'));
  assert.ok(!JSON.stringify(j).includes('scripted error'));
});

test('permission modes: auto-read runs read-only tools without asking but holds side effects; plan refuses tools', async () => {
  let n = 0;
  ai.setResponder((req) => {
    const last = req.messages.at(-1)!;
    if (last.role === 'tool')
      return n++ === 0 ? { tool_calls: [{ name: 'kv__put', arguments: { key: 'ar', value: 2 } }] } : { content: 'done' };
    return { tool_calls: [{ name: 'calc', arguments: { expression: '1+1' } }] };
  });
  const cap = { allowed_tools: ['calc', 'kv.put'], permission_mode: 'auto-read', egress_allowlist: ['kv:*'] };
  const tm = await team(api, 'sequential', [{ role: 'autoread', cap }]);
  const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'x' });
  await t.modules.teams.teams.settled(run.run_id);
  const s = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`);
  assert.equal(s.state, 'waiting');
  assert.equal(s.pending_approvals.length, 1, 'calc did not ask; kv.put does');
  assert.equal(s.pending_approvals[0].kind, 'tool_call');
  assert.match(s.pending_approvals[0].step_id, /tool\/1\.0$/);

  ai.setResponder(() => ({ tool_calls: [{ name: 'calc', arguments: { expression: '1+1' } }] }));
  const plan = await team(api, 'sequential', [{ role: 'planner', cap: { allowed_tools: ['calc'], permission_mode: 'plan' } }]);
  const r2 = await ok(api, 'POST', `${T}/crews/${plan.crew}/runs`, { input: 'x' });
  await t.modules.teams.teams.settled(r2.run_id);
  const s2 = await ok(api, 'GET', `${T}/crews/${plan.crew}/runs/${r2.run_id}`);
  assert.equal(s2.state, 'refused');
  assert.equal(s2.error.reason, 'tool_forbidden_by_mode');
});

test('bad stages are refused when the formation is authored', async () => {
  const bad = await t.request('POST', `${T}/formations`, {
    token: t.adminKey,
    body: { name: 'bad', pre: [{ kind: 'gate', config: { rules: [{ name: 'r', expr: 'input ==' }] } }] },
  });
  assert.equal(bad.status, 400, bad.text);
  assert.equal(bad.body.error, 'invalid_request');
  const unknownSkill = await t.request('POST', `${T}/formations`, {
    token: t.adminKey,
    body: { name: 'bad2', pre: [{ kind: 'skill', config: { skill: 'skill:nope' } }] },
  });
  assert.equal(unknownSkill.status, 400);
  assert.equal(unknownSkill.body.details.reason, 'unknown_skill');
});

test('quorum with named approvers: others are refused, the named one releases the run', async () => {
  const p = await ok(api, 'POST', `${A}/principals`, { kind: 'service', name: 'named-approver', roles: ['operator'] });
  const k = await ok(api, 'POST', `${A}/api-keys`, { owner_id: p.id, name: 'named-key' });
  ai.setResponder((req) => ({ content: `agent saw: ${lastUser(req)}` }));
  const tm = await team(api, 'sequential', [{ role: 'named-solo' }], {
    post: [{ kind: 'human_approval', config: { rule: 'quorum', quorum: 1, approvers: [p.id], timeout_ms: 3_600_000 } }],
  });
  const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'x' });
  await t.modules.teams.teams.settled(run.run_id);
  const s = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`);
  assert.deepEqual(s.pending_approvals[0].approvers, [p.id]);
  const path = `${T}/crews/${tm.crew}/runs/${run.run_id}/approvals/${encodeURIComponent(s.pending_approvals[0].step_id)}`;
  const other = await t.request('POST', path, { token: t.adminKey, body: { decision: 'approve' } });
  assert.equal(other.status, 403);
  assert.equal(other.body.details.reason, 'not_an_approver');
  const unknownStep = await t.request('POST', `${T}/crews/${tm.crew}/runs/${run.run_id}/approvals/nope`, {
    token: k.secret,
    body: { decision: 'approve' },
  });
  assert.equal(unknownStep.status, 404);
  const yes = await t.request('POST', path, { token: k.secret, body: { decision: 'approve' } });
  assert.equal(yes.status, 200, yes.text);
  await t.modules.teams.teams.settled(run.run_id);
  assert.equal((await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`)).state, 'completed');
});

test("a seated tool stage is authored once its billet exists, and calls the tool with that seat's authority", async () => {
  const cap = { allowed_tools: ['kv.put'], permission_mode: 'auto', egress_allowlist: ['kv:*'], data_grant_ids: ['kv:*'] };
  const f = await ok(api, 'POST', `${T}/formations`, { name: 'seated-stage', coordination_policy: 'sequential' });
  const path = `${T}/formations/${f.formation_id}`;
  const stage = (seat: string, tool: string) => [{ kind: 'tool', seat, config: { tool, args: { key: `seated-${tool}`, value: 1 } } }];
  // A seat that does not exist (no billet yet) is named as such.
  const early = await t.request('PATCH', path, { token: t.adminKey, body: { pre: stage('bil_missing', 'kv.put') } });
  assert.equal(early.status, 400, early.text);
  assert.match(early.body.message, /unknown seat bil_missing/);
  const b = await ok(api, 'POST', `${path}/billets`, { role_label: 'writer', required_skills: [], authority_cap: cap });
  // The billet exists: a stage seated on it compiles (the check knows the formation's billets).
  await ok(api, 'PATCH', path, { pre: stage(b.billet_id, 'kv.put') });
  const crew = await ok(api, 'POST', `${T}/crews`, {
    formation_id: f.formation_id,
    assignments: { [b.billet_id]: await agent(api, 'writer', cap) },
  });
  const run = await ok(api, 'POST', `${T}/crews/${crew.crew_id}/runs`, { input: 'x' });
  await t.modules.teams.teams.settled(run.run_id);
  const done = await ok(api, 'GET', `${T}/crews/${crew.crew_id}/runs/${run.run_id}`);
  assert.equal(done.state, 'completed', JSON.stringify(done.error));
  assert.ok(await t.row('SELECT 1 AS x FROM tool_kv WHERE key = ?', ['seated-kv.put']), "written with the seat's grant");
  // A tool outside the seat's grant is refused at run time (the seat's authority judges the stage's call).
  await ok(api, 'PATCH', path, { pre: stage(b.billet_id, 'kv.get') });
  const crew2 = await ok(api, 'POST', `${T}/crews`, {
    formation_id: f.formation_id,
    assignments: { [b.billet_id]: await agent(api, 'writer2', cap) },
  });
  const run2 = await ok(api, 'POST', `${T}/crews/${crew2.crew_id}/runs`, { input: 'x' });
  await t.modules.teams.teams.settled(run2.run_id);
  const refused = await ok(api, 'GET', `${T}/crews/${crew2.crew_id}/runs/${run2.run_id}`);
  assert.equal(refused.state, 'refused');
  assert.equal(refused.error.reason, 'tool_not_granted');
  // The billet a stage is seated on is not removed from under it (the formation would no longer compile).
  const rm = await t.request('DELETE', `${path}/billets/${b.billet_id}`, { token: t.adminKey });
  assert.equal(rm.status, 409, rm.text);
  assert.equal(rm.body.details.reason, 'billet_seats_stage');
  assert.deepEqual(rm.body.details.stages, ['pre:0']);
  await ok(api, 'PATCH', path, { pre: null });
  const version = (await ok(api, 'DELETE', `${path}/billets/${b.billet_id}`)).version;
  assert.ok(version > 0, 'removed once no stage names it');
});
