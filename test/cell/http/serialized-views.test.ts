// cell/http/serialized-views.ts: a view's JSON text built once per cached object answers the same
// bytes and Content-Type as c.json; it is rebuilt for another object or another dependency, never
// reused across them. Over HTTP (in process, both engines): whoami and a key by id still show a
// change the moment the cache hands back the changed row.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Hono } from 'hono';
import { SerializedViews } from '../../../cell/http/serialized-views.ts';
import { inProcessCell } from '../../helpers/inproc.ts';

const A = '/api/public/v1/admin';

test('the same bytes and Content-Type as c.json; built once per (object, dependency)', async () => {
  let built = 0;
  const views = new SerializedViews((row: { id: string; at: number }, dep: { name: string }) => {
    built++;
    return { id: row.id, name: dep.name, at: new Date(row.at).toISOString(), none: null, list: ['a', 'é"\n'] };
  });
  const row = { id: 'r1', at: Date.UTC(2026, 0, 1) };
  let dep = { name: 'one' };
  const app = new Hono();
  app.get('/views', (c) => views.answer(c, row, dep, 200));
  app.get('/json', (c) => c.json({ id: row.id, name: dep.name, at: new Date(row.at).toISOString(), none: null, list: ['a', 'é"\n'] }, 200));
  const [v, j] = [await app.request('/views'), await app.request('/json')];
  assert.equal(v.status, 200);
  assert.equal(await v.text(), await j.text());
  const headersOf = (r: Response) => {
    const out: Record<string, string> = {};
    r.headers.forEach((value, key) => {
      out[key] = value;
    });
    return out;
  };
  assert.deepEqual(headersOf(v), headersOf(j));
  await app.request('/views');
  assert.equal(built, 1, 'the second answer reused the text');
  dep = { name: 'two' };
  assert.match(await (await app.request('/views')).text(), /"two"/, 'another dependency object: rebuilt');
  assert.equal(built, 2);
  const other = { ...row, id: 'r2' };
  assert.match(views.text(other, dep), /"r2"/, 'another object: its own text');
  assert.equal(built, 3);
});

test('whoami and a key by id show a rename and a revocation at once', async () => {
  const t = await inProcessCell();
  try {
    const me = await t.request('GET', `${A}/whoami`, { token: t.adminKey });
    const owner = me.body.principal.id;
    assert.equal((await t.request('GET', `${A}/whoami`, { token: t.adminKey })).text, me.text);
    const renamed = await t.request('PATCH', `${A}/principals/${owner}`, { token: t.adminKey, body: { name: 'owner-2' } });
    assert.equal(renamed.status, 200, renamed.text);
    assert.equal((await t.request('GET', `${A}/whoami`, { token: t.adminKey })).body.principal.name, 'owner-2');

    const minted = await t.request('POST', `${A}/api-keys`, { token: t.adminKey, body: { name: 'k', scopes: ['audit.read'] } });
    const id = minted.body.key_id;
    assert.equal((await t.request('GET', `${A}/api-keys/${id}`, { token: t.adminKey })).body.status, 'active');
    assert.equal((await t.request('GET', `${A}/api-keys/${id}`, { token: t.adminKey })).body.status, 'active');
    assert.equal((await t.request('POST', `${A}/api-keys/${id}/revoke`, { token: t.adminKey })).status, 200);
    const after = await t.request('GET', `${A}/api-keys/${id}`, { token: t.adminKey });
    assert.equal(after.body.status, 'revoked');
    assert.notEqual(after.body.revoked_at, null);
  } finally {
    await t.close();
  }
});
