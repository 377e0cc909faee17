// Custom roles over HTTP (in process, both engines): update and delete, the
// built-ins immutable, deletion refused while assigned (naming the holders),
// and the containment check over the role's old and new permissions.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { actor } from '../../helpers/actors.ts';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';

const A = '/api/public/v1/admin';

async function role(t: InProcess, name: string, permissions: string[], token = t.adminKey) {
  const r = await t.request('POST', `${A}/roles`, { token, body: { name, permissions } });
  assert.equal(r.status, 201, r.text);
}

async function service(t: InProcess, name: string, roles: string[]) {
  const r = await t.request('POST', `${A}/principals`, { token: t.adminKey, body: { kind: 'service', name, roles } });
  assert.equal(r.status, 201, r.text);
  const k = await t.request('POST', `${A}/api-keys`, { token: t.adminKey, body: { name: `${name}-key`, owner_id: r.body.id } });
  assert.equal(k.status, 201, k.text);
  return { id: r.body.id as string, key: k.body.secret as string };
}

test('PATCH a custom role: holders get the new permissions at once; description set and cleared', async () => {
  const t = await inProcessCell();
  try {
    await role(t, 'auditors', ['audit.read']);
    const s = await service(t, 'auditor', ['auditors']);
    assert.equal((await t.request('GET', `${A}/audit`, { token: s.key })).status, 200);
    assert.equal((await t.request('GET', `${A}/principals`, { token: s.key })).status, 403);

    const r = await t.request('PATCH', `${A}/roles/auditors`, {
      token: t.adminKey,
      body: { permissions: ['iam.principals.read'], description: 'reads principals' },
    });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.body, { name: 'auditors', permissions: ['iam.principals.read'], builtin: false, description: 'reads principals' });
    assert.equal((await t.request('GET', `${A}/audit`, { token: s.key })).status, 403, 'the old permission is gone at once');
    assert.equal((await t.request('GET', `${A}/principals`, { token: s.key })).status, 200, 'the new one works at once');

    const d = await t.request('PATCH', `${A}/roles/auditors`, { token: t.adminKey, body: { description: null } });
    assert.equal(d.status, 200, d.text);
    assert.equal(d.body.description, null);
    assert.deepEqual(d.body.permissions, ['iam.principals.read'], 'a description change keeps the permissions');
    const listed = (await t.request('GET', `${A}/roles`, { token: t.adminKey })).body.roles.find(
      (x: { name: string }) => x.name === 'auditors',
    );
    assert.deepEqual(listed, d.body);

    const audit = await t.request('GET', `${A}/audit?target=auditors`, { token: t.adminKey });
    const updates = audit.body.entries.filter((e: { action: string; outcome: string }) => e.action === 'role.update' && e.outcome === 'ok');
    assert.equal(updates.length, 2);
    assert.deepEqual(
      updates[1].details.permissions,
      { from: ['audit.read'], to: ['iam.principals.read'] },
      'oldest: the permission change',
    );
    assert.deepEqual(updates[0].details.description, { from: 'reads principals', to: null });
  } finally {
    await t.close();
  }
});

test('built-in roles cannot be changed or deleted (409); an unknown role is 404; bad bodies are 400', async () => {
  const t = await inProcessCell();
  try {
    for (const name of ['owner', 'admin', 'viewer', 'agent']) {
      const p = await t.request('PATCH', `${A}/roles/${name}`, { token: t.adminKey, body: { permissions: ['audit.read'] } });
      assert.equal(p.status, 409, name);
      assert.equal(p.body.details.reason, 'builtin_role');
      const d = await t.request('DELETE', `${A}/roles/${name}`, { token: t.adminKey });
      assert.equal(d.status, 409);
      assert.equal(d.body.details.reason, 'builtin_role');
    }
    // Names of Object.prototype are not built-in roles (they used to crash role lookups with a 500).
    for (const name of ['nope', 'constructor', 'tostring']) {
      assert.equal((await t.request('PATCH', `${A}/roles/${name}`, { token: t.adminKey, body: { description: 'x' } })).status, 404, name);
      assert.equal((await t.request('DELETE', `${A}/roles/${name}`, { token: t.adminKey })).status, 404, name);
    }
    const ctor = await t.request('POST', `${A}/principals`, {
      token: t.adminKey,
      body: { kind: 'service', name: 'c', roles: ['constructor'] },
    });
    assert.equal(ctor.status, 400, ctor.text);
    assert.equal(ctor.body.details.reason, 'unknown_role');
    const made = await t.request('POST', `${A}/roles`, { token: t.adminKey, body: { name: 'constructor', permissions: ['audit.read'] } });
    assert.equal(made.status, 201, 'a custom role may be called constructor');

    await role(t, 'r1', ['audit.read']);
    for (const body of [
      {},
      { permissions: [] },
      { permissions: ['NOT A SELECTOR'] },
      { name: 'r2' },
      { permissions: ['audit.read'], extra: 1 },
    ]) {
      const r = await t.request('PATCH', `${A}/roles/r1`, { token: t.adminKey, body });
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(r.body.error, 'invalid_request');
    }
    assert.equal((await t.request('PATCH', `${A}/roles/Bad%20Name`, { token: t.adminKey, body: { description: 'x' } })).status, 400);
  } finally {
    await t.close();
  }
});

