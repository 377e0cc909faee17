// The cell and the edge judge the same key the same way: a table of keys x operations x client IPs,
// answered by the real cell routes (in-process) and by the edge gateway from the signed bundle alone.
// And the same tool call the same way: a table of calls x authorities answered by the cell's catalog (its
// crew runs' tools port), the device's (edge/tools.ts) and the journal import's re-judging of the recorded act.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT } from 'jose';
import { inProcessCell, type InProcess } from '../helpers/inproc.ts';
import { makeTestCerts, tlsSocket } from '../helpers/certs.ts';
import { accessTokenHash } from '../../core/tokens/ath.ts';
import { openKeyBundle } from '../../bundles/key-bundle.ts';
import { acceptArtifact, emptyDeviceState } from '../../bundles/accept.ts';
import { generateEd25519 } from '../../bundles/codec.ts';
import { createEdgeApp, type EdgeRuntime } from '../../edge/gateway.ts';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { contentHash } from '../../core/canonical.ts';
import { isEngineRefusal } from '../../core/engine/refusal.ts';
import type { Graph, SeatAuthority } from '../../core/engine/types.ts';
import type { JournalRecord, JsonObject } from '../../core/journal/record.ts';
import { deviceToolsPort } from '../../edge/tools.ts';
import { unentitledAct } from '../../cell/edge/journal-acts.ts';
import { testDevice } from './_edge-fixtures.ts';

