// The delegation, approval and fork findings of the fourth security review (issue 36: findings 1,
// 2, 3, 6, 7, 8 and the shared job things), each performed as the review did against the real app
// and store (in process; both engines with CELL_TEST_STORE=postgres): refused, nothing written, and
// the refusal on the audit trail. The rules (docs/security.md): a delegated token makes nothing that
// outlives it; an approval is consent to exactly what was approved; forks never widen; a token is
// exchanged only where it was meant to be used; shared job things follow the shared-things rule.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { generateEd25519 } from '../../../bundles/codec.ts';
import type { InProcess } from '../../helpers/inproc.ts';
import { inProcessCell } from '../../helpers/inproc.ts';
import { actor, type Actor } from '../../helpers/actors.ts';
import { ACCESS_TOKEN_TYPE, basic, claimsOf, form, TOKEN_EXCHANGE } from '../../helpers/oauth.ts';
import { A, T, crewFixture, roleOf, team, type Api } from '../../helpers/teams.ts';

async function must(t: InProcess, method: string, path: string, body?: unknown, token = t.adminKey): Promise<any> {
  const r = await t.request(method, path, { token, ...(body !== undefined ? { body } : {}) });
  assert.ok(r.status >= 200 && r.status < 300, `${method} ${path} -> ${r.status} ${r.text}`);
  return r.body;
}

function refusals(t: InProcess, action: string) {
  return t.rows("SELECT actor, target, details FROM audit WHERE action = ? AND outcome = 'refused'", [action]);
}

/** The envelope of the test crews' seats (test/helpers/teams.ts): principals who run them hold it. */
const SEATS = {
  allowed_tools: ['calc', 'clock.now', 'kv.get', 'kv.put', 'http.get'],
  permission_mode: 'auto',
  clearance_level: 0,
  egress_allowlist: ['kv:*'],
  data_grant_ids: ['kv:*'],
};

const api = (t: InProcess) => `${t.modules.oauth.api.publicBase()}/api/public/v1`;

/** The bootstrap owner's key, as a client of the token endpoint (an API key serves as a client secret). */
async function ownerKey(t: InProcess): Promise<{ keyId: string; key: string; id: string }> {
  const keyId = (await must(t, 'GET', `${A}/api-keys?limit=1`)).keys[0].key_id as string;
  const id = (await must(t, 'GET', `${A}/whoami`)).principal.id as string;
  return { keyId, key: t.adminKey, id };
}

/** A token of the key's principal (client_credentials, the key as the client). */
async function tokenOf(t: InProcess, k: { keyId: string; key: string }, extra: Record<string, string> = {}): Promise<string> {
  const r = await form(t, '/oauth/token', { grant_type: 'client_credentials', ...extra }, basic(k.keyId, k.key));
  assert.equal(r.status, 200, r.text);
  return r.body.access_token as string;
}

/** The subject token exchanged by the actor's key (client and actor): sub = the subject, act = the actor. */
function exchange(t: InProcess, subjectToken: string, by: { keyId: string; key: string }, fields: Record<string, string> = {}) {
  return form(
    t,
    '/oauth/token',
    { grant_type: TOKEN_EXCHANGE, subject_token: subjectToken, subject_token_type: ACCESS_TOKEN_TYPE, audience: api(t), ...fields },
    basic(by.keyId, by.key),
  );
}

async function delegated(t: InProcess, subjectToken: string, by: { keyId: string; key: string }): Promise<string> {
  const r = await exchange(t, subjectToken, by);
  assert.equal(r.status, 200, r.text);
  return r.body.access_token as string;
}

async function ended(t: InProcess, runId: string): Promise<string> {
  for (let i = 0; i < 3000; i++) {
    const state = (await t.modules.runs.runs.getRun(runId))?.state ?? '';
    if (['completed', 'failed', 'refused', 'cancelled', 'waiting'].includes(state)) {
      await t.modules.teams.teams.settled(runId);
      return (await t.modules.runs.runs.getRun(runId))!.state;
    }
    await new Promise((res) => setTimeout(res, 10));
  }
  assert.fail(`run ${runId} did not settle`);
}

