// The route layer's two refusals (issue 25): a wrong method on a known path is
// 405 with `Allow` in the envelope; a query parameter the route does not
// declare is 400 naming it; limit=0 and offset=-1 say the allowed range.
// Walks every served operation of the document for the 405 and the query gate.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';

let cell: InProcess;
before(async () => {
  cell = await inProcessCell();
});
after(() => cell?.close());

const P = '/api/public/v1/admin';

test('a wrong method on a known path: 405, Allow, the envelope', async () => {
  const r = await cell.request('DELETE', `${P}/principals`, { token: cell.adminKey });
  assert.equal(r.status, 405);
  assert.equal(r.headers.get('allow'), 'GET, HEAD, POST');
  assert.deepEqual(r.body, {
    error: 'method_not_allowed',
    message: 'DELETE is not served on this path; it serves GET, HEAD, POST',
    details: { reason: 'method_not_allowed', allowed: ['GET', 'HEAD', 'POST'] },
  });
  assert.ok(r.headers.get('x-ratelimit-remaining'));
  // With a path parameter.
  const p = await cell.request('PUT', `${P}/principals/usr_nope/archive`, { token: cell.adminKey });
  assert.equal(p.status, 405);
  assert.equal(p.headers.get('allow'), 'POST');
  // An unknown path stays 404; no credential stays 401 (nothing learned before authentication).
  assert.equal((await cell.request('DELETE', `${P}/no-such-thing`, { token: cell.adminKey })).status, 404);
  assert.equal((await cell.request('DELETE', `${P}/principals`)).status, 401);
});

test('every served operation: another method on its path is 405 naming it in Allow, never 404 or 5xx', async () => {
  const doc = (await cell.request('GET', '/api/public/v1/openapi.json')).body as { paths: Record<string, Record<string, unknown>> };
  let checked = 0;
  for (const [path, item] of Object.entries(doc.paths)) {
    const methods = Object.keys(item).filter((m) => ['get', 'put', 'post', 'delete', 'patch'].includes(m));
    const other = ['PATCH', 'PUT', 'DELETE', 'POST'].find((m) => !methods.includes(m.toLowerCase()));
    if (!other) continue;
    const concrete = path.replace(/\{[^}]+\}/g, 'x_1');
    const r = await cell.request(other, concrete, { token: cell.adminKey });
    assert.equal(r.status, 405, `${other} ${concrete}: ${r.text}`);
    for (const m of methods) assert.ok(r.headers.get('allow')!.split(', ').includes(m.toUpperCase()), `${path} allows ${m}`);
    checked++;
  }
  assert.ok(checked > 50, `checked ${checked}`);
});

test('an unknown query parameter is 400 naming it (never its value); declared ones pass', async () => {
  const r = await cell.request('GET', `${P}/principals?limit=2&colour=blue&size=9`, { token: cell.adminKey });
  assert.equal(r.status, 400);
  assert.equal(r.body.error, 'invalid_request');
  assert.equal(r.body.details.reason, 'unknown_query_parameter');
  assert.deepEqual(r.body.details.parameters, ['colour', 'size']);
  assert.deepEqual(r.body.details.allowed, ['kind', 'limit', 'offset']);
  assert.ok(!r.text.includes('blue'));
  assert.equal((await cell.request('GET', `${P}/principals?limit=2&kind=user`, { token: cell.adminKey })).status, 200);
  // A route that declares no query at all.
  const w = await cell.request('GET', `${P}/whoami?x=1`, { token: cell.adminKey });
  assert.equal(w.status, 400);
  assert.deepEqual(w.body.details.parameters, ['x']);
  // OAuth endpoints ignore what they do not know (RFC 6749 §3.1): not judged here.
  assert.notEqual((await cell.request('GET', '/.well-known/oauth-authorization-server?x=1')).status, 400);
});

test('limit=0 and offset=-1 say the allowed range', async () => {
  const l = await cell.request('GET', `${P}/principals?limit=0`, { token: cell.adminKey });
  assert.equal(l.status, 400);
  assert.deepEqual(l.body.details.issues, [{ path: 'limit', code: 'too_small', message: 'must be a decimal integer from 1 to 1000' }]);
  const o = await cell.request('GET', `${P}/principals?offset=-1`, { token: cell.adminKey });
  assert.equal(o.status, 400);
  assert.equal(o.body.details.issues[0].path, 'offset');
  assert.equal(o.body.details.issues[0].message, 'must be a decimal integer from 0 to 1000000000');
});
