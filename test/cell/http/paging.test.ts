// Paging of every list (cell/http/openapi.ts: pageQuery, listSchema, pageOf, slicePage): `limit`
// and `offset` with a default and a ceiling per endpoint, `total` in every answer, and 400 for a
// value that is not a decimal integer in range. Over HTTP (app.request) on both engines.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';

const A = '/api/public/v1/admin';

let t: InProcess;
before(async () => {
  t = await inProcessCell();
});
after(async () => {
  await t.close();
});

test('pageQuery: limit and offset are decimal integers in range, anything else is 400 naming the parameter', async () => {
  const bad: [string, string][] = [
    ['limit=0', 'limit'],
    ['limit=1001', 'limit'],
    ['limit=-1', 'limit'],
    ['limit=abc', 'limit'],
    ['limit=1.5', 'limit'],
    ['limit=0x10', 'limit'],
    ['limit=1e2', 'limit'],
    ['limit=', 'limit'],
    ['limit=%205', 'limit'],
    ['offset=-1', 'offset'],
    ['offset=', 'offset'],
    ['offset=1e3', 'offset'],
    ['offset=1000000001', 'offset'],
  ];
  for (const [q, param] of bad) {
    const r = await t.request('GET', `${A}/principals?${q}`, { token: t.adminKey });
    assert.equal(r.status, 400, q);
    assert.equal(r.body.error, 'invalid_request', q);
    assert.deepEqual(
      r.body.details.issues.map((i: { path: string }) => i.path),
      [param],
      q,
    );
  }
  const ok = await t.request('GET', `${A}/principals?limit=1000&offset=0`, { token: t.adminKey });
  assert.equal(ok.status, 200);
  assert.deepEqual([ok.body.limit, ok.body.offset, ok.body.total], [1000, 0, 1]);
  const dflt = await t.request('GET', `${A}/principals`, { token: t.adminKey });
  assert.deepEqual([dflt.body.limit, dflt.body.offset], [100, 0]);
});

test('pageQuery: the document states each default and ceiling', async () => {
  const doc = (await t.request('GET', '/api/public/v1/openapi.json')).body;
  const params = doc.paths[`${A}/principals`].get.parameters as { name: string; schema: Record<string, unknown> }[];
  const limit = params.find((p) => p.name === 'limit')!.schema;
  const offset = params.find((p) => p.name === 'offset')!.schema;
  assert.deepEqual([limit['type'], limit['minimum'], limit['maximum'], limit['default']], ['integer', 1, 1000, 100]);
  assert.deepEqual([offset['type'], offset['minimum'], offset['default']], ['integer', 0, 0]);
});