const counts = async (t: InProcess) => ({
  keys: (await t.row('SELECT COUNT(*) AS n FROM api_keys'))!['n'],
  clients: (await t.row('SELECT COUNT(*) AS n FROM oauth_clients'))!['n'],
  definitions: (await t.row('SELECT COUNT(*) AS n FROM job_definitions'))!['n'],
  endpoints: (await t.row('SELECT COUNT(*) AS n FROM job_endpoints'))!['n'],
  devices: (await t.row('SELECT COUNT(*) AS n FROM edge_devices'))!['n'],
  principals: (await t.row('SELECT COUNT(*) AS n FROM principals'))!['n'],
  roles: (await t.row('SELECT COUNT(*) AS n FROM roles'))!['n'],
});

test('finding 1: a delegated token makes nothing that outlives it (keys, clients, SATs, schedules, endpoints, devices, bundles, principals)', async () => {
  const t = await inProcessCell();
  try {
    const owner = await ownerKey(t);
    // A principal the owner delegates to: it acts for the owner through an exchanged token (sub = owner, act = it).
    const a = await actor(t, { name: 'delegate-a', roles: ['admin'], authority: SEATS });
    const x = await delegated(t, await tokenOf(t, owner), a);
    assert.equal(claimsOf(x).sub, owner.id);
    assert.deepEqual(claimsOf(x).act, { sub: a.id });
    // Fixtures the owner made, for the operations that act on something.
    const dev = await generateEd25519();
    const device = (await must(t, 'POST', `${A}/edge/devices`, { name: 'pump', public_jwk: dev.publicJwk })).device_id as string;
    const tm = await team({ request: t.request, token: t.adminKey }, 'sequential', [{ role: 'solo' }]);
    const def = await must(t, 'POST', `${A}/jobs/definitions`, {
      name: 'nightly',
      job_type: 'compute',
      workspace_id: 'w1',
      spec: { code: 'return 1' },
      cron: '0 3 * * *',
      enabled: false,
    });
    const client = await must(t, 'POST', `${A}/oauth/clients`, { name: 'owner-client', scope: ['audit.read'] });
    await must(t, 'POST', `${A}/roles`, { name: 'owners-role', permissions: ['audit.read'] });
    const other = await actor(t, { name: 'someone' });
    const before = await counts(t);
    const dev2 = await generateEd25519();

    const attempts: [string, string, string, unknown][] = [
      ['api_key.mint', 'POST', `${A}/api-keys`, { name: 'standing' }],
      ['api_key.rotate', 'POST', `${A}/api-keys/${owner.keyId}/rotate`, { grace_seconds: 0 }],
      ['oauth.client.register', 'POST', `${A}/oauth/clients`, { name: 'standing-client', scope: ['audit.read'] }],
      ['oauth.client.rotate', 'POST', `${A}/oauth/clients/${client.client_id}/rotate`, undefined],
      ['oauth.sat.mint', 'POST', `${A}/sats`, { scope: ['audit.read'] }],
      [
        'jobs.definition.create',
        'POST',
        `${A}/jobs/definitions`,
        { name: 'standing', job_type: 'compute', workspace_id: 'w1', spec: { code: 'return 2' }, cron: '0 4 * * *' },
      ],
      ['jobs.definition.update', 'PATCH', `${A}/jobs/definitions/${def.schedule_id}`, { cron: '0 5 * * *' }],
      ['jobs.definition.enable', 'POST', `${A}/jobs/definitions/${def.schedule_id}/enable`, undefined],
      [
        'jobs.endpoint.publish',
        'POST',
        `${A}/jobs/endpoints`,
        { name: 'standing-ep', job_type: 'compute', workspace_id: 'w1', spec: { code: 'return 3' } },
      ],
      ['edge.device.register', 'POST', `${A}/edge/devices`, { name: 'rogue', public_jwk: dev2.publicJwk }],
      ['edge.key_bundle.issue', 'POST', `${A}/edge/key-bundles`, { device_id: device }],
      ['edge.crew_bundle.issue', 'POST', `${A}/edge/crew-bundles`, { device_id: device, crew_id: tm.crew }],
      ['principal.create', 'POST', `${A}/principals`, { kind: 'service', name: 'standing-p', roles: ['viewer'] }],
      ['principal.update', 'PATCH', `${A}/principals/${other.id}`, { roles: ['operator'] }],
      ['role.create', 'POST', `${A}/roles`, { name: 'standing-role', permissions: ['audit.read'] }],
      ['role.update', 'PATCH', `${A}/roles/owners-role`, { permissions: ['audit.read', 'iam.keys.read'] }],
      ['agent.mint', 'POST', `${T}/agents`, { source: 'scratch', role_label: 'x', authority_template: {} }],
    ];
    for (const [action, method, path, body] of attempts) {
      const r = await t.request(method, path, { token: x, ...(body !== undefined ? { body } : {}) });
      assert.equal(r.status, 403, `${action}: ${r.status} ${r.text}`);
      assert.equal(r.body.details.reason, 'delegated_credential', action);
      assert.equal(r.body.secret, undefined, `${action}: no secret`);
      const audited = await refusals(t, action);
      assert.ok(
        audited.some((row) => JSON.parse(String(row['details'])).actors?.[0] === a.id),
        `${action}: the refusal is audited, naming the actor`,
      );
    }
    assert.deepEqual(await counts(t), before, 'nothing was written');
    assert.equal((await must(t, 'GET', `${A}/jobs/definitions/${def.schedule_id}`)).enabled, false);
    assert.equal((await t.request('GET', `${A}/whoami`, { token: t.adminKey })).status, 200, "the owner's key was not rotated");

    // What does not outlive the token still works with it: a run bounded by it, a read.
    assert.equal((await t.request('GET', `${A}/whoami`, { token: x })).status, 200);
    const run = await t.request('POST', `${A}/jobs/runs`, {
      token: x,
      body: { job_type: 'single', workspace_id: 'w1', spec: { tool: 'calc', args: { expr: '1+1' } } },
    });
    assert.equal(run.status, 202, run.text);
  } finally {
    await t.close();
  }
});

