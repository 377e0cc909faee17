/**
 * Fork and rerun of crew runs (issue #24): a fork at step k of an n-step run
 * makes exactly n-k model calls (counted at the fake provider), opens its
 * journal with a `forked` record, and its journal verifies with the cell's
 * public keys alone (the parent's records up to the fork point carried beside
 * it, as a journal export does); a replacement input reaches the step forked
 * at; a newer formation version that changed a reused step is refused naming
 * it; lineage shows both ways; bad fork points and callers are refused.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { verifyJournal } from '../../../core/journal/verify.ts';
import type { JournalRecord } from '../../../core/journal/record.ts';
import type { FakeOpenAI } from '../../fixtures/openai-server.ts';
import type { InProcess } from '../../helpers/inproc.ts';
import { A, T, ok, roleOf, team, type Api, crewFixture } from '../../helpers/teams.ts';

let t: InProcess;
let ai: FakeOpenAI;
let api: Api;
before(async () => {
  ({ t, ai, api } = await crewFixture());
  ai.setResponder((req) => ({ content: `answer of ${roleOf(req)}` }));
});
after(async () => {
  await t.close();
  await ai.close();
});

async function finished(crew: string, runId: string): Promise<any> {
  for (let i = 0; i < 3000; i++) {
    const state = (await t.modules.runs.runs.getRun(runId))?.state ?? '';
    if (['completed', 'failed', 'refused', 'cancelled'].includes(state)) return ok(api, 'GET', `${T}/crews/${crew}/runs/${runId}`);
    await new Promise((res) => setTimeout(res, 20));
  }
  assert.fail(`run ${runId} did not finish`);
}

async function publicKeys(): Promise<Map<string, JsonWebKey>> {
  const r = await t.request('GET', '/.well-known/cell-keys.json');
  assert.equal(r.status, 200);
  return new Map((r.body.keys as { kid: string; jwk: JsonWebKey }[]).map((k) => [k.kid, k.jwk]));
}

const journal = (runId: string) => t.modules.runs.runs.readJournal(runId, 0, 100_000);
const ROLES = ['s0', 's1', 's2', 's3'];

test('a fork at step k of an n-step run makes n-k model calls and its journal verifies with the public keys', async () => {
  const tm = await team(
    api,
    'sequential',
    ROLES.map((role) => ({ role })),
  );
  const parent = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'task' });
  assert.equal((await finished(tm.crew, parent.run_id)).state, 'completed');
  const precs = await journal(parent.run_id);
  const n = ROLES.length;
  const k = 2; // steps s0 and s1 are reused, s2 and s3 run again
  const atRec = precs.find((r) => r.kind === 'step' && r.step_id === `agent:${tm.billets['s2']}/model/0`)!;
  assert.ok(atRec, 'the model call record of the third step');

  const calls = ai.requests.length;
  const fork = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs/${parent.run_id}/fork`, { at: atRec.seq }, [201]);
  assert.notEqual(fork.run_id, parent.run_id);
  assert.deepEqual(fork.forked_from.run_id, parent.run_id);
  assert.equal(fork.forked_from.seq, atRec.seq);
  const done = await finished(tm.crew, fork.run_id);
  assert.equal(done.state, 'completed', JSON.stringify(done.error));
  assert.equal(ai.requests.length - calls, n - k, 'no model call for the shared prefix');
  assert.deepEqual(
    ai.requests.slice(calls).map((r) => roleOf(r.body)),
    ['s2', 's3'],
  );
  assert.equal(done.output, parent.output ?? done.output);

  // Lineage both ways.
  const p = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${parent.run_id}`);
  assert.deepEqual(
    p.forks.map((f: any) => [f.run_id, f.seq]),
    [[fork.run_id, atRec.seq]],
  );
  assert.equal(done.forked_from.record_hash.startsWith('sha256:'), true);

  // The fork's journal: opens with `forked`, reuses the parent's records, verifies with the public keys alone.
  const frecs = await journal(fork.run_id);
  assert.equal(frecs[0]!.kind, 'forked');
  assert.deepEqual((frecs[0]!.data as any).from, done.forked_from);
  const reused = frecs.filter((r) => (r.data as any)?.reused);
  assert.ok(reused.some((r) => r.step_id === `agent:${tm.billets['s1']}`));
  assert.ok(!reused.some((r) => r.step_id.startsWith(`agent:${tm.billets['s2']}`)));
  const keys = await publicKeys();
  const parentPrefix = { records: precs.slice(0, atRec.seq) };
  assert.deepEqual(await verifyJournal(frecs, (kid) => keys.get(kid), { parent: parentPrefix }), { ok: true });
  assert.deepEqual(await verifyJournal(frecs, (kid) => keys.get(kid)), { ok: true });
  // A parent record that is not the one the fork names is caught.
  const forged = precs.slice(0, atRec.seq).map((r) => ({ ...r })) as JournalRecord[];
  const wrongParent = { records: forged.slice(0, atRec.seq - 1) };
  const v = await verifyJournal(frecs, (kid) => keys.get(kid), { parent: wrongParent });
  assert.equal(v.ok, false);
  // A reused record changed in the fork's journal no longer verifies.
  const tampered = frecs.map((r) => ({ ...r })) as JournalRecord[];
  const i = tampered.findIndex((r) => (r.data as any)?.reused);
  tampered[i] = { ...tampered[i]!, output_hash: `sha256:${'1'.repeat(64)}` };
  assert.equal((await verifyJournal(tampered, (kid) => keys.get(kid), { parent: parentPrefix })).ok, false);
});

test('a replacement input reaches the step forked at; the fork runs as the caller', async () => {
  const tm = await team(
    api,
    'sequential',
    ROLES.slice(0, 2).map((role) => ({ role })),
  );
  const parent = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'task' });
  await finished(tm.crew, parent.run_id);
  const precs = await journal(parent.run_id);
  const node = precs.find((r) => r.kind === 'step' && r.step_id === `agent:${tm.billets['s1']}`)!;
  const calls = ai.requests.length;
  const fork = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs/${parent.run_id}/fork`, { at: node.seq, input: 'REPLACED' }, [201]);
  assert.equal((await finished(tm.crew, fork.run_id)).state, 'completed');
  assert.equal(ai.requests.length - calls, 1);
  const user = ai.requests.at(-1)!.body.messages.find((m) => m.role === 'user')!.content;
  assert.match(String(user), /REPLACED/);

  // A model call's record is no place for an input; a record that is not a step is no fork point.
  const call = precs.find((r) => r.step_id === `agent:${tm.billets['s1']}/model/0` && r.kind === 'step')!;
  const bad = await t.request('POST', `${T}/crews/${tm.crew}/runs/${parent.run_id}/fork`, {
    token: t.adminKey,
    body: { at: call.seq, input: 'x' },
  });
  assert.equal(bad.status, 400);
  assert.equal(bad.body.details.field, 'input');
  const first = await t.request('POST', `${T}/crews/${tm.crew}/runs/${parent.run_id}/fork`, { token: t.adminKey, body: { at: 1 } });
  assert.equal(first.status, 400);
  assert.equal(first.body.details.reason, 'not_a_step');
  const beyond = await t.request('POST', `${T}/crews/${tm.crew}/runs/${parent.run_id}/fork`, { token: t.adminKey, body: { at: 99_999 } });
  assert.equal(beyond.status, 400);
  const other = await t.request('POST', `${T}/crews/${tm.crew}/runs/run_00000000000000000000/fork`, { token: t.adminKey, body: { at: 3 } });
  assert.equal(other.status, 404);
});

test('a fork with a newer formation version that changed a reused step is refused naming it', async () => {
  const tm = await team(
    api,
    'sequential',
    ROLES.slice(0, 3).map((role) => ({ role })),
  );
  const parent = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'task' });
  await finished(tm.crew, parent.run_id);
  const precs = await journal(parent.run_id);
  // Version n+1 changes the second seat.
  const changed = await ok(api, 'PATCH', `${T}/formations/${tm.formation}/billets/${tm.billets['s1']}`, { role_label: 'renamed' });
  const version = changed.formation_version as number;
  const last = precs.find((r) => r.kind === 'step' && r.step_id === `agent:${tm.billets['s2']}/model/0`)!;
  const calls = ai.requests.length;
  const r = await t.request('POST', `${T}/crews/${tm.crew}/runs/${parent.run_id}/fork`, {
    token: t.adminKey,
    body: { at: last.seq, formation_version: version },
  });
  assert.equal(r.status, 409, r.text);
  assert.equal(r.body.details.reason, 'graph_changed');
  assert.equal(r.body.details.step_id, `agent:${tm.billets['s1']}/model/0`, 'the first step that differs');
  assert.equal(ai.requests.length, calls);
  const audit = await t.rows("SELECT outcome, details FROM audit WHERE action = 'crew.run.fork' AND target = ?", [parent.run_id]);
  assert.ok(audit.some((a: any) => a.outcome === 'refused'));

  // Forked before the change, the new version is fine: the first seat is reused, the changed one runs.
  const early = precs.find((r) => r.kind === 'step' && r.step_id === `agent:${tm.billets['s1']}/model/0`)!;
  const fork = await ok(
    api,
    'POST',
    `${T}/crews/${tm.crew}/runs/${parent.run_id}/fork`,
    { at: early.seq, formation_version: version },
    [201],
  );
  const done = await finished(tm.crew, fork.run_id);
  assert.equal(done.state, 'completed', JSON.stringify(done.error));
  assert.equal(done.formation_version, version);
  assert.equal(ai.requests.length - calls, 2);
});

test('rerun of a failed crew run: a fork at the failure reuses what completed', async () => {
  const tm = await team(
    api,
    'sequential',
    ROLES.slice(0, 3).map((role) => ({ role })),
  );
  let failS2 = true;
  ai.setResponder((req) => (roleOf(req) === 's2' && failS2 ? { status: 400 } : { content: `answer of ${roleOf(req)}` }));
  const parent = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'task' });
  const failed = await finished(tm.crew, parent.run_id);
  assert.equal(failed.state, 'failed');
  failS2 = false;
  const precs = await journal(parent.run_id);
  const calls = ai.requests.length;
  const fork = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs/${parent.run_id}/fork`, { at: precs.at(-1)!.seq }, [201]);
  assert.equal((await finished(tm.crew, fork.run_id)).state, 'completed');
  assert.equal(ai.requests.length - calls, 1, 'only the failed step calls the model again');
  ai.setResponder((req) => ({ content: `answer of ${roleOf(req)}` }));
});

test('forking needs reading the run whole (values included) and running the crew', async () => {
  const tm = await team(api, 'sequential', [{ role: 'solo' }]);
  const parent = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'task' });
  await finished(tm.crew, parent.run_id);
  const at = (await journal(parent.run_id)).find((r) => r.kind === 'step')!.seq;
  // Write without read: refused, audited.
  const writer = await ok(api, 'POST', `${A}/api-keys`, { name: 'writer-only', scopes: ['agent_teams.write'] });
  const r = await t.request('POST', `${T}/crews/${tm.crew}/runs/${parent.run_id}/fork`, { token: writer.secret, body: { at } });
  assert.equal(r.status, 403, r.text);
  assert.equal(r.body.details.reason, 'missing_permission');
  const refusals = await t.rows("SELECT details FROM audit WHERE action = 'crew.run.fork' AND outcome = 'refused' AND target = ?", [
    parent.run_id,
  ]);
  assert.equal(refusals.length, 1, 'the refusal is recorded');
  // Reading the run's view is not reading it whole: the fork hands over the parent's values (the values route's permission).
  const viewer = await ok(api, 'POST', `${A}/api-keys`, { name: 'view-only', scopes: ['agent_teams.write', 'agent_teams.read'] });
  const rv = await t.request('POST', `${T}/crews/${tm.crew}/runs/${parent.run_id}/fork`, { token: viewer.secret, body: { at } });
  assert.equal(rv.status, 403, rv.text);
  assert.equal(rv.body.details.required, 'system.orchestration.admin.read');
  // Read without write: the route's permission.
  const reader = await ok(api, 'POST', `${A}/api-keys`, { name: 'reader-only', scopes: ['agent_teams.read'] });
  const r2 = await t.request('POST', `${T}/crews/${tm.crew}/runs/${parent.run_id}/fork`, { token: reader.secret, body: { at } });
  assert.equal(r2.status, 403, r2.text);
});