const DEVICE = await testDevice();

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
    const viewer = await t.request('POST', `${A}/principals`, {
      token: t.adminKey,
      body: { kind: 'service', name: 'viewer-svc', roles: ['viewer'] },
    });
    assert.equal(viewer.status, 201, viewer.text);
    const leaver = await t.request('POST', `${A}/principals`, {
      token: t.adminKey,
      body: { kind: 'service', name: 'leaver', roles: ['admin'] },
    });
    const keys: Record<string, string> = { owner: t.adminKey };
    keys['scoped_edge'] = (await mint(t, { scopes: ['edge.read'] })).secret;
    keys['scoped_multi'] = (await mint(t, { scopes: ['agent_teams', 'catalog.read', 'iam.keys.read'] })).secret;
    keys['viewer_full'] = (await mint(t, { owner_id: viewer.body.id })).secret;
    keys['viewer_narrowed'] = (await mint(t, { owner_id: viewer.body.id, scopes: ['iam.keys', 'ai.providers.write'] })).secret;
    keys['ip_cidr'] = (await mint(t, { allowed_ips: ['10.0.0.0/8'] })).secret;
    keys['ip_exact_v6'] = (await mint(t, { allowed_ips: ['::1'] })).secret;
    keys['region_other'] = (await mint(t, { allowed_regions: ['eu-west'] })).secret;
    keys['region_here'] = (await mint(t, { allowed_regions: [t.core.config.region] })).secret;
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
    const state = acceptArtifact(emptyDeviceState(dev.kid), opened, { now: t.clock.now(), issuer: t.core.config.cellId });
    const rt: EdgeRuntime = {
      deviceId: dev.kid,
      cellId: t.core.config.cellId,
      region: t.core.config.region,
      clock: t.clock,
      state,
      keys: { index, version: opened.payload.version, expires_at: opened.payload.expires_at, hash: opened.hash },
      rate: { capacity: 600, refillPerSecond: 100 },
      info: {},
    };
    const edge = createEdgeApp(rt);

    const rows: string[] = [];
    let compared = 0;
    for (const [name, secret] of Object.entries(keys)) {
      for (const ip of IPS) {
        for (const [path, perm] of OPERATIONS) {
          const c = await t.request('GET', path, { token: secret, ip });
          const e = await edge.request(
            `/api/public/v1/edge/authz/${perm}`,
            { headers: { authorization: `Bearer ${secret}` } },
            { incoming: { socket: { remoteAddress: ip } } },
          );
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
      const e = await edge.request(
        `/api/public/v1/edge/authz/${perm}`,
        { headers: { authorization: `Bearer ${secret}` } },
        { incoming: { socket: { remoteAddress: ip } } },
      );
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
  const app = createEdgeApp({
    deviceId: 'd',
    cellId: 'c',
    region: 'local',
    clock,
    state: emptyDeviceState('d'),
    keys: null,
    rate: { capacity: 10, refillPerSecond: 1 },
    info: {},
  });
  const r = await app.request('/api/public/v1/edge/status', { headers: { authorization: 'Bearer svck_live_' + 'a'.repeat(43) } });
  assert.equal(r.status, 401);
  assert.equal(((await r.json()) as { details: { reason: string } }).details.reason, 'no_key_bundle');
  assert.ok(r.headers.get('x-ratelimit-limit'));
  const big = await app.request('/api/public/v1/edge/status', {
    method: 'POST',
    body: 'x'.repeat(2 * 1024 * 1024),
    headers: { 'content-length': String(2 * 1024 * 1024) },
  });
  assert.equal(big.status, 400);
  assert.equal(((await big.json()) as { details: { reason: string } }).details.reason, 'body_too_large');
  // The gateway budget is the first gate: once spent, 429 with Retry-After before any authentication.
  let last: Response | undefined;
  for (let i = 0; i < 12; i++) last = await app.request('/api/public/v1/edge/status');
  assert.equal(last!.status, 429);
  assert.ok(last!.headers.get('retry-after'));
});

// --- the token axis ------------------------------------------------------------------------------
// Every row is asked twice: the real cell routes judge the token addressed to the cell (aud = its
// API), the edge gateway judges the twin token addressed to the device (aud = edge:<device_id>,
// RFC 8707 resource at /oauth/token), each with proofs and client certificates for its own URI.
// Both run core's judgeAccessToken; the answer (status, error, details.reason) must be the same.

type Side = 'cell' | 'edge';
type Kind = 'plain' | 'dpop' | 'cert' | 'both' | 'revoked' | 'leaver' | 'keyed' | 'narrow' | 'sat' | 'orphan';
interface Presentation {
  scheme?: 'Bearer' | 'DPoP';
  token: string;
  dpop?: string | string[];
  socket?: ReturnType<typeof tlsSocket>;
}

test('cell and edge agree on every access token: bindings, replay, expiry, revocation, audience, forgeries', async () => {
  const work = mkdtempSync(join(tmpdir(), 'agree-tokens-'));
  const certs = makeTestCerts(work);
  const t = await inProcessCell();
  try {
    const A_ = A;
    const post = async (path: string, body: unknown) => {
      const r = await t.request('POST', path, { token: t.adminKey, body });
      assert.ok(r.status === 200 || r.status === 201, `${path}: ${r.status} ${r.text}`);
      return r.body;
    };
    const svc = await post(`${A_}/principals`, { kind: 'service', name: 'robot-svc', roles: ['admin'] });
    const leaver = await post(`${A_}/principals`, { kind: 'service', name: 'leaver-svc', roles: ['admin'] });
    const client = await post(`${A_}/oauth/clients`, { name: 'robot', scope: ['edge.read', 'oauth.clients.read'], subject_id: svc.id });
    const leaverClient = await post(`${A_}/oauth/clients`, {
      name: 'leaver',
      scope: ['edge.read', 'oauth.clients.read'],
      subject_id: leaver.id,
    });
    const doomedClient = await post(`${A_}/oauth/clients`, { name: 'doomed', scope: ['edge.read'], subject_id: svc.id });
    const dev = await generateEd25519();
    const reg = await post(`${A_}/edge/devices`, { name: 'd', public_jwk: dev.publicJwk });
    const other = await generateEd25519();
    await post(`${A_}/edge/devices`, { name: 'other', public_jwk: other.publicJwk });
    const EDGE_AUD = `edge:${dev.kid}`;
    const k1 = await dpopKey();
    const k2 = await dpopKey();
    const cellBase = t.modules.oauth.api.publicBase();

    const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;
    async function obtain(o: {
      client?: { client_id: string; client_secret: string };
      basicAuth?: string;
      resource?: string;
      dpop?: boolean;
      cert?: boolean;
      scope?: string;
    }): Promise<string> {
      const c = o.client ?? client;
      const headers: Record<string, string> = {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: o.basicAuth ?? basic(c.client_id, c.client_secret),
      };
      if (o.dpop) headers['dpop'] = await proofFor(k1, 'POST', `${cellBase}/oauth/token`, t.clock.now());
      const fields: Record<string, string> = {
        grant_type: 'client_credentials',
        ...(o.scope ? { scope: o.scope } : {}),
        ...(o.resource ? { resource: o.resource } : {}),
      };
      const socket = o.cert ? tlsSocket(certs.der('robot'), true) : { remoteAddress: '127.0.0.1' };
      const r = await t.app.request('/oauth/token', { method: 'POST', headers, body: new URLSearchParams(fields).toString() }, {
        incoming: { socket },
      } as never);
      const b = (await r.json()) as { access_token?: string };
      assert.equal(r.status, 200, JSON.stringify(b));
      return b.access_token!;
    }
    /** The twin tokens of a kind: [addressed to the cell, addressed to the device]. */
    const tokens = {} as Record<Kind, Record<Side, string>>;
    const both = async (kind: Kind, o: Parameters<typeof obtain>[0] = {}) => {
      tokens[kind] = { cell: await obtain(o), edge: await obtain({ ...o, resource: EDGE_AUD }) };
    };
    await both('plain');
    await both('dpop', { dpop: true });
    await both('cert', { cert: true });
    await both('both', { dpop: true, cert: true });
    await both('narrow', { scope: 'oauth.clients.read' });
    await both('revoked');
    await both('leaver', { client: leaverClient });
    await both('orphan', { client: doomedClient });
    const key = await post(`${A_}/api-keys`, { name: 'as-client', scopes: ['edge.read'] });
    await both('keyed', { basicAuth: basic(key.key_id, key.secret) });
    tokens['sat'] = {
      cell: (await post(`${A_}/sats`, { scope: ['edge.read'] })).access_token,
      edge: (await post(`${A_}/sats`, { scope: ['edge.read'], resource: EDGE_AUD })).access_token,
    };
    for (const tk of Object.values(tokens)) assert.equal(claims(tk.edge).aud, EDGE_AUD);
    assert.equal(claims(tokens.dpop.edge).cnf.jkt, k1.jkt);
    assert.equal(claims(tokens.cert.edge).cnf['x5t#S256'], certs.x5t('robot'));

    // Before the bundle: revoke one token pair, archive one subject, revoke the key one pair was obtained
    // with, delete the client one pair was issued to (the cell refuses its tokens at once).
    for (const tk of Object.values(tokens.revoked)) {
      const r = await t.request('POST', '/oauth/revoke', {
        rawBody: new URLSearchParams({ token: tk }).toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(client.client_id, client.client_secret) },
      });
      assert.equal(r.status, 200);
    }
    await post(`${A_}/principals/${leaver.id}/archive`, {});
    await post(`${A_}/api-keys/${key.key_id}/revoke`, {});
    const del = await t.request('DELETE', `${A_}/oauth/clients/${doomedClient.client_id}`, { token: t.adminKey });
    assert.equal(del.status, 200, del.text);

    const b = await t.request('POST', `${A_}/edge/key-bundles`, { token: t.adminKey, body: { device_id: dev.kid } });
    assert.equal(b.status, 201, b.text);
    const { opened, index } = await openKeyBundle(b.text, reg.trust.keys);
    assert.equal(opened.payload.format_version, 4);
    assert.ok(opened.payload.tokens?.clients?.includes(client.client_id), 'a live client is listed');
    assert.ok(!opened.payload.tokens?.clients?.includes(doomedClient.client_id), 'a deleted client is not');
    const state = acceptArtifact(emptyDeviceState(dev.kid), opened, { now: t.clock.now(), issuer: t.core.config.cellId });
    const edge = createEdgeApp({
      deviceId: dev.kid,
      cellId: t.core.config.cellId,
      region: t.core.config.region,
      clock: t.clock,
      state,
      keys: { index, version: opened.payload.version, expires_at: opened.payload.expires_at, hash: opened.hash },
      rate: { capacity: 100_000, refillPerSecond: 100_000 },
      info: {},
      clientCa: true,
    });

    // Foreign tokens: another cell's (its own keys and issuer), and forgeries with this cell's key.
    const foreignCell = await inProcessCell({ config: { cellId: 'cell-foreign' } });
    const foreign = { cell: '', edge: '' };
    try {
      const fc = await foreignCell.request('POST', `${A_}/sats`, { token: foreignCell.adminKey, body: { scope: ['edge.read'] } });
      foreign.cell = foreign.edge = fc.body.access_token;
    } finally {
      await foreignCell.close();
    }
    const ring = t.modules.oauth.api.keyring();
    const forge = async (over: Record<string, unknown>, aud: string) =>
      new SignJWT({ ...claims(tokens.plain.cell), aud, ...over })
        .setProtectedHeader({ alg: 'EdDSA', typ: 'at+jwt', kid: ring.active.kid })
        .sign(ring.active.key);
    const pub = ring.published.find((k) => k.kid === ring.active.kid)!;
    const unsigned = (aud: string) =>
      `${b64j({ alg: 'none', typ: 'at+jwt', kid: pub.kid })}.${b64j({ ...claims(tokens.plain.cell), aud })}.`;
    const hs256 = async (aud: string) =>
      new SignJWT({ ...claims(tokens.plain.cell), aud })
        .setProtectedHeader({ alg: 'HS256', typ: 'at+jwt', kid: pub.kid })
        .sign(new TextEncoder().encode(JSON.stringify(pub)));
    const cellAud = `${cellBase}/api/public/v1`;
    const forged = {
      issuer: {
        cell: await forge({ iss: 'service://cell-foreign' }, cellAud),
        edge: await forge({ iss: 'service://cell-foreign' }, EDGE_AUD),
      },
      none: { cell: unsigned(cellAud), edge: unsigned(EDGE_AUD) },
      hs256: { cell: await hs256(cellAud), edge: await hs256(EDGE_AUD) },
      other_device: { cell: tokens.plain.edge, edge: await obtain({ resource: `edge:${other.kid}` }) },
    };

    // Each side: the path of an operation needing edge.read, its own URI for proofs, its token of a kind.
    const sides: Record<Side, { path: string; uri: (p: string) => string; send(p: Presentation): Promise<string> }> = {
      cell: {
        path: `${A_}/edge/devices`,
        uri: (p) => cellBase + p,
        async send(p) {
          return answer(
            await t.app.request(`${A_}/edge/devices`, { headers: headersOf(p) }, {
              incoming: { socket: p.socket ?? { remoteAddress: '127.0.0.1' } },
            } as never),
          );
        },
      },
      edge: {
        path: '/api/public/v1/edge/authz/edge.read',
        uri: (p) => `http://localhost${p}`,
        async send(p) {
          return answer(
            await edge.request(
              '/api/public/v1/edge/authz/edge.read',
              { headers: headersOf(p) },
              { incoming: { socket: p.socket ?? { remoteAddress: '127.0.0.1' } } },
            ),
          );
        },
      },
    };
    const now = () => t.clock.now();
    const ath = (tk: string) => accessTokenHash(tk);
    const robot = () => tlsSocket(certs.der('robot'), true);
    type Row = [name: string, expected: string, present: (s: Side) => Promise<Presentation | Presentation[]>];
    const proof = async (s: Side, tk: string, o: { key?: DpopKey; htm?: string; path?: string; iat?: number; noAth?: boolean } = {}) =>
      proofFor(o.key ?? k1, o.htm ?? 'GET', sides[s].uri(o.path ?? sides[s].path), o.iat ?? now(), o.noAth ? undefined : await ath(tk));
    const rows: Row[] = [
      ['plain bearer', '200 ok', async (s) => ({ token: tokens.plain[s] })],
      ['plain bearer, scope without the permission', '403 forbidden', async (s) => ({ token: tokens.narrow[s] })],
      ['SAT', '200 ok', async (s) => ({ token: tokens.sat[s] })],
      [
        'plain token with the DPoP scheme',
        '401 unauthorized dpop_invalid',
        async (s) => ({ scheme: 'DPoP', token: tokens.plain[s], dpop: await proof(s, tokens.plain[s]) }),
      ],
      ['DPoP-bound, good proof', '200 ok', async (s) => ({ scheme: 'DPoP', token: tokens.dpop[s], dpop: await proof(s, tokens.dpop[s]) })],
      [
        'DPoP-bound, replayed proof',
        '401 unauthorized dpop_replay',
        async (s) => {
          const p = await proof(s, tokens.dpop[s]);
          return [
            { scheme: 'DPoP', token: tokens.dpop[s], dpop: p },
            { scheme: 'DPoP', token: tokens.dpop[s], dpop: p },
          ];
        },
      ],
      [
        'DPoP-bound, proof for another method',
        '401 unauthorized dpop_htm_mismatch',
        async (s) => ({ scheme: 'DPoP', token: tokens.dpop[s], dpop: await proof(s, tokens.dpop[s], { htm: 'POST' }) }),
      ],
      [
        'DPoP-bound, proof for another URI',
        '401 unauthorized dpop_htu_mismatch',
        async (s) => ({ scheme: 'DPoP', token: tokens.dpop[s], dpop: await proof(s, tokens.dpop[s], { path: '/api/public/v1/other' }) }),
      ],
      [
        'DPoP-bound, proof with the wrong key',
        '401 unauthorized dpop_key_mismatch',
        async (s) => ({ scheme: 'DPoP', token: tokens.dpop[s], dpop: await proof(s, tokens.dpop[s], { key: k2 }) }),
      ],
      [
        'DPoP-bound, stale proof',
        '401 unauthorized dpop_stale',
        async (s) => ({ scheme: 'DPoP', token: tokens.dpop[s], dpop: await proof(s, tokens.dpop[s], { iat: now() - 120_000 }) }),
      ],
      [
        'DPoP-bound, proof without ath',
        '401 unauthorized dpop_ath_mismatch',
        async (s) => ({ scheme: 'DPoP', token: tokens.dpop[s], dpop: await proof(s, tokens.dpop[s], { noAth: true }) }),
      ],
      [
        'DPoP-bound, two DPoP headers',
        '401 unauthorized dpop_invalid',
        async (s) => ({ scheme: 'DPoP', token: tokens.dpop[s], dpop: [await proof(s, tokens.dpop[s]), await proof(s, tokens.dpop[s])] }),
      ],
      ['DPoP-bound, no proof', '401 unauthorized dpop_required', async (s) => ({ scheme: 'DPoP', token: tokens.dpop[s] })],
      [
        'DPoP-bound, Bearer scheme',
        '401 unauthorized dpop_required',
        async (s) => ({ token: tokens.dpop[s], dpop: await proof(s, tokens.dpop[s]) }),
      ],
      ['cert-bound, right leaf', '200 ok', async (s) => ({ token: tokens.cert[s], socket: robot() })],
      ['cert-bound, no leaf', '401 unauthorized cert_required', async (s) => ({ token: tokens.cert[s] })],
      [
        'cert-bound, another leaf',
        '401 unauthorized cert_mismatch',
        async (s) => ({ token: tokens.cert[s], socket: tlsSocket(certs.der('intruder'), true) }),
      ],
      [
        'cert-bound, the right leaf not verified by the CA',
        '401 unauthorized cert_required',
        async (s) => ({ token: tokens.cert[s], socket: tlsSocket(certs.der('robot'), false) }),
      ],
      [
        'both bindings, both hold',
        '200 ok',
        async (s) => ({ scheme: 'DPoP', token: tokens.both[s], dpop: await proof(s, tokens.both[s]), socket: robot() }),
      ],
      [
        'both bindings, no leaf',
        '401 unauthorized cert_required',
        async (s) => ({ scheme: 'DPoP', token: tokens.both[s], dpop: await proof(s, tokens.both[s]) }),
      ],
      [
        'both bindings, no proof',
        '401 unauthorized dpop_required',
        async (s) => ({ scheme: 'DPoP', token: tokens.both[s], socket: robot() }),
      ],
      ['revoked before the bundle', '401 unauthorized revoked', async (s) => ({ token: tokens.revoked[s] })],
      ['owner archived before the bundle', '401 unauthorized revoked', async (s) => ({ token: tokens.leaver[s] })],
      ['obtained with an API key revoked before the bundle', '401 unauthorized revoked', async (s) => ({ token: tokens.keyed[s] })],
      ['issued to a client deleted before the bundle', '401 unauthorized revoked', async (s) => ({ token: tokens.orphan[s] })],
      [
        "wrong audience (the other side's token)",
        '401 unauthorized bad_audience',
        async (s) => ({ token: tokens.plain[s === 'cell' ? 'edge' : 'cell'] }),
      ],
      ['addressed to another device', '401 unauthorized bad_audience', async (s) => ({ token: forged.other_device[s] })],
      ['foreign cell', '401 unauthorized bad_signature', async (s) => ({ token: foreign[s] })],
      ["foreign issuer, this cell's key", '401 unauthorized bad_issuer', async (s) => ({ token: forged.issuer[s] })],
      ['alg none', '401 unauthorized bad_alg', async (s) => ({ token: forged.none[s] })],
      ['HS256 keyed with the public key', '401 unauthorized bad_alg', async (s) => ({ token: forged.hs256[s] })],
      ['not a JWT and not a key', '401 unauthorized', async () => ({ token: 'abc.def' })],
    ];

    const disagreements: string[] = [];
    const wrong: string[] = [];
    const run = async (rowsToRun: Row[]) => {
      for (const [name, expected, present] of rowsToRun) {
        const got: Record<Side, string> = { cell: '', edge: '' };
        for (const s of ['cell', 'edge'] as const) {
          const ps = await present(s);
          for (const p of Array.isArray(ps) ? ps : [ps]) got[s] = await sides[s].send(p);
        }
        if (got.cell !== got.edge) disagreements.push(`${name}: cell ${got.cell} | edge ${got.edge}`);
        if (got.edge !== expected) wrong.push(`${name}: expected ${expected}, edge ${got.edge}, cell ${got.cell}`);
      }
    };
    await run(rows);
    // Ten minutes and a second later every token has expired, on both sides alike.
    t.clock.advance(601_000);
    await run([
      ['expired', '401 unauthorized expired', async (s) => ({ token: tokens.plain[s] })],
      [
        'expired, DPoP-bound with a good proof',
        '401 unauthorized expired',
        async (s) => ({ scheme: 'DPoP', token: tokens.dpop[s], dpop: await proof(s, tokens.dpop[s]) }),
      ],
    ]);
    assert.deepEqual(disagreements, [], 'cell and edge disagree');
    assert.deepEqual(wrong, [], 'unexpected answers');

    // The refusal speaks the same challenge on both sides, each pointing at its RFC 9728 metadata.
    const challenge = async (s: Side) => {
      const res =
        s === 'edge'
          ? await edge.request(sides.edge.path, { headers: { authorization: `DPoP ${tokens.dpop.edge}` } })
          : await t.app.request(sides.cell.path, { headers: { authorization: `DPoP ${tokens.dpop.cell}` } }, {
              incoming: { socket: { remoteAddress: '127.0.0.1' } },
            } as never);
      return res.headers.get('www-authenticate') ?? '';
    };
    const meta = 'resource_metadata="http://localhost/.well-known/oauth-protected-resource"';
    assert.equal(await challenge('edge'), `DPoP realm="edge", error="invalid_token", algs="EdDSA Ed25519 ES256 ES384 RS256", ${meta}`);
    assert.equal(
      await challenge('cell'),
      'DPoP realm="cell", error="invalid_token", algs="EdDSA Ed25519 ES256 ES384 RS256", resource_metadata="http://127.0.0.1:8080/.well-known/oauth-protected-resource/api/public/v1"',
    );
    // A Bearer challenge carries no algs (a DPoP scheme parameter, RFC 9449 §7.1), on both sides.
    const bearer = await edge.request(sides.edge.path, { headers: { authorization: `Bearer ${tokens.plain.edge}` } });
    assert.equal(bearer.headers.get('www-authenticate'), `Bearer realm="edge", error="invalid_token", ${meta}`);
    const bearerCell = await t.app.request(sides.cell.path, { headers: { authorization: `Bearer ${tokens.plain.cell}` } }, {
      incoming: { socket: { remoteAddress: '127.0.0.1' } },
    } as never);
    assert.equal(
      bearerCell.headers.get('www-authenticate'),
      'Bearer realm="cell", error="invalid_token", resource_metadata="http://127.0.0.1:8080/.well-known/oauth-protected-resource/api/public/v1"',
    );
    const stale = await edge.request(sides.edge.path, {
      headers: headersOf({ scheme: 'DPoP', token: await obtain({ dpop: true, resource: EDGE_AUD }) }),
    });
    assert.equal(
      stale.headers.get('www-authenticate'),
      `DPoP realm="edge", error="invalid_dpop_proof", algs="EdDSA Ed25519 ES256 ES384 RS256", ${meta}`,
    );
    const md = await edge.request('/.well-known/oauth-protected-resource');
    assert.deepEqual(await md.json(), {
      resource: EDGE_AUD,
      authorization_servers: [`service://${t.core.config.cellId}`],
      bearer_methods_supported: ['header'],
      dpop_signing_alg_values_supported: ['EdDSA', 'Ed25519', 'ES256', 'ES384', 'RS256'],
      dpop_bound_access_tokens_required: false,
      tls_client_certificate_bound_access_tokens: true,
      resource_name: `agent-cell edge ${dev.kid}`,
    });
  } finally {
    await t.close();
    rmSync(work, { recursive: true, force: true });
  }
});

