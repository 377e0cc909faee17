// Deny by default: every operation under /api/public/v1 (the discovery
// documents aside) refuses a valid credential that holds no relevant
// permission, and refuses no credential at all, whatever the method, path
// or body. A route that forgot its permission check fails here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PUBLIC_API_PATHS } from '../../../cell/app.ts';
import { inProcessCell } from '../../helpers/inproc.ts';

/** Routes anyone authenticated may call by design, with the reason. */
const OPEN_TO_ANY_CREDENTIAL = new Map<string, string>([
  ['POST /api/public/v1/jobs/endpoints/:endpoint_id/invoke', "checks the published endpoint's own required scopes (test/cell/jobs)"],
  [
    'GET /api/public/v1/admin/whoami',
    'the caller reads what its own credential already holds, nothing more (test/cell/iam/whoami.test.ts)',
  ],
]);

test('a key with no relevant permission is refused on every protected route; no key is 401', async () => {
  const t = await inProcessCell({ config: { rate: { capacity: 1e9, refillPerSecond: 1e9 } } });
  try {
    const role = await t.request('POST', '/api/public/v1/admin/roles', {
      token: t.adminKey,
      body: { name: 'unrelated', permissions: ['unrelated.thing'] },
    });
    assert.equal(role.status, 201, role.text);
    const svc = await t.request('POST', '/api/public/v1/admin/principals', {
      token: t.adminKey,
      body: { kind: 'service', name: 'nobody', roles: ['unrelated'] },
    });
    const key = await t.request('POST', '/api/public/v1/admin/api-keys', {
      token: t.adminKey,
      body: { name: 'nobody', owner_id: svc.body.id },
    });
    assert.equal(key.status, 201, key.text);
    const seen = new Set<string>();
    let checked = 0;
    for (const r of t.app.routes) {
      if (r.method === 'ALL' || !r.path.startsWith('/api/public/v1/') || r.path.includes('*')) continue;
      if (PUBLIC_API_PATHS.some((p) => r.path === p || r.path.startsWith(p + '/'))) continue;
      const id = `${r.method} ${r.path}`;
      if (seen.has(id) || OPEN_TO_ANY_CREDENTIAL.has(id)) continue;
      seen.add(id);
      const path = r.path.replace(/:[A-Za-z_]+/g, 'x_00000000000000000000');
      const body = r.method === 'GET' || r.method === 'HEAD' ? {} : { body: {} };
      const anon = await t.request(r.method, path, body);
      assert.equal(anon.status, 401, `${id} without a credential -> ${anon.status} ${anon.text.slice(0, 200)}`);
      // The authorization gate runs before validation and lookup: 403, never 400 or 404.
      const res = await t.request(r.method, path, { token: key.body.secret, ...body });
      assert.equal(res.status, 403, `${id} with a key holding no relevant permission -> ${res.status} ${res.text.slice(0, 200)}`);
      checked++;
    }
    assert.ok(checked >= 40, `expected many protected routes, checked ${checked}`);
  } finally {
    await t.close();
  }
});
