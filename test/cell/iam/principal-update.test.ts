// PATCH /admin/principals/{id} over HTTP (in process, both engines): rename and
// roles, bounded by the caller's authority, with the owner's protections.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { actor } from '../../helpers/actors.ts';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';

const A = '/api/public/v1/admin';

const patch = (t: InProcess, id: string, body: unknown, token = t.adminKey) => t.request('PATCH', `${A}/principals/${id}`, { token, body });

async function ownerId(t: InProcess): Promise<string> {
  return (await t.row("SELECT id FROM principals WHERE name = 'owner'"))!['id'] as string;
}

test("rename and set roles: the view, the audit trail, and the new roles at once on the principal's key", async () => {
  const t = await inProcessCell();
  try {
    const s = await actor(t, { name: 'robot', roles: ['viewer'] });
    assert.equal((await t.request('POST', `${A}/api-keys`, { token: s.key, body: { name: 'x' } })).status, 403);

    const r = await patch(t, s.id, { name: 'robot-2', roles: ['jobs'] });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.id, s.id);
    assert.equal(r.body.name, 'robot-2');
    assert.deepEqual(r.body.roles, ['jobs']);
    assert.equal((await t.request('GET', `${A}/principals/${s.id}`, { token: t.adminKey })).body.name, 'robot-2');
    assert.equal((await t.request('POST', `${A}/api-keys`, { token: s.key, body: { name: 'x' } })).status, 201, 'jobs holds iam.keys');
    assert.equal((await t.request('GET', `${A}/audit`, { token: s.key })).status, 403, 'viewer is gone at once');

    const audit = await t.request('GET', `${A}/audit?target=${s.id}`, { token: t.adminKey });
    const e = audit.body.entries.find((x: { action: string }) => x.action === 'principal.update');
    assert.deepEqual(e.details, { name: { from: 'robot', to: 'robot-2' }, roles: { from: ['viewer'], to: ['jobs'] } });
    assert.equal(e.actor, await ownerId(t));

    // Renaming only keeps the roles; the same roles again is no change.
    const n = await patch(t, s.id, { name: 'robot-3' });
    assert.deepEqual(n.body.roles, ['jobs']);
    assert.equal((await patch(t, s.id, { roles: ['jobs'] })).status, 200);
  } finally {
    await t.close();
  }
});

test('refusals: bad bodies 400, unknown role 400, name in use 409, agents and inactive principals 409, unknown id 404', async () => {
  const t = await inProcessCell();
  try {
    const s = await actor(t, { name: 'svc', roles: ['viewer'] });
    await actor(t, { name: 'other' });
    for (const body of [{}, { authority: 'unbounded' }, { name: '' }, { name: 'has space' }, { roles: 'viewer' }, { kind: 'user' }]) {
      const r = await patch(t, s.id, body);
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(r.body.error, 'invalid_request');
    }
    const unknown = await patch(t, s.id, { roles: ['viewer', 'no-such-role'] });
    assert.equal(unknown.status, 400);
    assert.equal(unknown.body.details.reason, 'unknown_role');
    const taken = await patch(t, s.id, { name: 'other' });
    assert.equal(taken.status, 409);
    assert.equal(taken.body.details.reason, 'name_taken');

    const agent = await t.request('POST', `${A}/agent-teams/agents`, { token: t.adminKey, body: { source: 'scratch', role_label: 'a' } });
    assert.equal(agent.status, 201, agent.text);
    const ag = await patch(t, agent.body.agent_id, { name: 'renamed-agent' });
    assert.equal(ag.status, 409, ag.text);
    assert.equal(ag.body.details.reason, 'agent_principal');

    assert.equal((await t.request('POST', `${A}/principals/${s.id}/archive`, { token: t.adminKey })).status, 200);
    const arch = await patch(t, s.id, { name: 'x' });
    assert.equal(arch.status, 409);
    assert.equal(arch.body.details.reason, 'principal_inactive');

    assert.equal((await patch(t, 'svc_00000000000000000000', { name: 'x' })).status, 404);
    assert.equal((await patch(t, 'nonsense', { name: 'x' })).status, 400);
    assert.deepEqual(
      (await t.rows("SELECT name FROM principals WHERE name IN ('svc', 'x', 'renamed-agent')")).map((r) => r['name']),
      ['svc'],
      'nothing written by any refusal',
    );
  } finally {
    await t.close();
  }
});