test('a format 1 key bundle keeps judging keys; the device then refuses every token (no_token_keys)', async () => {
  const fixture = join(import.meta.dirname, '../bundles/fixtures');
  const keys = JSON.parse(readFileSync(join(fixture, 'public-keys.json'), 'utf8')) as Record<string, { kid: string; jwk: JsonWebKey }>;
  const { opened, index } = await openKeyBundle(readFileSync(join(fixture, 'keys.v1.bundle')), [keys['cell']!]);
  assert.equal(opened.payload.format_version, 1);
  const T = Date.UTC(2026, 0, 1);
  const app = createEdgeApp({
    deviceId: keys['device']!.kid,
    cellId: 'cell-fixture',
    region: 'local',
    clock: { now: () => T },
    state: emptyDeviceState(keys['device']!.kid),
    keys: { index, version: 7, expires_at: opened.payload.expires_at, hash: opened.hash },
    rate: { capacity: 100, refillPerSecond: 100 },
    info: {},
  });
  const ip = { incoming: { socket: { remoteAddress: '10.1.2.3' } } };
  const ok = await app.request(
    '/api/public/v1/edge/authz/agent_teams.read',
    { headers: { authorization: `Bearer svck_live_${'F'.repeat(43)}` } },
    ip,
  );
  assert.equal(ok.status, 200);
  const jwt = await new SignJWT({ sub: 'x' })
    .setProtectedHeader({ alg: 'EdDSA', typ: 'at+jwt' })
    .sign((await generateKeyPair('Ed25519')).privateKey);
  const no = await app.request('/api/public/v1/edge/authz/agent_teams.read', { headers: { authorization: `Bearer ${jwt}` } }, ip);
  assert.equal(no.status, 401);
  assert.equal(((await no.json()) as { details: { reason: string } }).details.reason, 'no_token_keys');
});

