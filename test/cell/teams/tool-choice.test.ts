/**
 * A billet's tool_choice (issue #39): authored on the billet (checked against its cap, 400
 * invalid_step_policy naming the field), part of the graph, sent to an OpenAI-compatible provider as the
 * protocol's `tool_choice` on the agent step's first call only, and a provider that ignores it fails the
 * step rather than letting the crew drift.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { FakeOpenAI } from '../../fixtures/openai-server.ts';
import type { InProcess } from '../../helpers/inproc.ts';
import { T, agent, ok, type Api, crewFixture } from '../../helpers/teams.ts';
import { until } from '../../helpers/until.ts';

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

const CAP = { allowed_tools: ['clock.now', 'calc'], permission_mode: 'auto', clearance_level: 0 };

async function crewWith(extra: Record<string, unknown>): Promise<{ crew: string; formation: string; billet: string }> {
  const f = await ok(api, 'POST', `${T}/formations`, { name: `choice-${Math.random().toString(16).slice(2, 8)}` });
  const b = await ok(api, 'POST', `${T}/formations/${f.formation_id}/billets`, {
    role_label: 'worker',
    required_skills: [],
    authority_cap: CAP,
    ...extra,
  });
  const a = await agent(api, 'worker', CAP);
  const c = await ok(api, 'POST', `${T}/crews`, { formation_id: f.formation_id, assignments: { [b.billet_id]: a } });
  return { crew: c.crew_id, formation: f.formation_id, billet: b.billet_id };
}

async function finished(crew: string, runId: string): Promise<any> {
  await until(`run ${runId} to end`, async () => {
    const state = (await t.modules.runs.runs.getRun(runId))?.state ?? '';
    return ['completed', 'failed', 'refused', 'cancelled'].includes(state);
  });
  return ok(api, 'GET', `${T}/crews/${crew}/runs/${runId}`);
}

test('the provider is told to call the named tool on the first call only, in the protocol shape', async () => {
  const tm = await crewWith({ tool_choice: { name: 'clock.now' } });
  const from = ai.requests.length;
  ai.setResponder((_req, i) => (i === from ? { tool_calls: [{ id: 'c1', name: 'clock__now', arguments: {} }] } : { content: 'done' }));
  const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'what time is it' });
  const r = await finished(tm.crew, run.run_id);
  assert.equal(r.state, 'completed', JSON.stringify(r.error));
  const sent = ai.requests.slice(from).map((x) => x.body);
  assert.equal(sent.length, 2);
  assert.deepEqual(sent[0]!['tool_choice'], { type: 'function', function: { name: 'clock__now' } });
  assert.equal('tool_choice' in sent[1]!, false, 'the second round is auto');
  const g = await ok(api, 'GET', `${T}/formations/${tm.formation}/graph`);
  assert.deepEqual(g.graph.nodes[0].config.tool_choice, { name: 'clock.now' });
});

test('a provider that answers in text under required fails the step (model_error, tool_choice_unmet)', async () => {
  const tm = await crewWith({ tool_choice: 'required' });
  const from = ai.requests.length;
  ai.setResponder(() => ({ content: 'I would rather not' }));
  const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'go' });
  const r = await finished(tm.crew, run.run_id);
  assert.equal(r.state, 'failed');
  assert.equal(r.error.reason, 'model_error');
  assert.equal(r.error.details.problem, 'tool_choice_unmet');
  assert.equal(ai.requests[from]!.body['tool_choice'], 'required');
});

test('a choice the billet cannot honour is refused at authoring, naming the field; PATCH sets and removes it', async () => {
  const f = await ok(api, 'POST', `${T}/formations`, { name: 'bad-choice' });
  const post = (extra: Record<string, unknown>) =>
    t.request('POST', `${T}/formations/${f.formation_id}/billets`, {
      token: t.adminKey,
      body: { role_label: 'x', required_skills: [], authority_cap: CAP, ...extra },
    });
  for (const body of [
    { tool_choice: { name: 'kv.put' } },
    { tool_choice: 'required', authority_cap: { ...CAP, allowed_tools: [] } },
    { tool_choice: 'required', authority_cap: { ...CAP, permission_mode: 'plan' } },
  ]) {
    const r = await post(body);
    assert.equal(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
    assert.equal(r.body.details.reason, 'invalid_step_policy');
    assert.equal(r.body.details.field, 'tool_choice');
  }
  const shape = await post({ tool_choice: 'sometimes' });
  assert.equal(shape.status, 400);

  const tm = await crewWith({});
  const path = `${T}/formations/${tm.formation}/billets/${tm.billet}`;
  const set = await ok(api, 'PATCH', path, { tool_choice: { name: 'calc' } });
  assert.deepEqual(set.tool_choice, { name: 'calc' });
  // Narrowing the cap below the choice is refused; so is a choice the cap does not cover.
  const narrow = await t.request('PATCH', path, { token: t.adminKey, body: { authority_cap: { ...CAP, allowed_tools: ['clock.now'] } } });
  assert.equal(narrow.status, 400, narrow.text);
  assert.equal(narrow.body.details.field, 'tool_choice');
  const auto = await ok(api, 'PATCH', path, { tool_choice: 'auto' });
  assert.equal(auto.tool_choice, undefined, 'auto is the absence of a choice');
  assert.ok(auto.formation_version > set.formation_version);
  const g = await ok(api, 'GET', `${T}/formations/${tm.formation}/graph`);
  assert.equal(g.graph.nodes[0].config.tool_choice, undefined);
  await ok(api, 'PATCH', path, { tool_choice: 'none' });
  const removed = await ok(api, 'PATCH', path, { tool_choice: null });
  assert.equal(removed.tool_choice, undefined);
});