test('finding 6: a device or protected-resource token is exchanged only for its own audience; may_act binds every later hop', async () => {
  const resource = 'https://orders.example/api';
  const t = await inProcessCell({ config: { protectedResources: [resource] } });
  try {
    const owner = await ownerKey(t);
    const a = await actor(t, { name: 'hop-a', roles: ['admin'] });
    const b = await actor(t, { name: 'hop-b', roles: ['admin'] });
    const dev = await generateEd25519();
    const device = (await must(t, 'POST', `${A}/edge/devices`, { name: 'pump', public_jwk: dev.publicJwk })).device_id as string;

    // A token meant for the device is not a cell-API token: not exchanged for one.
    const forDevice = await tokenOf(t, owner, { resource: `edge:${device}` });
    const r1 = await exchange(t, forDevice, a);
    assert.equal(r1.status, 400, r1.text);
    assert.equal(r1.body.error, 'invalid_target');
    // Nor a token meant for the protected resource.
    const forResource = await tokenOf(t, owner, { resource });
    const r2 = await exchange(t, forResource, a);
    assert.equal(r2.status, 400, r2.text);
    assert.equal(r2.body.error, 'invalid_target');
    // Each is exchanged for its own audience (narrowing who acts there), and a cell token for any the cell issues for.
    const same = await exchange(t, forDevice, a, { audience: `edge:${device}` });
    assert.equal(same.status, 200, same.text);
    assert.equal(claimsOf(same.body.access_token).aud, `edge:${device}`);
    assert.equal((await exchange(t, await tokenOf(t, owner), a, { audience: `edge:${device}` })).status, 200);
    // An actor token speaks here for its subject: one meant for the device is not one.
    const actorForDevice = await tokenOf(t, { keyId: b.keyId, key: b.key }, { resource: `edge:${device}` });
    const r3 = await exchange(t, await tokenOf(t, owner), a, { actor_token: actorForDevice, actor_token_type: ACCESS_TOKEN_TYPE });
    assert.equal(r3.status, 400, r3.text);
    assert.equal(r3.body.error, 'invalid_target');

    // may_act names an existing principal...
    const bad = await t.request('POST', `${A}/sats`, { token: t.adminKey, body: { scope: ['audit.read'], may_act: 'svc_nobody' } });
    assert.equal(bad.status, 400, bad.text);
    assert.equal(bad.body.details.reason, 'unknown_actor');
    // ...and binds every later hop: only A acts for the owner with this SAT, also through A's exchanged token.
    const sat = await must(t, 'POST', `${A}/sats`, { scope: ['audit.read'], may_act: a.id });
    const t1 = await exchange(t, sat.access_token, a);
    assert.equal(t1.status, 200, t1.text);
    assert.deepEqual(claimsOf(t1.body.access_token).may_act, { sub: a.id }, 'carried on');
    const t2 = await exchange(t, t1.body.access_token, b);
    assert.equal(t2.status, 400, t2.text);
    assert.equal(t2.body.error, 'invalid_grant');
    const audited = await refusals(t, 'oauth.token.exchange');
    assert.ok(audited.some((row) => JSON.parse(String(row['details'])).reason === 'may_act' && row['actor'] === b.id));
  } finally {
    await t.close();
  }
});