interface DpopKey {
  privateKey: CryptoKey;
  jwk: Record<string, unknown>;
  jkt: string;
}
async function dpopKey(): Promise<DpopKey> {
  const kp = await generateKeyPair('Ed25519', { extractable: true });
  const jwk = await exportJWK(kp.publicKey);
  return { privateKey: kp.privateKey, jwk, jkt: await calculateJwkThumbprint(jwk) };
}
function proofFor(k: DpopKey, htm: string, htu: string, nowMs: number, ath?: string): Promise<string> {
  return new SignJWT({ htm, htu, iat: Math.floor(nowMs / 1000), jti: crypto.randomUUID(), ...(ath ? { ath } : {}) })
    .setProtectedHeader({ alg: 'EdDSA', typ: 'dpop+jwt', jwk: k.jwk })
    .sign(k.privateKey);
}
function headersOf(p: Presentation): Headers {
  const h = new Headers({ authorization: `${p.scheme ?? 'Bearer'} ${p.token}` });
  for (const d of p.dpop === undefined ? [] : Array.isArray(p.dpop) ? p.dpop : [p.dpop]) h.append('dpop', d);
  return h;
}
async function answer(r: Response): Promise<string> {
  const b = (await r.json()) as { error?: string; details?: { reason?: string } };
  return `${r.status} ${b.error ?? 'ok'}${b.details?.reason ? ` ${b.details.reason}` : ''}`;
}
function claims(token: string): Record<string, any> {
  return JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString());
}
function b64j(v: unknown): string {
  return Buffer.from(JSON.stringify(v)).toString('base64url');
}

