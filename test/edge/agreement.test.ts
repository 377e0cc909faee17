// The cell and the edge judge the same key the same way: a table of keys x operations x client IPs,
// answered by the real cell routes (in-process) and by the edge gateway from the signed bundle alone.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inProcessCell, type InProcess } from '../helpers/inproc.ts';
import { openKeyBundle } from '../../bundles/key-bundle.ts';
import { acceptArtifact, emptyDeviceState } from '../../bundles/accept.ts';
import { generateEd25519 } from '../../bundles/_codec.ts';
import { createEdgeApp, type EdgeRuntime } from '../../edge/gateway.ts';

const A = '/api/public/v1/admin';

/** Cell operation -> the permission it requires (from the route declarations). */
const OPERATIONS: [string, string][] = [
  [`${A}/edge/devices`, 'edge.read'],
  [`${A}/api-keys`, 'iam.keys.read'],
  [`${A}/principals`, 'iam.principals.read'],
  [`${A}/ai/model-providers`, 'ai.providers.read'],
  [`${A}/ai/tool-registry`, 'catalog.read'],
  [`${A}/oauth/clients`, 'oauth.clients.read'],
];
const IPS = ['127.0.0.1', '10.1.2.3', '::1'];

async function mint(t: InProcess, body: Record<string, unknown>): Promise<{ key_id: string; secret: string }> {
  const r = await t.request('POST', `${A}/api-keys`, { token: t.adminKey, body: { name: 'k', ...body } });
  assert.equal(r.status, 201, r.text);
  return r.body;
}