/** A crew whose run asks a two-person approval before its one seat acts. */
async function approvalCrew(a: Api) {
  return team(a, 'sequential', [{ role: 'payer' }], {
    pre: [{ kind: 'human_approval', config: { rule: 'two_person', timeout_ms: 3_600_000, prompt: 'pay?' } }],
  });
}

const approvalsPath = (crew: string, run: string, step: string) => `${T}/crews/${crew}/runs/${run}/approvals/${encodeURIComponent(step)}`;

test('finding 7: the requester acting through another principal’s token is not a second person; journal and audit name the chain', async () => {
  const { t, ai, api: a } = await crewFixture();
  try {
    ai.setResponder((req) => ({ content: `paid by ${roleOf(req)}` }));
    const tm = await approvalCrew(a);
    const perms = ['agent_teams.write', 'agent_teams.read', 'agent_teams.approve', 'system.orchestration.admin.read'];
    const requester = await actor(t, { name: 'requester', permissions: perms, authority: SEATS });
    const bob = await actor(t, { name: 'bob', permissions: perms, authority: SEATS });
    const carol = await actor(t, { name: 'carol', permissions: perms, authority: SEATS });
    const run = await must(t, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'pay 10' }, requester.key);
    assert.equal(await ended(t, run.run_id), 'waiting');
    const step = (await must(t, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`)).pending_approvals[0].step_id as string;

    // The requester exchanges bob's token (bob let it act for him) and approves as bob.
    const asBob = await delegated(t, await tokenOf(t, bob), requester);
    const r = await t.request('POST', approvalsPath(tm.crew, run.run_id, step), { token: asBob, body: { decision: 'approve' } });
    assert.equal(r.status, 403, r.text);
    assert.equal(r.body.details.reason, 'requester_cannot_approve');
    const refused = await refusals(t, 'crew.run.approval');
    assert.deepEqual(JSON.parse(String(refused.at(-1)!['details'])).chain, [bob.id, requester.id], 'the audit names the chain');
    // Carol approves: one person of two, the run still waits.
    await must(t, 'POST', approvalsPath(tm.crew, run.run_id, step), { decision: 'approve', comment: 'checked the invoice' }, carol.key);
    assert.equal(await ended(t, run.run_id), 'waiting');
    // Carol again, through bob's token: one person, one voice.
    const carolAsBob = await delegated(t, await tokenOf(t, bob), carol);
    const again = await t.request('POST', approvalsPath(tm.crew, run.run_id, step), { token: carolAsBob, body: { decision: 'approve' } });
    assert.equal(again.status, 409, again.text);
    assert.equal(again.body.details.reason, 'already_decided');
    // Bob himself is a second person.
    t.clock.advance(1000);
    await must(t, 'POST', approvalsPath(tm.crew, run.run_id, step), { decision: 'approve' }, bob.key);
    assert.equal(await ended(t, run.run_id), 'completed');

    const view = await must(t, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`);
    assert.deepEqual(
      view.decisions.map((d: any) => [d.principal, d.chain, d.decision, d.comment]),
      [
        [carol.id, [carol.id], 'approve', 'checked the invoice'],
        [bob.id, [bob.id], 'approve', null],
      ],
    );
    const journal = await t.modules.runs.runs.readJournal(run.run_id);
    const received = journal.filter((x) => x.kind === 'approval_received');
    assert.deepEqual(
      received.map((x) => [x.data?.['by'], x.data?.['chain'], x.data?.['comment']]),
      [
        [carol.id, [carol.id], 'checked the invoice'],
        [bob.id, [bob.id], null],
      ],
    );
    const decision = journal.find((x) => x.kind === 'decision' && x.step_id === step)!;
    assert.equal(decision.data?.['requester'], requester.id);
    assert.equal(received[0]!.data?.['input_hash'], decision.input_hash, 'each decision approved the digest the step record carries');
  } finally {
    await t.close();
    await ai.close();
  }
});

