/**
 * The cell and the edge answer the gateway's shared refusals from the same
 * helpers (runtime/gateway.ts): a body the framework cannot take is 400
 * invalid_request with reason `malformed_request` at both (the edge said
 * `malformed_body` before), a path no route serves is the same 404, a 401
 * carries the same bearer-or-DPoP challenge (the host's realm, core's DPoP
 * algorithms), and the client address is compared without the IPv4-mapped prefix.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { validator } from 'hono/validator';
import { DPOP_ALGS } from '../../core/tokens/dpop.ts';
import { emptyDeviceState } from '../../bundles/accept.ts';
import { clientIp, createEdgeApp } from '../../edge/gateway.ts';
import { authChallenge, normalizeIp } from '../../runtime/gateway.ts';
import { inProcessCell } from '../helpers/inproc.ts';

const A = '/api/public/v1/admin';

function edge() {
  return createEdgeApp(
    {
      deviceId: 'd',
      cellId: 'c',
      region: 'local',
      clock: { now: () => 1000 },
      state: emptyDeviceState('d'),
      keys: null,
      rate: { capacity: 100, refillPerSecond: 100 },
      info: {},
    },
    // A route that parses its JSON body through the framework, as the edge's routes with a body do.
    (app) => {
      app.post(
        '/probe',
        validator('json', (v) => v),
        (c) => c.json({ ok: true }),
      );
    },
  );
}

test('cell and edge: malformed body, not found and the 401 challenge from one helper', async () => {
  const t = await inProcessCell();
  try {
    const e = edge();
    const cellMalformed = await t.request('POST', `${A}/principals`, { token: t.adminKey, rawBody: '{"kind":' });
    assert.equal(cellMalformed.status, 400, cellMalformed.text);
    const edgeMalformed = await e.request('/probe', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"kind":' });
    assert.equal(edgeMalformed.status, 400);
    const edgeBody = (await edgeMalformed.json()) as { error: string; message: string; details: { reason: string } };
    assert.equal(edgeBody.details.reason, 'malformed_request');
    assert.deepEqual(
      { error: edgeBody.error, message: edgeBody.message, details: edgeBody.details },
      { error: cellMalformed.body.error, message: cellMalformed.body.message, details: cellMalformed.body.details },
    );

    const cellMissing = await t.request('GET', '/no/such/path');
    const edgeMissing = await e.request('/no/such/path');
    assert.equal(cellMissing.status, 404);
    assert.equal(edgeMissing.status, 404);
    assert.deepEqual(await edgeMissing.json(), cellMissing.body);

    const cellAnonymous = await t.request('GET', `${A}/principals`);
    assert.equal(cellAnonymous.status, 401);
    assert.equal(
      cellAnonymous.headers.get('www-authenticate'),
      authChallenge('cell', `${t.modules.oauth.api.publicBase()}/.well-known/oauth-protected-resource/api/public/v1`),
    );
    const edgeAnonymous = await e.request('/api/public/v1/edge/status');
    assert.equal(edgeAnonymous.status, 401);
    const edgeMeta = new URL('/.well-known/oauth-protected-resource', edgeAnonymous.url || 'http://localhost/').href;
    assert.equal(edgeAnonymous.headers.get('www-authenticate'), authChallenge('edge', edgeMeta));
    assert.equal(authChallenge('edge'), `Bearer realm="edge", DPoP algs="${DPOP_ALGS.join(' ')}"`);
    assert.equal(
      authChallenge('edge', 'https://d/m'),
      `Bearer realm="edge", resource_metadata="https://d/m", DPoP algs="${DPOP_ALGS.join(' ')}"`,
    );
  } finally {
    await t.close();
  }
});

test('both hosts compare a client address without the IPv4-mapped prefix', () => {
  assert.equal(normalizeIp('::ffff:10.1.2.3'), '10.1.2.3');
  assert.equal(normalizeIp('::1'), '::1');
  assert.equal(normalizeIp('::ffff:abcd'), '::ffff:abcd');
  const c = { env: { incoming: { socket: { remoteAddress: '::ffff:192.0.2.7' } } } } as unknown as Parameters<typeof clientIp>[0];
  assert.equal(clientIp(c), '192.0.2.7');
});
