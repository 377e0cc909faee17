/**
 * Crew runs in process: every coordination policy end to end against a real
 * HTTP server speaking Chat Completions, tool calls, and every refusal.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { verifyJournal } from '../../../core/journal/verify.ts';
import type { InProcess } from '../../helpers/inproc.ts';
import { lastUser, type FakeOpenAI } from '../../fixtures/openai-server.ts';
import { A, T, ok, roleOf, team, type Api, crewFixture } from '../../helpers/teams.ts';

let t: InProcess;
let ai: FakeOpenAI;
let api: Api;
before(async () => {
  ({ t, ai, api } = await crewFixture({ clearance: 2, topology: { site: 'hq' } }));
});
after(async () => {
  await t.close();
  await ai.close();
});

async function run(crew: string, input: unknown, expect = [201]): Promise<any> {
  const r = await ok(api, 'POST', `${T}/crews/${crew}/runs`, { input }, expect);
  if (r.run_id) await t.modules.teams.teams.settled(r.run_id);
  return r;
}
async function status(crew: string, runId: string): Promise<any> {
  await t.modules.teams.teams.settled(runId);
  return ok(api, 'GET', `${T}/crews/${crew}/runs/${runId}`);
}
const kinds = async (runId: string) => (await t.modules.runs.runs.readJournal(runId)).map((r) => r.kind);

test('sequential: a pipeline, each seat sees the previous answer', async () => {
  ai.setResponder((req) => ({ content: `${roleOf(req)} says: ${lastUser(req).slice(-40)}` }));
  const tm = await team(api, 'sequential', [{ role: 'writer' }, { role: 'editor' }]);
  const before = ai.requests.length;
  const r = await run(tm.crew, 'write a poem');
  const s = await status(tm.crew, r.run_id);
  assert.equal(s.state, 'completed', JSON.stringify(s.error));
  assert.match(String(s.output), /^editor says: .*writer says/);
  assert.equal(ai.requests.length - before, 2);
  assert.equal(s.requester.startsWith('usr_'), true);
  const k = await kinds(r.run_id);
  assert.equal(k[0], 'run_requested');
  assert.ok(k.includes('run_started') && k.at(-1) === 'run_finished', k.join(','));
});

test('parallel: fan-out and join', async () => {
  ai.setResponder((req) => ({ content: `from ${roleOf(req)}` }));
  const tm = await team(api, 'parallel', [{ role: 'a1' }, { role: 'a2' }, { role: 'a3' }]);
  const r = await run(tm.crew, 'go');
  const s = await status(tm.crew, r.run_id);
  assert.equal(s.state, 'completed', JSON.stringify(s.error));
  const text = JSON.stringify(s.output);
  for (const x of ['from a1', 'from a2', 'from a3']) assert.ok(text.includes(x), text);
});

test('consensus: majority wins; a tie is a refusal', async () => {
  ai.setResponder((req) => ({ content: roleOf(req) === 'c3' ? 'No' : 'Yes' }));
  const tm = await team(api, 'consensus', [{ role: 'c1' }, { role: 'c2' }, { role: 'c3' }]);
  const r = await run(tm.crew, 'is it?');
  const s = await status(tm.crew, r.run_id);
  assert.equal(s.state, 'completed', JSON.stringify(s.error));
  assert.match(JSON.stringify(s.output), /yes/i);

  ai.setResponder((req) => ({ content: roleOf(req) === 't1' ? 'left' : 'right' }));
  const tie = await team(api, 'consensus', [{ role: 't1' }, { role: 't2' }]);
  const r2 = await run(tie.crew, 'which way?');
  const s2 = await status(tie.crew, r2.run_id);
  assert.equal(s2.state, 'refused');
  assert.match(String(s2.error.reason), /consensus|tie|no_majority/);
});

test('manager-delegates: the manager routes to one report, the choice recorded', async () => {
  ai.setResponder((req) => {
    const role = roleOf(req);
    if (role === 'boss') {
      const u = lastUser(req);
      // Delegation prompt: answer with the billet id of the researcher when asked to choose.
      const m = /(blt_[0-9a-f]{20})[^\n]*researcher/i.exec(u) ?? /researcher[^\n]*?(blt_[0-9a-f]{20})/i.exec(u);
      return { content: m ? m[1]! : `boss summary: ${u.slice(-30)}` };
    }
    return { content: `${role} did the work` };
  });
  const tm = await team(api, 'manager-delegates', [
    { role: 'boss' },
    { role: 'researcher', reports_to: 'boss' },
    { role: 'coder', reports_to: 'boss' },
  ]);
  const r = await run(tm.crew, 'find facts');
  const s = await status(tm.crew, r.run_id);
  assert.equal(s.state, 'completed', JSON.stringify(s.error) + JSON.stringify(ai.requests.slice(-3).map((x) => lastUser(x.body))));
  const decision = (await t.modules.runs.runs.readJournal(r.run_id)).find(
    (x) => x.kind === 'decision' && (x.data as any)?.decision === 'delegate',
  );
  assert.equal((decision!.data as any).choice, tm.billets['researcher']);
  const runCalls = ai.requests.map((x) => roleOf(x.body));
  assert.ok(runCalls.includes('researcher'));
  assert.ok(!runCalls.includes('coder'), 'the report not chosen is never called');
  assert.match(String(s.output), /^boss summary/);
});

test('an agent calls a granted tool (calc) and answers with its result', async () => {
  ai.setResponder((req) => {
    const last = req.messages.at(-1)!;
    if (last.role === 'tool') return { content: `the answer is ${JSON.parse(last.content!).value}` };
    return { tool_calls: [{ name: 'calc', arguments: { expression: '6*7' } }] };
  });
  const tm = await team(api, 'sequential', [{ role: 'mathematician' }]);
  const r = await run(tm.crew, 'what is six times seven?');
  const s = await status(tm.crew, r.run_id);
  assert.equal(s.state, 'completed', JSON.stringify(s.error));
  assert.equal(s.output, 'the answer is 42');
  assert.ok(s.tokens_used > 0);
  const ledger = await ok(api, 'GET', `${T}/agents/${tm.agents['mathematician']}/budget-ledger`);
  assert.ok(ledger.spent > 0 && ledger.reserved === 0, JSON.stringify(ledger));
});

test('a tool the grant does not carry is refused, naming the tool', async () => {
  ai.setResponder(() => ({ tool_calls: [{ name: 'kv__put', arguments: { key: 'k', value: 1 } }] }));
  const cap = { allowed_tools: ['calc'], permission_mode: 'auto' };
  const tm = await team(api, 'sequential', [{ role: 'limited', cap }]);
  const r = await run(tm.crew, 'store something');
  const s = await status(tm.crew, r.run_id);
  assert.equal(s.state, 'refused');
  assert.equal(s.error.reason, 'tool_not_granted');
  const refusal = (await t.modules.runs.runs.readJournal(r.run_id)).find((x) => x.kind === 'refusal');
  assert.ok(refusal, (await kinds(r.run_id)).join(','));
  assert.equal((refusal!.data as any).reason, 'tool_not_granted');
  assert.equal((refusal!.data as any).tool, 'kv.put');
});

test('the value gate declines a call: refused, with a decision record naming the contract and rule', async () => {
  const k = await ok(api, 'POST', `${T}/contracts`, {
    name: 'short-sums',
    rules: [{ name: 'short', expr: 'tool != "calc" || size(args.expression) < 5' }],
  });
  ai.setResponder(() => ({ tool_calls: [{ name: 'calc', arguments: { expression: '1+2+3+4+5+6' } }] }));
  const cap = { allowed_tools: ['calc'], permission_mode: 'auto', governing_contract_id: k.contract_id };
  const tm = await team(api, 'sequential', [{ role: 'gated', cap }]);
  const r = await run(tm.crew, 'sum');
  const s = await status(tm.crew, r.run_id);
  assert.equal(s.state, 'refused');
  assert.equal(s.error.reason, 'gate_declined');
  const decision = (await t.modules.runs.runs.readJournal(r.run_id)).find((x) => x.kind === 'decision');
  assert.ok(decision, 'a decision record');
  assert.equal((decision!.data as any).contract, k.contract_id);
  assert.equal((decision!.data as any).rule, 'short');
});

test('ask mode: a side-effecting tool waits for approval, then runs', async () => {
  ai.setResponder((req) => {
    const last = req.messages.at(-1)!;
    if (last.role === 'tool') return { content: 'stored' };
    return { tool_calls: [{ name: 'kv__put', arguments: { key: 'greeting', value: 'hello' } }] };
  });
  const cap = { allowed_tools: ['kv.put', 'kv.get'], permission_mode: 'ask', egress_allowlist: ['kv:*'] };
  const tm = await team(api, 'sequential', [{ role: 'scribe', cap }]);
  const r = await run(tm.crew, 'remember hello');
  const s = await status(tm.crew, r.run_id);
  assert.equal(s.state, 'waiting', JSON.stringify(s));
  assert.equal(s.pending_approvals.length, 1);
  const step = s.pending_approvals[0].step_id as string;
  assert.equal(await t.row('SELECT 1 AS x FROM tool_kv WHERE key = ?', ['greeting']), undefined);
  const d = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs/${r.run_id}/approvals/${encodeURIComponent(step)}`, { decision: 'approve' });
  await t.modules.teams.teams.settled(d.run_id);
  const s2 = await status(tm.crew, r.run_id);
  assert.equal(s2.state, 'completed', JSON.stringify(s2.error));
  assert.ok(await t.row('SELECT 1 AS x FROM tool_kv WHERE key = ?', ['greeting']));
});

test('no budget ledger: the run refuses immediately, with a journal record', async () => {
  ai.setResponder(() => ({ content: 'never called' }));
  const before = ai.requests.length;
  const tm = await team(api, 'sequential', [{ role: 'broke', ledger: null }]);
  const r = await t.request('POST', `${T}/crews/${tm.crew}/runs`, { token: t.adminKey, body: { input: 'x' } });
  assert.equal(r.status, 409);
  assert.equal(r.body.details.reason, 'no_budget_ledger');
  assert.deepEqual(r.body.details.agents, [tm.agents['broke']]);
  const s = await status(tm.crew, r.body.details.run_id);
  assert.equal(s.state, 'refused');
  assert.ok((await kinds(r.body.details.run_id)).includes('refusal'));
  assert.equal(ai.requests.length, before);
});

test('placement: a seat above the cell clearance or missing topology is refused before it starts', async () => {
  const high = await team(api, 'sequential', [{ role: 'secret', cap: { allowed_tools: [], clearance_level: 5 } }]);
  const r = await t.request('POST', `${T}/crews/${high.crew}/runs`, { token: t.adminKey, body: { input: 'x' } });
  assert.equal(r.status, 409, r.text);
  assert.equal(r.body.details.reason, 'placement_unmet');
  assert.equal(r.body.details.unmet[0].constraint, 'clearance');
  // The refusal names the fix: the flags of a cell that would run it.
  assert.equal(r.body.details.unmet[0].fix, '--clearance 5');
  assert.equal(r.body.details.fix, '--clearance 5');
  assert.match(r.body.message, /clearance 5 \(this cell: 2\).*start a cell with --clearance 5/);
  const topo = await team(api, 'sequential', [{ role: 'remote' }], { topology: { site: 'moon', zone: 'a' } });
  const r2 = await t.request('POST', `${T}/crews/${topo.crew}/runs`, { token: t.adminKey, body: { input: 'x' } });
  assert.equal(r2.status, 409);
  assert.deepEqual(
    r2.body.details.unmet.map((u: { constraint: string; fix: string }) => [u.constraint, u.fix]),
    [
      ['topology.site', '--topology site=moon'],
      ['topology.zone', '--topology zone=a'],
    ],
  );
  // --topology replaces the cell's labels: the whole set it needs (this cell has site=hq).
  assert.equal(r2.body.details.fix, '--topology site=moon,zone=a');
  const run2 = await status(topo.crew, r2.body.details.run_id);
  assert.equal(run2.error.details.fix, '--topology site=moon,zone=a');
});

test('over-authority billet: rejected at authoring, naming the fields', async () => {
  const f = await ok(api, 'POST', `${T}/formations`, { name: 'strict', coordination_policy: 'manager-delegates' });
  const boss = await ok(api, 'POST', `${T}/formations/${f.formation_id}/billets`, {
    role_label: 'boss',
    required_skills: [],
    authority_cap: { allowed_tools: ['calc'], clearance_level: 1 },
  });
  const r = await t.request('POST', `${T}/formations/${f.formation_id}/billets`, {
    token: t.adminKey,
    body: {
      role_label: 'rogue',
      required_skills: [],
      reports_to: boss.billet_id,
      authority_cap: { allowed_tools: ['calc', 'kv.put'], clearance_level: 3 },
    },
  });
  assert.equal(r.status, 400);
  assert.equal(r.body.details.reason, 'over_authority');
  assert.deepEqual(r.body.details.fields, ['allowed_tools', 'clearance_level']);
  const audit = await t.request('GET', `${A}/audit?limit=20`, { token: t.adminKey });
  assert.match(JSON.stringify(audit.body), /over_authority/);
  const bad = await t.request('POST', `${T}/formations/${f.formation_id}/billets`, {
    token: t.adminKey,
    body: { role_label: 'x', required_skills: [], reports_to: 'blt_00000000000000000000', authority_cap: {} },
  });
  assert.equal(bad.body.details.reason, 'unknown_reports_to');
});

test('graph endpoint: same hash on every call; a new billet changes it', async () => {
  const tm = await team(api, 'sequential', [{ role: 'g1' }, { role: 'g2' }]);
  const g1 = await ok(api, 'GET', `${T}/formations/${tm.formation}/graph`);
  const g2 = await ok(api, 'GET', `${T}/formations/${tm.formation}/graph`);
  assert.equal(g1.graph_hash, g2.graph_hash);
  assert.match(g1.graph_hash, /^sha256:[0-9a-f]{64}$/);
  const billet = await ok(api, 'GET', `${T}/formations/${tm.formation}/billets/${tm.billets['g1']}`);
  assert.equal(billet.role_label, 'g1');
  assert.equal(
    (await t.request('GET', `${T}/formations/${tm.formation}/billets/blt_00000000000000000000`, { token: t.adminKey })).status,
    404,
  );
  const bound = await ok(api, 'GET', `${T}/formations/${tm.formation}/graph?crew_id=${tm.crew}`);
  assert.equal(bound.crew_id, tm.crew);
  await ok(api, 'POST', `${T}/formations/${tm.formation}/billets`, { role_label: 'g3', required_skills: [], authority_cap: {} });
  const g3 = await ok(api, 'GET', `${T}/formations/${tm.formation}/graph`);
  assert.notEqual(g3.formation_hash, g1.formation_hash);
});

test('recover: a new formation version does not touch the run; a changed agent refuses it (graph_changed, both hashes)', async () => {
  ai.setResponder(() => ({ tool_calls: [{ name: 'kv__put', arguments: { key: 'x', value: 1 } }] }));
  const cap = { allowed_tools: ['kv.put'], permission_mode: 'ask', egress_allowlist: ['kv:*'] };
  const tm = await team(api, 'sequential', [{ role: 'waiter', cap }]);
  const r = await run(tm.crew, 'wait');
  const started = await status(tm.crew, r.run_id);
  assert.equal(started.state, 'waiting');
  const pinned = started.formation_version;
  assert.equal(typeof pinned, 'number');
  // A billet added after the run started makes a new version; the run (and its crew) keep theirs.
  await ok(api, 'POST', `${T}/formations/${tm.formation}/billets`, { role_label: 'late', required_skills: [], authority_cap: {} });
  const again = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs/${r.run_id}/recover`);
  assert.equal(again.formation_version, pinned);
  const resumed = await status(tm.crew, r.run_id);
  assert.equal(resumed.state, 'waiting', JSON.stringify(resumed.error));
  // A change of the bound agent changes the graph the run pinned: it cannot resume.
  await ok(api, 'PATCH', `${T}/agents/${tm.agents['waiter']}`, { system_prompt: 'ROLE:waiter, now different' });
  const rec = await t.request('POST', `${T}/crews/${tm.crew}/runs/${r.run_id}/recover`, { token: t.adminKey });
  assert.equal(rec.status, 409, rec.text);
  assert.equal(rec.body.details.reason, 'graph_changed');
  assert.equal(rec.body.details.expected_graph_hash, started.graph_hash);
  assert.match(rec.body.details.actual_graph_hash, /^sha256:[0-9a-f]{64}$/);
  assert.notEqual(rec.body.details.actual_graph_hash, started.graph_hash);
  const s = await status(tm.crew, r.run_id);
  assert.equal(s.state, 'refused');
  assert.equal(s.error.reason, 'graph_changed');
  assert.equal(s.error.details.expected_graph_hash, started.graph_hash);
});

test('runs still in flight after their time budget are flagged for investigation', async () => {
  ai.setResponder(() => ({ tool_calls: [{ name: 'kv__put', arguments: { key: 'y', value: 1 } }] }));
  const cap = { allowed_tools: ['kv.put'], permission_mode: 'ask', egress_allowlist: ['kv:*'] };
  const tm = await team(api, 'sequential', [{ role: 'slow', cap }]);
  const r = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'x', max_duration_ms: 1000 });
  await t.modules.teams.teams.settled(r.run_id);
  assert.equal((await status(tm.crew, r.run_id)).investigate, null);
  t.clock.advance(5000);
  // A GET writes nothing: the flag comes from the periodic sweep (run here at once).
  assert.equal((await status(tm.crew, r.run_id)).investigate, null);
  await t.modules.teams.teams.sweepNow();
  const s = await status(tm.crew, r.run_id);
  assert.equal(s.investigate.reason, 'time_budget');
  const list = await ok(api, 'GET', `${T}/runs?investigate=true`);
  assert.ok(list.runs.some((x: { run_id: string }) => x.run_id === r.run_id));
  assert.ok((await kinds(r.run_id)).includes('investigate'));
});

test('the journal is served by the shared jobs routes for crew runs too', async () => {
  const list = await ok(api, 'GET', `${T}/runs?limit=1`);
  const runId = list.runs[0].run_id;
  const j = await t.request('GET', `${A}/jobs/runs/${runId}/journal`, { token: t.adminKey });
  assert.equal(j.status, 200, j.text);
});

test('a crew run journal verifies against the cell key; tampering with any field is detected', async () => {
  ai.setResponder((req) => ({ content: `${roleOf(req)} ok` }));
  const tm = await team(api, 'sequential', [{ role: 'v1' }, { role: 'v2' }]);
  const r = await run(tm.crew, 'verify me');
  assert.equal((await status(tm.crew, r.run_id)).state, 'completed');
  const records = await t.modules.runs.runs.readJournal(r.run_id);
  const keys = new Map(t.modules.iam.iam.identityKeys().map((k) => [k.kid, k.jwk]));
  assert.deepEqual(await verifyJournal(records, (kid) => keys.get(kid)), { ok: true });
  for (const field of ['output_hash', 'step_id', 'at'] as const) {
    const copy = records.map((x) => ({ ...x }));
    const target = copy[2]!;
    (target as any)[field] = field === 'at' ? target.at + 1 : field === 'output_hash' ? 'sha256:' + '1'.repeat(64) : target.step_id + 'x';
    const v = await verifyJournal(copy, (kid) => keys.get(kid));
    assert.equal(v.ok, false, field);
  }
  const dropped = records.filter((_, i) => i !== 1);
  assert.equal((await verifyJournal(dropped, (kid) => keys.get(kid))).ok, false);
});

test('a crew run is cancelled through the shared jobs route', async () => {
  ai.setResponder(() => ({ tool_calls: [{ name: 'kv__put', arguments: { key: 'c', value: 1 } }] }));
  const cap = { allowed_tools: ['kv.put'], permission_mode: 'ask', egress_allowlist: ['kv:*'] };
  const tm = await team(api, 'sequential', [{ role: 'cancelme', cap }]);
  const r = await run(tm.crew, 'x');
  assert.equal((await status(tm.crew, r.run_id)).state, 'waiting');
  const c = await t.request('POST', `${A}/jobs/runs/${r.run_id}/cancel`, { token: t.adminKey });
  assert.ok(c.status < 300, c.text);
  const s = await status(tm.crew, r.run_id);
  assert.equal(s.state, 'cancelled');
  assert.deepEqual(s.pending_approvals, []);
});

test('exportCrew: crew, graph, agents, blueprints, skills, contracts and grants', async () => {
  await ok(api, 'POST', `${T}/skills`, { name: 'exp-skill', skill_kind: 'prompt', definition: { prompt: 'be brief' } });
  const k = await ok(api, 'POST', `${T}/contracts`, { name: 'exp-contract', rules: [{ name: 'any', expr: 'true' }] });
  const bp = await ok(api, 'POST', `${T}/blueprints`, {
    name: 'exp-bp',
    role_label: 'Exporter',
    system_prompt_ref: 'skill:exp-skill',
    required_skills: ['skill:exp-skill'],
    authority_template: { allowed_tools: ['calc'], governing_contract_id: k.contract_id },
  });
  const ag = await ok(api, 'POST', `${T}/agents`, { source: 'blueprint', blueprint_id: bp.blueprint_id });
  const f = await ok(api, 'POST', `${T}/formations`, { name: 'exp' });
  const b = await ok(api, 'POST', `${T}/formations/${f.formation_id}/billets`, {
    role_label: 'Exporter',
    required_skills: ['skill:exp-skill'],
    authority_cap: { allowed_tools: ['calc', 'clock.now'] },
  });
  const crew = await ok(api, 'POST', `${T}/crews`, { formation_id: f.formation_id, assignments: { [b.billet_id]: ag.agent_id } });
  const e = await t.modules.teams.teams.exportCrew(crew.crew_id);
  assert.equal(e.graph_hash, crew.graph_hash);
  assert.deepEqual(
    e.agents.map((a) => a.agent_id),
    [ag.agent_id],
  );
  assert.deepEqual(
    e.blueprints.map((x) => x.blueprint_id),
    [bp.blueprint_id],
  );
  assert.deepEqual(
    e.skills.map((x) => x.name),
    ['exp-skill'],
  );
  assert.deepEqual(
    e.contracts.map((x) => x.contract_id),
    [k.contract_id],
  );
  assert.deepEqual((e.grants[b.billet_id] as { allowed_tools: string[] }).allowed_tools, ['calc'], 'agent authority ∩ billet cap');
});

test('an archived agent cannot act: the run is refused before it starts', async () => {
  ai.setResponder(() => ({ content: 'never' }));
  const tm = await team(api, 'sequential', [{ role: 'retired' }]);
  const arch = await t.request('POST', `${A}/principals/${tm.agents['retired']}/archive`, { token: t.adminKey });
  assert.ok(arch.status < 300, arch.text);
  const r = await t.request('POST', `${T}/crews/${tm.crew}/runs`, { token: t.adminKey, body: { input: 'x' } });
  assert.equal(r.status, 409, r.text);
  assert.equal(r.body.details.reason, 'agent_inactive');
  assert.ok((await kinds(r.body.details.run_id)).includes('refusal'));
});

test('a run still in flight beyond its cost budget is flagged cost_budget', async () => {
  ai.setResponder((req) =>
    req.messages.at(-1)!.role === 'tool'
      ? { tool_calls: [{ name: 'kv__put', arguments: { key: 'cost', value: 1 } }] }
      : { tool_calls: [{ name: 'calc', arguments: { expression: '1+1' } }] },
  );
  const cap = { allowed_tools: ['calc', 'kv.put'], permission_mode: 'auto-read', egress_allowlist: ['kv:*'] };
  const tm = await team(api, 'sequential', [{ role: 'spender', cap }]);
  const r = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'x', max_tokens: 5 });
  await t.modules.teams.teams.settled(r.run_id);
  await t.modules.teams.teams.sweepNow();
  const s = await status(tm.crew, r.run_id);
  assert.equal(s.state, 'waiting');
  assert.ok(s.tokens_used > 5);
  assert.equal(s.investigate.reason, 'cost_budget');
});