test('bounded by the caller: managing the principal needs all of its authority, given roles within the caller', async () => {
  const t = await inProcessCell();
  try {
    const mgr = await actor(t, { name: 'mgr', permissions: ['iam.principals', 'audit.read', 'iam.keys.read'] });
    const small = await actor(t, { name: 'small', permissions: ['audit.read'] });
    const big = await actor(t, { name: 'big', roles: ['admin'] });

    const wider = await patch(t, small.id, { roles: ['viewer'] }, mgr.key);
    assert.equal(wider.status, 403, 'viewer grants reads the manager does not hold');
    assert.equal(wider.body.details.reason, 'wider_than_caller');
    const manages = await patch(t, big.id, { name: 'big-2' }, mgr.key);
    assert.equal(manages.status, 403, 'the manager does not hold all of an admin');
    assert.equal(manages.body.details.reason, 'wider_than_caller');
    const owner = await patch(t, await ownerId(t), { name: 'not-owner' }, mgr.key);
    assert.equal(owner.status, 403);

    // Within: accepted.
    const ok = await patch(t, small.id, { roles: [small.role!, 'r-mgr'] }, mgr.key);
    assert.equal(ok.status, 200, ok.text);

    // A narrow key of the owner cannot change the owner (or anyone wider than the key).
    const narrow = await t.request('POST', `${A}/api-keys`, { token: t.adminKey, body: { name: 'n', scopes: ['iam.principals'] } });
    const n = await patch(t, await ownerId(t), { name: 'renamed' }, narrow.body.secret);
    assert.equal(n.status, 403);
    assert.equal(n.body.details.reason, 'wider_than_caller');

    // Without iam.principals.read the target is not revealed: 404, as for an unknown id.
    const blind = await actor(t, { name: 'blind', permissions: ['iam.principals.write'] });
    assert.equal((await patch(t, small.id, { name: 'x' }, blind.key)).status, 404);
    // Without iam.principals.write: the permission gate.
    const viewer = await actor(t, { name: 'viewer1', roles: ['viewer'] });
    assert.equal((await patch(t, small.id, { name: 'x' }, viewer.key)).status, 403);
    // The gate answers before any lookup: the same 403 for an id that does not exist (docs/iam.md).
    const gated = await patch(t, 'svc_00000000000000000000', { name: 'x' }, viewer.key);
    assert.equal(gated.status, 403);
    assert.equal(gated.body.details.required_permission, 'iam.principals.write');
    assert.equal((await t.request('PATCH', `${A}/principals/${small.id}`, { body: { name: 'x' } })).status, 401);

    const refused = await t.request('GET', `${A}/audit?actor=${mgr.id}`, { token: t.adminKey });
    assert.equal(
      refused.body.entries.filter((e: { outcome: string; action: string }) => e.outcome === 'refused' && e.action === 'principal.update')
        .length,
      3,
    );
  } finally {
    await t.close();
  }
});

test("the owner's protections: no change to one's own roles; the last active owner keeps the owner role", async () => {
  const t = await inProcessCell();
  try {
    const owner = await ownerId(t);
    const self = await patch(t, owner, { roles: ['admin'] });
    assert.equal(self.status, 409);
    assert.equal(self.body.details.reason, 'self');
    const rename = await patch(t, owner, { name: 'root' });
    assert.equal(rename.status, 200, 'renaming oneself is fine');
    assert.equal((await patch(t, owner, { name: 'owner' })).status, 200);

    // A principal holding `*` through a custom role manages the owner, but cannot take the last owner's role.
    const sup = await actor(t, { name: 'super', permissions: ['*'], authority: 'unbounded' });
    const last = await patch(t, owner, { roles: ['admin'] }, sup.key);
    assert.equal(last.status, 409, last.text);
    assert.equal(last.body.details.reason, 'last_owner');
    // With a second active owner, it can; then the second is the last one.
    const second = await actor(t, { name: 'owner2', roles: ['owner'], authority: 'unbounded' });
    assert.equal((await patch(t, owner, { roles: ['admin'] }, sup.key)).status, 200);
    const again = await patch(t, second.id, { roles: [] }, sup.key);
    assert.equal(again.status, 409);
    assert.equal(again.body.details.reason, 'last_owner');
    // An archived owner does not count.
    assert.equal((await patch(t, owner, { roles: ['owner'] }, second.key)).status, 200);
    assert.equal((await t.request('POST', `${A}/principals/${owner}/archive`, { token: second.key })).status, 200);
    assert.equal((await patch(t, second.id, { roles: [] }, sup.key)).body.details.reason, 'last_owner');
  } finally {
    await t.close();
  }
});