test('finding 7: a run requested through an exchanged token excludes its whole chain from the two-person rule', async () => {
  const { t, ai, api: a } = await crewFixture();
  try {
    const tm = await approvalCrew(a);
    const perms = ['agent_teams.write', 'agent_teams.read', 'agent_teams.approve'];
    const subject = await actor(t, { name: 'subject', permissions: perms, authority: SEATS });
    const mallory = await actor(t, { name: 'mallory', permissions: perms, authority: SEATS });
    // Mallory requests the run for the subject, then approves it as herself.
    const asSubject = await delegated(t, await tokenOf(t, subject), mallory);
    const run = await must(t, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'pay 10' }, asSubject);
    assert.deepEqual(run.flags.requester_actors, [mallory.id]);
    assert.equal(await ended(t, run.run_id), 'waiting');
    const step = (await must(t, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`)).pending_approvals[0].step_id as string;
    const r = await t.request('POST', approvalsPath(tm.crew, run.run_id, step), { token: mallory.key, body: { decision: 'approve' } });
    assert.equal(r.status, 403, r.text);
    assert.equal(r.body.details.reason, 'requester_cannot_approve');
    const requested = (await t.modules.runs.runs.readJournal(run.run_id)).find((x) => x.kind === 'run_requested')!;
    assert.deepEqual(requested.data?.['requester_actors'], [mallory.id], 'the journal names the chain that requested');
    // The run's attestation names that chain too (its requester's `act`), once the run has ended.
    await must(t, 'POST', `${A}/jobs/runs/${run.run_id}/cancel`, {});
    assert.equal(await ended(t, run.run_id), 'cancelled');
    const env = await must(t, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}/attestation?format=dsse`);
    const statement = JSON.parse(Buffer.from(env.payload, 'base64').toString('utf8'));
    assert.deepEqual(statement.predicate.requester, { principal: subject.id, act: [mallory.id] });
  } finally {
    await t.close();
    await ai.close();
  }
});