test('containment: an update may not give a role more than the caller holds, nor change one wider than the caller', async () => {
  const t = await inProcessCell();
  try {
    const mgr = await actor(t, { name: 'mgr', permissions: ['iam.roles', 'audit.read', 'iam.principals.read'] });
    await role(t, 'narrow', ['audit.read']);
    await role(t, 'wide', ['audit.read', 'iam.keys']);

    const widen = await t.request('PATCH', `${A}/roles/narrow`, {
      token: mgr.key,
      body: { permissions: ['audit.read', 'iam.keys.write'] },
    });
    assert.equal(widen.status, 403, widen.text);
    assert.equal(widen.body.details.reason, 'wider_than_caller');
    assert.deepEqual(widen.body.details.exceeds.permissions, ['iam.keys.write']);
    // A role wider than the caller cannot be narrowed by it either (no locking out its holders).
    const narrowing = await t.request('PATCH', `${A}/roles/wide`, { token: mgr.key, body: { permissions: ['audit.read'] } });
    assert.equal(narrowing.status, 403);
    assert.equal(narrowing.body.details.reason, 'wider_than_caller');
    const del = await t.request('DELETE', `${A}/roles/wide`, { token: mgr.key });
    assert.equal(del.status, 403);
    const roles = (await t.request('GET', `${A}/roles`, { token: t.adminKey })).body.roles;
    assert.deepEqual(roles.find((r: { name: string }) => r.name === 'narrow').permissions, ['audit.read'], 'nothing written');
    assert.deepEqual(roles.find((r: { name: string }) => r.name === 'wide').permissions, ['audit.read', 'iam.keys']);
    const refusals = await t.request('GET', `${A}/audit?actor=${mgr.id}`, { token: t.adminKey });
    assert.deepEqual(
      refusals.body.entries
        .filter((e: { outcome: string }) => e.outcome === 'refused')
        .map((e: { action: string }) => e.action)
        .sort(),
      ['role.delete', 'role.update', 'role.update'],
    );

    // Within the caller: accepted.
    const ok = await t.request('PATCH', `${A}/roles/narrow`, {
      token: mgr.key,
      body: { permissions: ['audit.read', 'iam.principals.read'] },
    });
    assert.equal(ok.status, 200, ok.text);
    // A key of a wide principal narrowed by scopes is judged by what the key holds.
    const scoped = await actor(t, { name: 'scoped', roles: ['admin'], scopes: ['iam.roles'] });
    const s = await t.request('PATCH', `${A}/roles/narrow`, { token: scoped.key, body: { description: 'x' } });
    assert.equal(s.status, 403, 'the role grants audit.read, which the scoped key does not hold');
    // Without iam.roles.write: the permission gate.
    const viewer = await actor(t, { name: 'v', roles: ['viewer'] });
    assert.equal((await t.request('PATCH', `${A}/roles/narrow`, { token: viewer.key, body: { description: 'x' } })).status, 403);
    assert.equal((await t.request('DELETE', `${A}/roles/narrow`, { token: viewer.key })).status, 403);
    assert.equal((await t.request('DELETE', `${A}/roles/narrow`)).status, 401);
  } finally {
    await t.close();
  }
});

test('DELETE a custom role: refused while assigned (active, archived or deleted holders named), then gone', async () => {
  const t = await inProcessCell();
  try {
    await role(t, 'ops', ['audit.read']);
    const a = await service(t, 'ops-a', ['ops']);
    const b = await service(t, 'ops-b', ['ops', 'viewer']);
    assert.equal((await t.request('POST', `${A}/principals/${b.id}/archive`, { token: t.adminKey })).status, 200);

    const r = await t.request('DELETE', `${A}/roles/ops`, { token: t.adminKey });
    assert.equal(r.status, 409, r.text);
    assert.equal(r.body.details.reason, 'role_assigned');
    assert.equal(r.body.details.assigned, 2);
    assert.deepEqual(r.body.details.principals.sort(), [a.id, b.id].sort());

    // Take it from both (the archived one is restored first: only active principals are changed), then delete.
    assert.equal((await t.request('PATCH', `${A}/principals/${a.id}`, { token: t.adminKey, body: { roles: [] } })).status, 200);
    assert.equal((await t.request('POST', `${A}/principals/${b.id}/restore`, { token: t.adminKey })).status, 200);
    assert.equal((await t.request('PATCH', `${A}/principals/${b.id}`, { token: t.adminKey, body: { roles: ['viewer'] } })).status, 200);
    const ok = await t.request('DELETE', `${A}/roles/ops`, { token: t.adminKey });
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual(ok.body, { name: 'ops', permissions: ['audit.read'], builtin: false, description: null });
    assert.ok(!(await t.request('GET', `${A}/roles`, { token: t.adminKey })).body.roles.some((x: { name: string }) => x.name === 'ops'));
    assert.equal((await t.request('DELETE', `${A}/roles/ops`, { token: t.adminKey })).status, 404, 'already gone');
    const again = await t.request('POST', `${A}/principals`, {
      token: t.adminKey,
      body: { kind: 'service', name: 'late', roles: ['ops'] },
    });
    assert.equal(again.status, 400);
    assert.equal(again.body.details.reason, 'unknown_role');
    // A role of a purged principal does not hold the role back.
    await role(t, 'gone', ['audit.read']);
    const c = await service(t, 'gone-c', ['gone']);
    assert.equal((await t.request('POST', `${A}/principals/${c.id}/purge`, { token: t.adminKey })).status, 200);
    assert.equal((await t.request('DELETE', `${A}/roles/gone`, { token: t.adminKey })).status, 200);
  } finally {
    await t.close();
  }
});
