// A key whose scopes lie outside its owner's roles (issue 25): minted (201,
// a role may be granted later) with `effective_permissions` (what it grants
// now) and a `scopes_outside_owner_roles` warning naming those scopes; and it
// grants nothing there when used.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';

let t: InProcess;
let svc: string;
before(async () => {
  t = await inProcessCell();
  const p = await t.request('POST', '/api/public/v1/admin/principals', {
    token: t.adminKey,
    body: { kind: 'service', name: 'jobs-only', roles: ['jobs'] },
  });
  assert.equal(p.status, 201, p.text);
  svc = p.body.id;
});
after(() => t?.close());

const mint = (scopes: string[]) =>
  t.request('POST', '/api/public/v1/admin/api-keys', { token: t.adminKey, body: { name: `k-${scopes.length}`, owner_id: svc, scopes } });

test('scopes within the roles: effective_permissions, no warning', async () => {
  const r = await mint(['system.orchestration.admin.read']);
  assert.equal(r.status, 201, r.text);
  assert.deepEqual(r.body.effective_permissions, ['system.orchestration.admin.read']);
  assert.deepEqual(r.body.warnings, []);
});

test('a scope outside the roles: 201, named in warnings, absent from effective_permissions, grants nothing', async () => {
  const r = await mint(['system.orchestration.admin.read', 'system.iam.admin.read']);
  assert.equal(r.status, 201, r.text);
  assert.deepEqual(r.body.effective_permissions, ['system.orchestration.admin.read']);
  assert.equal(r.body.warnings.length, 1);
  assert.equal(r.body.warnings[0].code, 'scopes_outside_owner_roles');
  assert.deepEqual(r.body.warnings[0].scopes, ['system.iam.admin.read']);
  const use = await t.request('GET', '/api/public/v1/admin/principals', { token: r.body.secret });
  assert.ok(use.status === 403 || use.status === 404, String(use.status));
  assert.equal((await t.request('GET', '/api/public/v1/admin/jobs/runs', { token: r.body.secret })).status, 200);
});

test('only scopes outside: effective_permissions empty, every scope named', async () => {
  const r = await mint(['system.iam.admin.read']);
  assert.equal(r.status, 201);
  assert.deepEqual(r.body.effective_permissions, []);
  assert.deepEqual(r.body.warnings[0].scopes, ['system.iam.admin.read']);
});