// ---------------------------------------------------------------- tool calls

/** What a tools port said of one call: its answer, or its refusal's reason. */
type Verdict = { ok: unknown } | { refused: string };

async function verdictOf(p: Promise<unknown>): Promise<Verdict> {
  try {
    return { ok: await p };
  } catch (e) {
    if (isEngineRefusal(e)) return { refused: e.reason };
    throw e;
  }
}

test("cell and edge judge the same tool call the same way: the cell's catalog, the device's, and the journal import", async () => {
  // Two HTTP services on loopback, which both the cell and the device were told they may reach
  // (--egress-allow-private): the allowlist names one for GET, the other for POST.
  const services = [0, 1].map(() =>
    createServer((req, res) => {
      res.writeHead(req.method === 'POST' ? 201 : 200, { 'content-type': 'text/plain' });
      res.end(`${req.method} ${req.url}`);
    }),
  );
  for (const svc of services) await new Promise<void>((r) => svc.listen(0, '127.0.0.1', r));
  const [origin, reports] = services.map((svc) => `http://127.0.0.1:${(svc.address() as AddressInfo).port}`) as [string, string];
  const loopback = ['127.0.0.1/32'];
  const t = await inProcessCell({ config: { egressAllowPrivate: loopback } });
  const dir = mkdtempSync(join(tmpdir(), 'edge-agree-tools-'));
  try {
    const ws = 'ws_agree';
    const cell = t.modules.teams.teams.crewPorts('run_agree', ws).tools!;
    const device = deviceToolsPort(dir, DEVICE, { now: () => t.clock.now() }, ws, loopback);
    const base: SeatAuthority = {
      allowed_tools: ['calc', 'clock.now', 'kv.get', 'kv.put', 'http.get', 'http.request'],
      clearance_level: 1,
      permission_mode: 'auto',
      data_grant_ids: [`kv:${ws}`],
      egress_allowlist: [`kv:${ws}`, origin, `POST:${reports}`],
      compartments: ['ops'],
      governing_contract_ids: [],
      budget_ceiling: null,
    };
    const rows: { name: string; tool: string; args: JsonObject; authority?: Partial<SeatAuthority>; expect: string }[] = [
      { name: 'calc', tool: 'calc', args: { expression: '6*7' }, expect: 'allowed' },
      { name: 'calc, bad arguments', tool: 'calc', args: { expression: '6*' }, expect: 'bad_arguments' },
      {
        name: 'kv.put within clearance',
        tool: 'kv.put',
        args: { key: 'pump-7', value: 'leak', classification: 1, compartments: ['ops'] },
        expect: 'allowed',
      },
      { name: 'kv.get of it', tool: 'kv.get', args: { key: 'pump-7' }, expect: 'allowed' },
      {
        name: 'kv.put, no egress to storage',
        tool: 'kv.put',
        args: { key: 'k', value: 1 },
        authority: { egress_allowlist: [origin] },
        expect: 'egress_denied',
      },
      { name: 'kv.put above clearance', tool: 'kv.put', args: { key: 'k', value: 1, classification: 2 }, expect: 'clearance_insufficient' },
      {
        name: 'kv.put, a compartment not held',
        tool: 'kv.put',
        args: { key: 'k', value: 1, compartments: ['hr'] },
        expect: 'compartment_not_granted',
      },
      {
        name: 'kv.get, no data grant',
        tool: 'kv.get',
        args: { key: 'pump-7' },
        authority: { data_grant_ids: [] },
        expect: 'data_not_granted',
      },
      {
        name: 'kv.get, the entry above clearance',
        tool: 'kv.get',
        args: { key: 'pump-7' },
        authority: { clearance_level: 0 },
        expect: 'clearance_insufficient',
      },
      {
        name: 'kv.get, its compartment not held',
        tool: 'kv.get',
        args: { key: 'pump-7' },
        authority: { compartments: [] },
        expect: 'compartment_not_granted',
      },
      { name: 'http.get on the allowlist', tool: 'http.get', args: { url: `${origin}/pumps` }, expect: 'allowed' },
      { name: 'http.get off the allowlist', tool: 'http.get', args: { url: 'http://127.0.0.2:9/x' }, expect: 'egress_denied' },
      { name: 'http.request GET', tool: 'http.request', args: { method: 'GET', url: `${origin}/pumps` }, expect: 'allowed' },
      {
        name: 'http.request POST where the allowlist names POST',
        tool: 'http.request',
        args: { method: 'POST', url: `${reports}/reports`, body: { ok: true } },
        expect: 'allowed',
      },
      {
        name: 'http.request POST to an origin named for GET only',
        tool: 'http.request',
        args: { method: 'POST', url: `${origin}/pumps`, body: { ok: true } },
        expect: 'egress_denied',
      },
      {
        name: 'http.request with a credential header',
        tool: 'http.request',
        args: { method: 'GET', url: `${origin}/pumps`, headers: { Authorization: 'Bearer x' } },
        expect: 'header_not_allowed',
      },
      {
        name: 'http.get to a private range the operator did not allow',
        tool: 'http.get',
        args: { url: 'http://10.9.9.9/x' },
        authority: { egress_allowlist: ['10.9.9.9'] },
        expect: 'egress_private_address',
      },
      { name: 'a tool neither catalog has', tool: 'weather.forecast', args: {}, expect: 'tool_unknown' },
    ];
    const summary = (v: Verdict) =>
      'refused' in v ? v.refused : (v.ok as { error?: unknown } | null)?.error === 'invalid_request' ? 'bad_arguments' : 'allowed';
    let seq = 0;
    for (const row of rows) {
      const authority = { ...base, ...row.authority };
      const ctx = { run_id: 'run_agree', step_id: `n/tool/0.${seq}`, seat: 'a', agent_id: 'agt_a', authority, effect_key: `ek_${seq}` };
      const atCell = await verdictOf(cell.call(row.tool, row.args, ctx));
      const atEdge = await verdictOf(device.call(row.tool, row.args, ctx));
      assert.equal(summary(atCell), row.expect, `${row.name}: the cell says ${JSON.stringify(atCell)}`);
      assert.equal(summary(atEdge), row.expect, `${row.name}: the edge says ${JSON.stringify(atEdge)}`);
      if ('ok' in atCell && 'ok' in atEdge && row.tool !== 'clock.now' && !row.tool.startsWith('http.'))
        assert.deepEqual(atEdge.ok, atCell.ok, `${row.name}: the same answer`);
      // The import judges the call as a record of a journal (cell/edge/journal-acts.ts): an act both catalogs
      // allowed is entitled; one they refused for a rule the cell can judge from the bundle is refused for it.
      seq++;
      if (!BUILTIN.has(row.tool)) continue;
      // A refused call recorded as done anyway (what a forged journal says): its result as the tool gives it.
      const out = 'ok' in atEdge ? atEdge.ok : row.tool === 'kv.get' ? { found: true, value: 'leak' } : { ok: true };
      const input = { tool: row.tool, args: row.args };
      const graph = {
        nodes: [
          { id: 'n', kind: 'agent', seat: 'a', config: {} },
          { id: 'w', kind: 'tool', seat: 'w', config: { tool: 'kv.put' } },
        ],
        seats: { a: { authority }, w: { authority: base } },
      } as unknown as Graph;
      const earlier = row.tool === 'kv.get' ? [kvPutRecord()] : [];
      const journal = {
        records: [
          ...earlier.map((e) => e.record),
          {
            seq: 9,
            kind: 'step',
            step_id: 'n/tool/0.9',
            input_hash: contentHash(input),
            output_hash: contentHash(out),
            data: { tool: row.tool },
          },
        ] as unknown as JournalRecord[],
        values: Object.fromEntries([...earlier.flatMap((e) => e.values), [contentHash(input), input], [contentHash(out), out]]),
      };
      const judged = await unentitledAct(graph, ws, journal);
      const want = JUDGED_AT_IMPORT.has(row.expect) ? row.expect : null;
      assert.equal(judged?.why ?? null, want, `${row.name}: the import says ${JSON.stringify(judged)}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await t.close();
    for (const svc of services) await new Promise((r) => svc.close(r));
  }
});

/** The built-in tools the import re-judges, and the refusals it can judge from the bundle alone. */
const BUILTIN = new Set(['calc', 'clock.now', 'kv.get', 'kv.put', 'http.get', 'http.request']);
const JUDGED_AT_IMPORT = new Set([
  'egress_denied',
  'clearance_insufficient',
  'compartment_not_granted',
  'data_not_granted',
  'header_not_allowed',
]);

/** The record of the kv.put (by a seat that could) that wrote `pump-7` earlier in the journal. */
function kvPutRecord(): { record: unknown; values: [string, unknown][] } {
  const input = { tool: 'kv.put', args: { key: 'pump-7', value: 'leak', classification: 1, compartments: ['ops'] } };
  const out = { ok: true, key: 'pump-7', compartments: ['ops'] };
  return {
    record: {
      seq: 1,
      kind: 'step',
      step_id: 'w/call',
      input_hash: contentHash(input),
      output_hash: contentHash(out),
      data: { tool: 'kv.put' },
    },
    values: [
      [contentHash(input), input],
      [contentHash(out), out],
    ],
  };
}