test('issue 43: a decision keeps its comment: a rejected run says who rejected it and why, in its view, journal and audit', async () => {
  const { t, ai, api: a } = await crewFixture();
  try {
    const tm = await approvalCrew(a);
    const perms = ['agent_teams.write', 'agent_teams.read', 'agent_teams.approve'];
    const bob = await actor(t, { name: 'bob', permissions: perms, authority: SEATS });
    const run = await must(t, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'pay 10' });
    assert.equal(await ended(t, run.run_id), 'waiting');
    const why = 'Not before the audit \u202Eclosed\u202C.';
    await must(t, 'POST', approvalsPath(tm.crew, run.run_id, 'pre:0'), { decision: 'reject', comment: why }, bob.key);
    assert.equal(await ended(t, run.run_id), 'refused');
    const view = await must(t, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`);
    assert.equal(view.error.reason, 'approval_rejected');
    assert.equal(view.error.details.by, bob.id);
    assert.equal(view.error.details.comment, why);
    assert.deepEqual(
      view.decisions.map((d: any) => [d.step_id, d.principal, d.decision, d.comment]),
      [['pre:0', bob.id, 'reject', why]],
    );
    const journal = await t.modules.runs.runs.readJournal(run.run_id);
    assert.equal(journal.find((r) => r.kind === 'approval_received')!.data?.['comment'], why);
    const decision = journal.find((r) => r.kind === 'decision' && r.step_id === 'pre:0')!;
    assert.equal(decision.data?.['by'], bob.id);
    assert.equal(decision.data?.['comment'], why);
    const audited = await t.rows("SELECT details FROM audit WHERE action = 'crew.run.approval' AND outcome = 'ok'");
    assert.equal(JSON.parse(String(audited[0]!['details'])).comment, why);
  } finally {
    await t.close();
    await ai.close();
  }
});

/** Two approvals by two principals who are not the requester. */
async function approveTwice(t: InProcess, crew: string, runId: string, by: Actor[]): Promise<void> {
  const step = (await must(t, 'GET', `${T}/crews/${crew}/runs/${runId}`)).pending_approvals[0].step_id as string;
  for (const p of by) await must(t, 'POST', approvalsPath(crew, runId, step), { decision: 'approve' }, p.key);
}

test('finding 3: a fork reuses an approval only for the same input and the same requester; otherwise it asks again', async () => {
  const { t, ai, api: a } = await crewFixture();
  try {
    ai.setResponder((req) => ({ content: `done by ${roleOf(req)}` }));
    const tm = await approvalCrew(a);
    const perms = ['agent_teams.write', 'agent_teams.read', 'agent_teams.approve', 'system.orchestration.admin.read'];
    const requester = await actor(t, { name: 'req', permissions: perms, authority: SEATS });
    const forker = await actor(t, { name: 'forker', permissions: perms, authority: SEATS });
    const [b, c] = [
      await actor(t, { name: 'apb', permissions: perms, authority: SEATS }),
      await actor(t, { name: 'apc', permissions: perms, authority: SEATS }),
    ];
    const parent = await must(t, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'pay 10' }, requester.key);
    assert.equal(await ended(t, parent.run_id), 'waiting');
    await approveTwice(t, tm.crew, parent.run_id, [b, c]);
    assert.equal(await ended(t, parent.run_id), 'completed');
    const journal = await t.modules.runs.runs.readJournal(parent.run_id);
    const seat = journal.find((r) => r.kind === 'step' && r.step_id.startsWith('agent:') && !r.step_id.includes('/'))!;

    // Another principal forks at the acting seat with new input: the approval is asked again, nothing is paid.
    const calls = ai.requests.length;
    const fork = await must(
      t,
      'POST',
      `${T}/crews/${tm.crew}/runs/${parent.run_id}/fork`,
      { at: seat.seq, input: 'wire all the money' },
      forker.key,
    );
    assert.equal(await ended(t, fork.run_id), 'waiting');
    assert.equal(ai.requests.length, calls, 'the seat did not act');
    const fv = await must(t, 'GET', `${T}/crews/${tm.crew}/runs/${fork.run_id}`);
    assert.equal(fv.pending_approvals.length, 1);
    assert.equal(fv.pending_approvals[0].rule, 'two_person');
    const forked = (await t.modules.runs.runs.readJournal(fork.run_id))[0]!;
    assert.deepEqual(forked.data?.['approvals_asked_again'], [fv.pending_approvals[0].step_id]);
    // The forker is its requester: it cannot approve it.
    const self = await t.request('POST', approvalsPath(tm.crew, fork.run_id, fv.pending_approvals[0].step_id), {
      token: forker.key,
      body: { decision: 'approve' },
    });
    assert.equal(self.status, 403);

    // The requester itself, replacing the seat's input: what was approved no longer flows on; asked again.
    const own = await must(
      t,
      'POST',
      `${T}/crews/${tm.crew}/runs/${parent.run_id}/fork`,
      { at: seat.seq, input: 'wire all the money' },
      requester.key,
    );
    assert.equal(await ended(t, own.run_id), 'waiting');
    assert.equal(ai.requests.length, calls);

    // The requester, same input: the approval stands, the seat runs again without asking.
    const rerun = await must(t, 'POST', `${T}/crews/${tm.crew}/runs/${parent.run_id}/fork`, { at: seat.seq }, requester.key);
    assert.equal(await ended(t, rerun.run_id), 'completed');
    assert.equal(ai.requests.length, calls + 1);
    assert.deepEqual((await must(t, 'GET', `${T}/crews/${tm.crew}/runs/${rerun.run_id}`)).pending_approvals, []);
  } finally {
    await t.close();
    await ai.close();
  }
});

test('finding 2: a fork runs the crew’s current formation version or a newer one', async () => {
  const { t, ai, api: a } = await crewFixture();
  try {
    ai.setResponder((req) => ({ content: `done by ${roleOf(req)}` }));
    const tm = await team(a, 'sequential', [{ role: 'payer' }]);
    const parent = await must(t, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'pay 10' });
    assert.equal(await ended(t, parent.run_id), 'completed');
    const at = (await t.modules.runs.runs.readJournal(parent.run_id)).find((r) => r.kind === 'step' && r.step_id.startsWith('agent:'))!.seq;
    // Version 2 adds a two-person approval before the seat; the crew moves to it.
    const v2 = await must(t, 'PATCH', `${T}/formations/${tm.formation}`, {
      pre: [{ kind: 'human_approval', config: { rule: 'two_person', timeout_ms: 3_600_000 } }],
    });
    await must(t, 'POST', `${T}/crews/${tm.crew}/upgrade`, {});
    const calls = ai.requests.length;
    const runsBefore = (await t.row('SELECT COUNT(*) AS n FROM runs'))!['n'];
    // The parent's version (and the parent's pin, the default) no longer has the approval: refused, nothing runs.
    for (const body of [{ at, formation_version: parent.formation_version as number }, { at }]) {
      const r = await t.request('POST', `${T}/crews/${tm.crew}/runs/${parent.run_id}/fork`, { token: t.adminKey, body });
      assert.equal(r.status, 409, r.text);
      assert.equal(r.body.details.reason, 'formation_superseded');
      assert.equal(r.body.details.formation_version, v2.version);
    }
    assert.equal((await t.row('SELECT COUNT(*) AS n FROM runs'))!['n'], runsBefore, 'no run was made');
    assert.equal(ai.requests.length, calls);
    assert.equal((await refusals(t, 'crew.run.fork')).filter((r) => String(r['details']).includes('formation_superseded')).length, 2);
  } finally {
    await t.close();
    await ai.close();
  }
});

test('finding 8: a fork hands the parent’s results only to a forker who may read the parent whole, values included', async () => {
  const { t, ai, api: a } = await crewFixture();
  try {
    // The parent fetched data for its requester (a tool result, a model answer): its values.
    ai.setResponder(() => ({ content: 'the secret figures' }));
    const tm = await team(a, 'sequential', [{ role: 'fetcher' }]);
    const parent = await must(t, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'fetch' });
    assert.equal(await ended(t, parent.run_id), 'completed');
    const at = (await t.modules.runs.runs.readJournal(parent.run_id)).find((r) => r.kind === 'run_finished')!.seq;
    const runsBefore = (await t.row('SELECT COUNT(*) AS n FROM runs'))!['n'];
    // A forker who reads run views (agent_teams.read) but not the run's values.
    const viewer = await actor(t, { name: 'viewer', permissions: ['agent_teams.write', 'agent_teams.read'], authority: SEATS });
    const values = await t.request('GET', `${A}/jobs/runs/${parent.run_id}/journal`, { token: viewer.key });
    assert.equal(values.status, 403, 'it cannot read the values itself');
    const r = await t.request('POST', `${T}/crews/${tm.crew}/runs/${parent.run_id}/fork`, { token: viewer.key, body: { at } });
    assert.equal(r.status, 403, r.text);
    assert.equal(r.body.details.reason, 'missing_permission');
    assert.equal(r.body.details.required, 'system.orchestration.admin.read');
    assert.equal((await t.row('SELECT COUNT(*) AS n FROM runs'))!['n'], runsBefore, 'no fork was made');
    assert.equal((await refusals(t, 'crew.run.fork')).length, 1);
  } finally {
    await t.close();
    await ai.close();
  }
});

test('shared job things: a narrow jobs writer cannot disable, re-author, delete or cancel what acts as the owner', async () => {
  const t = await inProcessCell();
  try {
    const narrow = await actor(t, {
      name: 'narrow-writer',
      permissions: ['system.orchestration.admin.write', 'system.orchestration.admin.read'],
    });
    const def = await must(t, 'POST', `${A}/jobs/definitions`, {
      name: 'owners-nightly',
      job_type: 'compute',
      workspace_id: 'w1',
      spec: { code: 'return 1' },
      cron: '0 3 * * *',
    });
    const ep = await must(t, 'POST', `${A}/jobs/endpoints`, {
      name: 'owners-ep',
      job_type: 'compute',
      workspace_id: 'w1',
      spec: { code: 'return 1' },
    });
    // A run of the owner that waits (a timer), to cancel.
    const run = await must(t, 'POST', `${A}/jobs/runs`, {
      job_type: 'compute',
      workspace_id: 'w1',
      spec: { code: 'while (true) {}', timeout_ms: 60_000 },
    });
    const state = () =>
      Promise.all([
        t.row('SELECT enabled, deleted_at, cron, author_id FROM job_definitions WHERE schedule_id = ?', [def.schedule_id]),
        t.row('SELECT deleted_at FROM job_endpoints WHERE endpoint_id = ?', [ep.endpoint_id]),
      ]);
    const before = JSON.stringify(await state());
    const attempts: [string, string, string, unknown][] = [
      ['jobs.definition.disable', 'POST', `${A}/jobs/definitions/${def.schedule_id}/disable`, undefined],
      ['jobs.definition.update', 'PATCH', `${A}/jobs/definitions/${def.schedule_id}`, { cron: '0 4 * * *' }],
      ['jobs.definition.delete', 'DELETE', `${A}/jobs/definitions/${def.schedule_id}`, undefined],
      ['jobs.endpoint.unpublish', 'DELETE', `${A}/jobs/endpoints/${ep.endpoint_id}`, undefined],
      ['jobs.run.cancel', 'POST', `${A}/jobs/runs/${run.run_id}/cancel`, undefined],
    ];
    for (const [action, method, path, body] of attempts) {
      const r = await t.request(method, path, { token: narrow.key, ...(body !== undefined ? { body } : {}) });
      assert.equal(r.status, 403, `${action}: ${r.status} ${r.text}`);
      assert.equal(r.body.details.reason, 'shared_change_exceeds_caller', action);
      assert.equal((await refusals(t, action)).length, 1, `${action} is audited`);
    }
    assert.equal(JSON.stringify(await state()), before, 'nothing changed');
    assert.notEqual((await t.modules.runs.runs.getRun(run.run_id))!.state, 'cancelled');
    // Its own things it acts on as before.
    const mine = await must(
      t,
      'POST',
      `${A}/jobs/definitions`,
      { name: 'mine', job_type: 'compute', workspace_id: 'w1', spec: { code: 'return 1' }, cron: '0 3 * * *' },
      narrow.key,
    );
    await must(t, 'POST', `${A}/jobs/definitions/${mine.schedule_id}/disable`, undefined, narrow.key);
    // The owner (who manages everyone) acts on them.
    await must(t, 'POST', `${A}/jobs/runs/${run.run_id}/cancel`);
  } finally {
    await t.close();
  }
});
