/**
 * Formation versions over HTTP: every change of a formation or a billet makes
 * a new version and old versions stay as they were; crews pin a version and
 * move only by an explicit upgrade that recompiles them; runs record the
 * version and keep the graph they executed; crews, formations and billets
 * are changed and deleted with their refusals (in use, cycles, authority).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { FakeOpenAI } from '../../fixtures/openai-server.ts';
import { actor } from '../../helpers/actors.ts';
import type { InProcess } from '../../helpers/inproc.ts';
import { A, T, agent, ok, team, type Api, crewFixture } from '../../helpers/teams.ts';

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

const req = (method: string, path: string, body?: unknown, token = t.adminKey) =>
  t.request(method, path, { token, ...(body !== undefined ? { body } : {}) });
const CAP = { allowed_tools: ['calc'], permission_mode: 'auto' };

test('every change makes a version; old versions stay readable and unchanged', async () => {
  const f = await ok(api, 'POST', `${T}/formations`, { name: 'v-team', coordination_policy: 'sequential' });
  assert.equal(f.version, 1);
  const b1 = await ok(api, 'POST', `${T}/formations/${f.formation_id}/billets`, {
    role_label: 'writer',
    required_skills: [],
    authority_cap: CAP,
  });
  assert.equal(b1.formation_version, 2);
  const b2 = await ok(api, 'POST', `${T}/formations/${f.formation_id}/billets`, {
    role_label: 'editor',
    required_skills: [],
    authority_cap: CAP,
  });
  assert.equal(b2.formation_version, 3);
  const v3 = await ok(api, 'GET', `${T}/formations/${f.formation_id}/versions/3`);

  const patched = await ok(api, 'PATCH', `${T}/formations/${f.formation_id}`, { prompt: 'be brief', topology: { site: 'any' } });
  assert.equal(patched.version, 4);
  assert.equal(patched.prompt, 'be brief');
  const same = await ok(api, 'PATCH', `${T}/formations/${f.formation_id}`, { prompt: 'be brief' });
  assert.equal(same.version, 4, 'a change that changes nothing makes no version');
  const cleared = await ok(api, 'PATCH', `${T}/formations/${f.formation_id}`, { topology: null });
  assert.equal(cleared.version, 5);
  assert.equal(cleared.topology, undefined, 'null removes an optional field');

  const b1v = await ok(api, 'PATCH', `${T}/formations/${f.formation_id}/billets/${b1.billet_id}`, { role_label: 'author' });
  assert.equal(b1v.formation_version, 6);
  assert.equal(b1v.role_label, 'author');
  assert.equal(b1v.billet_id, b1.billet_id, 'a billet keeps its id across versions');
  const removed = await ok(api, 'DELETE', `${T}/formations/${f.formation_id}/billets/${b2.billet_id}`, undefined, [200]);
  assert.equal(removed.version, 7);

  const list = await ok(api, 'GET', `${T}/formations/${f.formation_id}/versions?limit=3&offset=2`);
  assert.equal(list.total, 7);
  assert.deepEqual(
    list.versions.map((v: { version: number; change: { kind: string } }) => [v.version, v.change.kind]),
    [
      [3, 'billet_added'],
      [4, 'updated'],
      [5, 'updated'],
    ],
  );
  const all = await ok(api, 'GET', `${T}/formations/${f.formation_id}/versions`);
  assert.deepEqual(
    all.versions.map((v: { change: { kind: string; billet_id: string | null } }) => v.change),
    [
      { kind: 'created', billet_id: null },
      { kind: 'billet_added', billet_id: b1.billet_id },
      { kind: 'billet_added', billet_id: b2.billet_id },
      { kind: 'updated', billet_id: null },
      { kind: 'updated', billet_id: null },
      { kind: 'billet_updated', billet_id: b1.billet_id },
      { kind: 'billet_removed', billet_id: b2.billet_id },
    ],
  );
  // Version 3 reads exactly as it did before the later changes.
  assert.deepEqual(await ok(api, 'GET', `${T}/formations/${f.formation_id}/versions/3`), v3);
  assert.deepEqual(
    v3.billets.map((b: { role_label: string }) => b.role_label),
    ['writer', 'editor'],
  );
  assert.match(v3.formation_hash, /^sha256:/);
  const v7 = await ok(api, 'GET', `${T}/formations/${f.formation_id}/versions/7`);
  assert.deepEqual(
    v7.billets.map((b: { role_label: string }) => b.role_label),
    ['author'],
  );
  assert.equal(v7.prompt, 'be brief');
  assert.equal((await ok(api, 'GET', `${T}/formations/${f.formation_id}/versions/1`)).formation_hash, null, 'no billets: no hash');
  // The latest billets; a removed billet is gone from them.
  assert.equal((await ok(api, 'GET', `${T}/formations/${f.formation_id}/billets`)).billets.length, 1);
  assert.equal((await req('GET', `${T}/formations/${f.formation_id}/billets/${b2.billet_id}`)).status, 404);
  // The graph of an old version, on request.
  const g3 = await ok(api, 'GET', `${T}/formations/${f.formation_id}/graph?version=3`);
  assert.equal(g3.formation_version, 3);
  assert.equal(g3.formation_hash, v3.formation_hash);
  for (const bad of [`${T}/formations/${f.formation_id}/versions/99`, `${T}/formations/frm_00000000000000000000/versions`]) {
    assert.equal((await req('GET', bad)).status, 404, bad);
  }
  assert.equal((await req('GET', `${T}/formations/${f.formation_id}/versions/0`)).status, 400);
  assert.equal((await req('GET', `${T}/formations/${f.formation_id}/graph?version=99`)).status, 404);
});

test('billet changes keep the authoring rules: manager cap, reports, cycles, immutable fields', async () => {
  const f = await ok(api, 'POST', `${T}/formations`, { name: 'rules', coordination_policy: 'manager-delegates' });
  const add = (role: string, cap: unknown, reports_to?: string) =>
    ok(api, 'POST', `${T}/formations/${f.formation_id}/billets`, {
      role_label: role,
      required_skills: [],
      authority_cap: cap,
      ...(reports_to ? { reports_to } : {}),
    });
  const boss = await add('boss', { allowed_tools: ['calc', 'clock.now'], clearance_level: 2 });
  const mid = await add('mid', { allowed_tools: ['calc', 'clock.now'], clearance_level: 1 }, boss.billet_id);
  const low = await add('low', { allowed_tools: ['calc'] }, mid.billet_id);
  const path = (b: string) => `${T}/formations/${f.formation_id}/billets/${b}`;
  const before = (await ok(api, 'GET', `${T}/formations/${f.formation_id}`)).version;

  let r = await req('PATCH', path(mid.billet_id), { authority_cap: { allowed_tools: ['calc', 'kv.put'], clearance_level: 1 } });
  assert.equal(r.status, 400, r.text);
  assert.equal(r.body.details.reason, 'over_authority');
  assert.deepEqual(r.body.details.fields, ['allowed_tools']);
  r = await req('PATCH', path(mid.billet_id), { authority_cap: { allowed_tools: ['clock.now'] } });
  assert.equal(r.status, 400, 'the new cap must cover the caps of the billets reporting to it');
  assert.equal(r.body.details.reason, 'over_authority');
  assert.deepEqual(r.body.details.reports, [low.billet_id]);
  r = await req('PATCH', path(boss.billet_id), { reports_to: low.billet_id });
  assert.equal(r.status, 400);
  assert.equal(r.body.details.reason, 'reports_to_cycle');
  assert.deepEqual(r.body.details.cycle, [boss.billet_id, low.billet_id, mid.billet_id, boss.billet_id]);
  r = await req('PATCH', path(mid.billet_id), { reports_to: mid.billet_id });
  assert.equal(r.body.details.reason, 'unknown_reports_to');
  r = await req('PATCH', path(mid.billet_id), { position: 9 });
  assert.equal(r.status, 400);
  assert.equal(r.body.details.reason, 'immutable_field');
  assert.equal(r.body.details.field, 'position');
  r = await req('PATCH', path(mid.billet_id), { required_skills: ['skill:nope'] });
  assert.equal(r.body.details.reason, 'unknown_skill');
  r = await req('DELETE', path(mid.billet_id));
  assert.equal(r.status, 409);
  assert.equal(r.body.details.reason, 'billet_has_reports');
  assert.deepEqual(r.body.details.billets, [low.billet_id]);
  assert.equal((await req('PATCH', `${T}/formations/${f.formation_id}/billets/blt_00000000000000000000`, { role_label: 'x' })).status, 404);
  const other = await ok(api, 'POST', `${T}/formations`, { name: 'other' });
  assert.equal((await req('PATCH', `${T}/formations/${other.formation_id}/billets/${mid.billet_id}`, { role_label: 'x' })).status, 404);
  assert.equal((await ok(api, 'GET', `${T}/formations/${f.formation_id}`)).version, before, 'no refusal wrote a version');
  const audit = await ok(api, 'GET', `${A}/audit?limit=50`);
  assert.match(JSON.stringify(audit), /billet\.update.*over_authority|over_authority.*billet\.update/);

  // Re-parenting within the rules, then removing a leaf.
  const moved = await ok(api, 'PATCH', path(low.billet_id), { reports_to: boss.billet_id });
  assert.equal(moved.reports_to, boss.billet_id);
  await ok(api, 'DELETE', path(low.billet_id), undefined, [200]);
});

test('a caller changes a billet only within its own authority (403 wider_than_caller, nothing written)', async () => {
  const f = await ok(api, 'POST', `${T}/formations`, { name: 'narrow' });
  const b = await ok(api, 'POST', `${T}/formations/${f.formation_id}/billets`, {
    role_label: 'r',
    required_skills: [],
    authority_cap: { allowed_tools: ['calc'] },
  });
  const narrow = await actor(t, { permissions: ['agent_teams', 'catalog'], authority: { allowed_tools: ['calc'] } });
  const path = `${T}/formations/${f.formation_id}/billets/${b.billet_id}`;
  const r = await req('PATCH', path, { authority_cap: { allowed_tools: ['calc', 'kv.put'] } }, narrow.key);
  assert.equal(r.status, 403, r.text);
  assert.equal(r.body.details.reason, 'wider_than_caller');
  assert.equal((await ok(api, 'GET', `${T}/formations/${f.formation_id}`)).version, 2);
  const fine = await req('PATCH', path, { role_label: 'renamed' }, narrow.key);
  assert.equal(fine.status, 200, fine.text);
  const reader = await actor(t, { permissions: ['agent_teams.read'] });
  assert.equal((await req('PATCH', path, { role_label: 'x' }, reader.key)).status, 403);
  assert.equal((await req('DELETE', path, undefined, reader.key)).status, 403);
  assert.equal((await req('PATCH', `${T}/formations/${f.formation_id}`, { name: 'x' }, reader.key)).status, 403);
});

test('a crew pins its version: later versions leave it and its runs alone; the run keeps the graph it executed', async () => {
  ai.setResponder(() => ({ content: 'done' }));
  const tm = await team(api, 'sequential', [{ role: 'p1' }]);
  const crew = await ok(api, 'GET', `${T}/crews/${tm.crew}`);
  const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'go' });
  await t.modules.teams.teams.settled(run.run_id);
  assert.equal(run.formation_version, crew.formation_version);
  const g = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}/graph`);
  assert.equal(g.graph_hash, run.graph_hash);
  assert.equal(g.formation_version, crew.formation_version);
  assert.deepEqual(Object.keys(g.graph.seats), [tm.billets['p1']]);

  await ok(api, 'POST', `${T}/formations/${tm.formation}/billets`, { role_label: 'p2', required_skills: [], authority_cap: CAP });
  await ok(api, 'PATCH', `${T}/formations/${tm.formation}`, { prompt: 'new rules' });
  const still = await ok(api, 'GET', `${T}/crews/${tm.crew}`);
  assert.equal(still.formation_version, crew.formation_version);
  assert.equal(still.graph_hash, crew.graph_hash, "the crew's graph did not change");
  const run2 = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'again' });
  await t.modules.teams.teams.settled(run2.run_id);
  assert.equal(run2.graph_hash, crew.graph_hash);
  assert.equal((await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${run2.run_id}`)).state, 'completed');
  assert.deepEqual(await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}/graph`), g, 'the executed graph stays');
  assert.equal((await req('GET', `${T}/crews/crw_00000000000000000000/runs/${run.run_id}/graph`)).status, 404);
  assert.equal((await req('GET', `${T}/crews/${tm.crew}/runs/run_00000000000000000000/graph`)).status, 404);
});

test('upgrade: explicit, recompiles, names unbound seats, refuses what is not newer, does not compile, or exceeds the caller', async () => {
  ai.setResponder(() => ({ content: 'ok' }));
  const tm = await team(api, 'sequential', [{ role: 'u1', cap: CAP }]);
  const crew = await ok(api, 'GET', `${T}/crews/${tm.crew}`);
  const up = (body: unknown, token = t.adminKey) => req('POST', `${T}/crews/${tm.crew}/upgrade`, body, token);
  let r = await up({});
  assert.equal(r.status, 409, 'nothing newer');
  assert.equal(r.body.details.reason, 'version_not_newer');

  const b2 = await ok(api, 'POST', `${T}/formations/${tm.formation}/billets`, {
    role_label: 'u2',
    required_skills: [],
    authority_cap: CAP,
  });
  r = await up({});
  assert.equal(r.status, 400, 'the new billet has no agent');
  assert.equal(r.body.details.reason, 'unbound_seat');
  assert.deepEqual(r.body.details.billets, [b2.billet_id]);
  assert.equal((await ok(api, 'GET', `${T}/crews/${tm.crew}`)).formation_version, crew.formation_version, 'nothing written');

  // A preview of the upgrade: the new version's graph bound to the crew's agents plus the new one.
  const u2 = await agent(api, 'u2', CAP);
  const narrow = await actor(t, { permissions: ['agent_teams', 'catalog'], authority: { allowed_tools: [] } });
  r = await up({ assignments: { [b2.billet_id]: u2 } }, narrow.key);
  assert.equal(r.status, 403, r.text);
  assert.equal(r.body.details.reason, 'wider_than_caller');

  const done = await ok(api, 'POST', `${T}/crews/${tm.crew}/upgrade`, { assignments: { [b2.billet_id]: u2 } }, [200]);
  assert.equal(done.formation_version, crew.formation_version + 1);
  assert.notEqual(done.graph_hash, crew.graph_hash);
  assert.deepEqual(done.assignments, { [tm.billets['u1']!]: tm.agents['u1'], [b2.billet_id]: u2 });
  r = await up({ formation_version: crew.formation_version });
  assert.equal(r.status, 409, 'no downgrade');
  assert.equal(r.body.details.reason, 'version_not_newer');

  // A version that no longer compiles for the crew (manager-delegates needs one root): refused, the crew stays.
  await ok(api, 'PATCH', `${T}/formations/${tm.formation}`, { coordination_policy: 'manager-delegates' });
  r = await up({});
  assert.equal(r.status, 400, r.text);
  assert.equal(r.body.details.reason, 'root_count');
  r = await up({ formation_version: 999 });
  assert.equal(r.status, 404);
  assert.equal((await ok(api, 'GET', `${T}/crews/${tm.crew}`)).formation_version, done.formation_version);
  const audit = JSON.stringify(await ok(api, 'GET', `${A}/audit?limit=100`));
  assert.match(audit, /crew\.upgrade/);
});

test('crew PATCH: rename, rebind (recompiled, within the caller); formation and version are immutable', async () => {
  const tm = await team(api, 'sequential', [{ role: 'c1', cap: CAP }]);
  const crew = await ok(api, 'GET', `${T}/crews/${tm.crew}`);
  const renamed = await ok(api, 'PATCH', `${T}/crews/${tm.crew}`, { name: 'renamed crew' });
  assert.equal(renamed.name, 'renamed crew');
  assert.equal(renamed.graph_hash, crew.graph_hash);
  for (const field of ['formation_version', 'formation_id']) {
    const r = await req('PATCH', `${T}/crews/${tm.crew}`, { [field]: 1 });
    assert.equal(r.status, 400);
    assert.equal(r.body.details.reason, 'immutable_field');
    assert.equal(r.body.details.field, field);
  }
  const other = await agent(api, 'c1-other', CAP);
  const rebound = await ok(api, 'PATCH', `${T}/crews/${tm.crew}`, { assignments: { [tm.billets['c1']!]: other } });
  assert.equal(rebound.assignments[tm.billets['c1']!], other);
  assert.notEqual(rebound.graph_hash, crew.graph_hash);
  let r = await req('PATCH', `${T}/crews/${tm.crew}`, { assignments: { blt_00000000000000000000: other } });
  assert.equal(r.body.details.reason, 'unknown_billet');
  const narrow = await actor(t, { permissions: ['agent_teams', 'catalog'], authority: {} });
  r = await req('PATCH', `${T}/crews/${tm.crew}`, { assignments: { [tm.billets['c1']!]: tm.agents['c1'] } }, narrow.key);
  assert.equal(r.status, 403);
  assert.equal(r.body.details.reason, 'wider_than_caller');
  assert.equal((await req('PATCH', `${T}/crews/crw_00000000000000000000`, { name: 'x' })).status, 404);
});

test('crew delete: refused while a run is live or a definition names it; its past runs stay readable', async () => {
  ai.setResponder(() => ({ tool_calls: [{ name: 'kv__put', arguments: { key: 'd', value: 1 } }] }));
  const cap = { allowed_tools: ['kv.put'], permission_mode: 'ask', egress_allowlist: ['kv:*'] };
  const tm = await team(api, 'sequential', [{ role: 'd1', cap }]);
  const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'x' });
  await t.modules.teams.teams.settled(run.run_id);
  const def = await ok(api, 'POST', `${A}/jobs/definitions`, {
    name: 'nightly-d1',
    job_type: 'team',
    workspace_id: 'w1',
    cron: '0 3 * * *',
    spec: { crew_id: tm.crew },
  });
  let r = await req('DELETE', `${T}/crews/${tm.crew}`);
  assert.equal(r.status, 409, r.text);
  assert.equal(r.body.details.reason, 'in_use');
  assert.deepEqual(r.body.details.used_by.runs, [run.run_id]);
  assert.deepEqual(r.body.details.used_by.job_definitions, [def.schedule_id]);
  assert.match(r.body.message, new RegExp(run.run_id));

  // The formation is in use by the crew.
  r = await req('DELETE', `${T}/formations/${tm.formation}`);
  assert.equal(r.status, 409);
  assert.deepEqual(r.body.details.used_by, { crews: [tm.crew] });
  // So is the agent.
  r = await req('DELETE', `${T}/agents/${tm.agents['d1']}`);
  assert.equal(r.status, 409);
  assert.deepEqual(r.body.details.used_by, { crews: [tm.crew] });

  await ok(api, 'POST', `${T}/crews/${tm.crew}/runs/${run.run_id}/cancel`, undefined, [200]);
  await ok(api, 'DELETE', `${A}/jobs/definitions/${def.schedule_id}`, undefined, [200]);
  const gone = await ok(api, 'DELETE', `${T}/crews/${tm.crew}`, undefined, [200]);
  assert.equal(gone.crew_id, tm.crew);
  assert.equal((await req('GET', `${T}/crews/${tm.crew}`)).status, 404);
  assert.equal((await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`)).state, 'cancelled', 'a past run stays readable');
  assert.equal((await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}/graph`)).graph_hash, run.graph_hash);

  const f = await ok(api, 'DELETE', `${T}/formations/${tm.formation}`, undefined, [200]);
  assert.equal(f.formation_id, tm.formation);
  assert.equal((await req('GET', `${T}/formations/${tm.formation}`)).status, 404);
  assert.equal((await req('GET', `${T}/formations/${tm.formation}/versions`)).status, 404);
  assert.equal((await req('DELETE', `${T}/formations/${tm.formation}`)).status, 404);
});

test('crew run cancel: idempotent, audited, 404 for a run of another crew, 403 without agent_teams.write', async () => {
  ai.setResponder(() => ({ tool_calls: [{ name: 'kv__put', arguments: { key: 'c', value: 1 } }] }));
  const cap = { allowed_tools: ['kv.put'], permission_mode: 'ask', egress_allowlist: ['kv:*'] };
  const tm = await team(api, 'sequential', [{ role: 'cx', cap }]);
  const other = await team(api, 'sequential', [{ role: 'cy', cap }]);
  const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'x' });
  await t.modules.teams.teams.settled(run.run_id);
  assert.equal((await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`)).state, 'waiting');
  const reader = await actor(t, { permissions: ['agent_teams.read'] });
  assert.equal((await req('POST', `${T}/crews/${tm.crew}/runs/${run.run_id}/cancel`, undefined, reader.key)).status, 403);
  assert.equal((await req('POST', `${T}/crews/${other.crew}/runs/${run.run_id}/cancel`)).status, 404);
  assert.equal((await req('POST', `${T}/crews/${tm.crew}/runs/run_00000000000000000000/cancel`)).status, 404);
  assert.equal((await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`)).state, 'waiting', 'refusals changed nothing');

  const c1 = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs/${run.run_id}/cancel`, undefined, [200]);
  assert.equal(c1.state, 'cancelled');
  assert.equal(c1.error.reason, 'cancelled');
  const kinds = (await t.modules.runs.runs.readJournal(run.run_id)).map((x) => x.kind);
  const c2 = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs/${run.run_id}/cancel`, undefined, [200]);
  assert.equal(c2.state, 'cancelled');
  assert.equal(c2.updated_at, c1.updated_at, 'a second cancel changes nothing');
  assert.deepEqual(
    (await t.modules.runs.runs.readJournal(run.run_id)).map((x) => x.kind),
    kinds,
  );
  assert.equal(kinds.filter((k) => k === 'cancel_requested').length, 1);
  const audit = (await ok(api, 'GET', `${A}/audit?target=${run.run_id}`)).entries as { action: string }[];
  assert.deepEqual(
    audit.filter((e) => e.action === 'crew.run.cancel').length,
    1,
    'one audit record for the one cancel that changed the run',
  );
});

test('crew delete racing a launch: the run is refused or the delete is, never a run of a deleted crew', async () => {
  // The model answers only once the race is decided: a launched run is live while the delete decides
  // (a run that had already ended would not block the delete, and that is not the race under test).
  let gate: Promise<void> | null = null;
  let open: () => void = () => undefined;
  ai.setResponder(async () => {
    if (gate) await gate;
    return { content: 'done' };
  });
  const outcomes = new Set<string>();
  for (let i = 0; i < 8; i++) {
    const tm = await team(api, 'sequential', [{ role: `race${i}` }]);
    gate = new Promise<void>((r) => {
      open = r;
    });
    const launch = () => req('POST', `${T}/crews/${tm.crew}/runs`, { input: 'x' });
    const del = () => req('DELETE', `${T}/crews/${tm.crew}`);
    // Both orders of starting, so either may reach its transaction first.
    const [run, gone] = i % 2 === 0 ? await Promise.all([launch(), del()]) : (await Promise.all([del(), launch()])).reverse();
    outcomes.add(`${run!.status}/${gone!.status}`);
    gate = null;
    open();
    if (run!.status === 201) {
      assert.equal(gone!.status, 409, `the delete saw the run: ${gone!.text}`);
      assert.equal(gone!.body.details.reason, 'in_use');
      await t.modules.teams.teams.settled(run!.body.run_id);
    } else {
      assert.equal(run!.status, 404, `the launch found no crew: ${run!.text}`);
      assert.equal(gone!.status, 200, gone!.text);
    }
  }
  assert.ok(outcomes.size >= 1, [...outcomes].join(' '));
});