test('cell and edge agree on every key x operation x client IP', async () => {
  const t = await inProcessCell();
  try {
    const viewer = await t.request('POST', `${A}/principals`, { token: t.adminKey, body: { kind: 'service', name: 'viewer-svc', roles: ['viewer'] } });
    assert.equal(viewer.status, 201, viewer.text);
    const leaver = await t.request('POST', `${A}/principals`, { token: t.adminKey, body: { kind: 'service', name: 'leaver', roles: ['admin'] } });
    const keys: Record<string, string> = { owner: t.adminKey };
    keys['scoped_edge'] = (await mint(t, { scopes: ['edge.read'] })).secret;
    keys['scoped_multi'] = (await mint(t, { scopes: ['agent_teams', 'catalog.read', 'iam.keys.read'] })).secret;
    keys['viewer_full'] = (await mint(t, { owner_id: viewer.body.id })).secret;
    keys['viewer_narrowed'] = (await mint(t, { owner_id: viewer.body.id, scopes: ['iam.keys', 'ai.providers.write'] })).secret;
    keys['ip_cidr'] = (await mint(t, { allowed_ips: ['10.0.0.0/8'] })).secret;
    keys['ip_exact_v6'] = (await mint(t, { allowed_ips: ['::1'] })).secret;
    keys['region_other'] = (await mint(t, { allowed_regions: ['eu-west'] })).secret;
    keys['region_here'] = (await mint(t, { allowed_regions: [t.cell.config.region] })).secret;
    const rev = await mint(t, {});
    await t.request('POST', `${A}/api-keys/${rev.key_id}/revoke`, { token: t.adminKey });
    keys['revoked'] = rev.secret;
    const rot = await mint(t, { scopes: ['edge'] });
    const rotated = await t.request('POST', `${A}/api-keys/${rot.key_id}/rotate`, { token: t.adminKey, body: { grace_seconds: 3600 } });
    assert.equal(rotated.status, 200, rotated.text);
    keys['rotated_old_in_grace'] = rot.secret;
    keys['rotated_new'] = rotated.body.secret;
    const gone = await mint(t, {});
    const rotGone = await t.request('POST', `${A}/api-keys/${gone.key_id}/rotate`, { token: t.adminKey, body: { grace_seconds: 0 } });
    keys['rotated_old_no_grace'] = gone.secret;
    keys['rotated_new2'] = rotGone.body.secret;
    keys['leaver'] = (await mint(t, { owner_id: leaver.body.id })).secret;
    const arch = await t.request('POST', `${A}/principals/${leaver.body.id}/archive`, { token: t.adminKey });
    assert.equal(arch.status, 200, arch.text);
    keys['rpm_2'] = (await mint(t, { rate_limit_rpm: 2 })).secret;
    keys['unknown'] = 'svck_live_' + 'x'.repeat(43);
    keys['malformed'] = 'svck_live_short';

    const dev = await generateEd25519();
    const reg = await t.request('POST', `${A}/edge/devices`, { token: t.adminKey, body: { name: 'd', public_jwk: dev.publicJwk } });
    const b = await t.request('POST', `${A}/edge/key-bundles`, { token: t.adminKey, body: { device_id: dev.kid } });
    assert.equal(b.status, 201, b.text);
    const { opened, index } = await openKeyBundle(b.text, reg.body.trust.keys);
    const state = acceptArtifact(emptyDeviceState(dev.kid), opened, { now: t.clock.now(), issuer: t.cell.config.cellId });
    const rt: EdgeRuntime = {
      deviceId: dev.kid, cellId: t.cell.config.cellId, region: t.cell.config.region, clock: t.clock, state,
      keys: { index, version: opened.payload.version, expires_at: opened.payload.expires_at, hash: opened.hash },
      rate: { capacity: 600, refillPerSecond: 100 }, info: {},
    };
    const edge = createEdgeApp(rt);

    const rows: string[] = [];
    let compared = 0;
    for (const [name, secret] of Object.entries(keys)) {
      for (const ip of IPS) {
        for (const [path, perm] of OPERATIONS) {
          const c = await t.request('GET', path, { token: secret, ip });
          const e = await edge.request(`/api/public/v1/edge/authz/${perm}`, { headers: { authorization: `Bearer ${secret}` } },
            { incoming: { socket: { remoteAddress: ip } } });
          const eb = (await e.json()) as { error?: string; details?: { reason?: string } };
          const cellAns = `${c.status} ${c.body?.error ?? 'ok'} ${c.body?.details?.reason ?? ''}`;
          const edgeAns = `${e.status} ${eb.error ?? 'ok'} ${eb.details?.reason ?? ''}`;
          compared++;
          if (cellAns !== edgeAns) rows.push(`${name} ${ip} ${perm}: cell ${cellAns} | edge ${edgeAns}`);
        }
      }
    }
    assert.deepEqual(rows, [], 'cell and edge disagree');
    assert.ok(compared >= 300);

    // The table exercised every outcome, not just one.
    const sample = async (secret: string, ip: string, perm: string) => {
      const e = await edge.request(`/api/public/v1/edge/authz/${perm}`, { headers: { authorization: `Bearer ${secret}` } }, { incoming: { socket: { remoteAddress: ip } } });
      return `${e.status} ${((await e.json()) as { details?: { reason?: string } }).details?.reason ?? ''}`;
    };
    assert.equal(await sample(keys['revoked']!, '127.0.0.1', 'edge.read'), '401 revoked');
    assert.equal(await sample(keys['rotated_old_no_grace']!, '127.0.0.1', 'edge.read'), '401 grace_elapsed');
    assert.equal(await sample(keys['ip_cidr']!, '127.0.0.1', 'edge.read'), '403 ip_not_allowed');
    assert.equal(await sample(keys['region_other']!, '127.0.0.1', 'edge.read'), '403 region_not_allowed');
    assert.equal(await sample(keys['leaver']!, '127.0.0.1', 'edge.read'), '401 revoked', 'archived owner: keys soft-deleted');
    assert.equal(await sample(keys['scoped_edge']!, '127.0.0.1', 'catalog.read'), '403 ');
    assert.equal(await sample(keys['rotated_old_in_grace']!, '127.0.0.1', 'edge.read'), '200 ');

    // After the grace window both still agree (the clock is shared).
    t.clock.advance(3600_000);
    const c = await t.request('GET', `${A}/edge/devices`, { token: keys['rotated_old_in_grace'], ip: '10.1.2.3' });
    assert.equal(`${c.status} ${c.body.details?.reason}`, '401 grace_elapsed');
    assert.equal(await sample(keys['rotated_old_in_grace']!, '10.1.2.3', 'edge.read'), '401 grace_elapsed');
  } finally {
    await t.close();
  }
});

test('without a key bundle the edge says it cannot resolve a key', async () => {
  const clock = { now: () => 1000 };
  const app = createEdgeApp({ deviceId: 'd', cellId: 'c', region: 'local', clock, state: emptyDeviceState('d'), keys: null, rate: { capacity: 10, refillPerSecond: 1 }, info: {} });
  const r = await app.request('/api/public/v1/edge/status', { headers: { authorization: 'Bearer svck_live_' + 'a'.repeat(43) } });
  assert.equal(r.status, 401);
  assert.equal(((await r.json()) as { details: { reason: string } }).details.reason, 'no_key_bundle');
  assert.ok(r.headers.get('x-ratelimit-limit'));
  const big = await app.request('/api/public/v1/edge/status', { method: 'POST', body: 'x'.repeat(2 * 1024 * 1024), headers: { 'content-length': String(2 * 1024 * 1024) } });
  assert.equal(big.status, 400);
  assert.equal(((await big.json()) as { details: { reason: string } }).details.reason, 'body_too_large');
  // The gateway budget is the first gate: once spent, 429 with Retry-After before any authentication.
  let last: Response | undefined;
  for (let i = 0; i < 12; i++) last = await app.request('/api/public/v1/edge/status');
  assert.equal(last!.status, 429);
  assert.ok(last!.headers.get('retry-after'));
});
