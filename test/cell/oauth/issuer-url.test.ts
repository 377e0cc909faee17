// `--oauth-issuer` (issue #25): a cell given an issuer URL publishes it in its metadata and signs its
// tokens with it; the cell accepts both its URL and the spec's `service://<group id>`, and so does the
// edge through the key bundle's `tokens.issuers`; a token naming any other issuer is refused at both.
// Without the flag the metadata keeps `service://…`. The flag's value is checked before the cell starts.
// (Standard clients and a group of cells: test/e2e/oauth-issuer.test.ts.)
import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import { SignJWT } from 'jose';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { basic, claimsOf, createService, form, registerClient } from '../../helpers/oauth.ts';
import { generateEd25519 } from '../../../bundles/codec.ts';
import { openKeyBundle } from '../../../bundles/key-bundle.ts';
import { acceptArtifact, emptyDeviceState } from '../../../bundles/accept.ts';
import { createEdgeApp, type EdgeRuntime } from '../../../edge/gateway.ts';
import { parseOAuthIssuer } from '../../../cell/oauth/settings.ts';

const A = '/api/public/v1/admin';
const ISSUER = 'https://auth.example.test';

describe('a cell with --oauth-issuer', () => {
  let t: InProcess;
  let auth: Record<string, string>;
  let dev: Awaited<ReturnType<typeof generateEd25519>>;
  let trust: { keys: { kid: string; jwk: JsonWebKey }[] };

  before(async () => {
    t = await inProcessCell({ config: { oauthIssuer: ISSUER } });
    const svc = await createService(t, 'issuer-robot', ['admin']);
    const c = await registerClient(t, { name: 'issuer-robot', scope: ['edge.read', 'oauth.clients.read'], subject_id: svc });
    auth = basic(c.client_id, c.client_secret!);
    dev = await generateEd25519();
    const reg = await t.request('POST', `${A}/edge/devices`, { token: t.adminKey, body: { name: 'pump', public_jwk: dev.publicJwk } });
    assert.equal(reg.status, 201, reg.text);
    trust = reg.body.trust;
  });
  after(async () => {
    await t.close();
  });

  const groupIssuer = () => `service://${t.core.config.groupId}`;
  const issue = async (fields: Record<string, string> = {}) => {
    const r = await form(t, '/oauth/token', { grant_type: 'client_credentials', ...fields }, auth);
    assert.equal(r.status, 200, r.text);
    return r.body.access_token as string;
  };
  /** A token signed with the cell's own key, as issued, but naming `iss`. */
  const signed = async (base: string, iss: string) =>
    new SignJWT({ ...claimsOf(base), jti: crypto.randomUUID(), iss })
      .setProtectedHeader({ alg: 'EdDSA', typ: 'at+jwt', kid: t.modules.oauth.api.keyring().active.kid })
      .sign(t.modules.oauth.api.keyring().active.key);
  const atCell = async (token: string) => {
    const r = await t.request('GET', `${A}/oauth/clients`, { token });
    return `${r.status} ${r.body?.details?.reason ?? ''}`.trim();
  };

  test('the metadata names the URL; its tokens carry it; the group issuer is still accepted', async () => {
    const meta = await t.request('GET', '/.well-known/oauth-authorization-server');
    assert.equal(meta.status, 200);
    assert.equal(meta.body.issuer, ISSUER);
    const token = await issue();
    assert.equal(claimsOf(token)['iss'], ISSUER);
    assert.equal(await atCell(token), '200');
    assert.equal(await atCell(await signed(token, groupIssuer())), '200');
    const row = await t.row('SELECT issuer FROM oauth_issuers WHERE cell_id = ?', [t.core.config.cellId]);
    assert.equal(row?.['issuer'], ISSUER, 'declared to the group in the store');
  });

  test('a token naming any other issuer is refused (bad_issuer), near misses included', async () => {
    const token = await issue();
    // `iss` is compared as a string (RFC 9068 §4): the same origin spelled otherwise is another issuer.
    for (const iss of ['https://evil.example.test', `${ISSUER}/`, 'http://auth.example.test', `${ISSUER}:443`, 'service://another-group']) {
      assert.equal(await atCell(await signed(token, iss)), '401 bad_issuer', iss);
    }
    // Introspection answers from the same set.
    const intro = await form(t, '/oauth/introspect', { token: await signed(token, 'https://evil.example.test') }, auth);
    assert.equal(intro.status, 200, intro.text);
    assert.equal(intro.body.active, false);
    const good = await form(t, '/oauth/introspect', { token: await signed(token, groupIssuer()) }, auth);
    assert.equal(good.body.active, true, good.text);
  });

  test('the key bundle carries both issuers; the edge accepts either and refuses any other', async () => {
    const b = await t.request('POST', `${A}/edge/key-bundles`, { token: t.adminKey, body: { device_id: dev.kid } });
    assert.equal(b.status, 201, b.text);
    const { opened, index } = await openKeyBundle(b.text, trust.keys);
    assert.equal(index.tokens?.issuer, ISSUER);
    assert.deepEqual([...(index.tokens?.issuers ?? [])].sort(), [ISSUER, groupIssuer()].sort());
    const rt: EdgeRuntime = {
      deviceId: dev.kid,
      cellId: t.core.config.cellId,
      region: t.core.config.region,
      clock: t.clock,
      state: acceptArtifact(emptyDeviceState(dev.kid), opened, { now: t.clock.now(), issuer: t.core.config.cellId }),
      keys: { index, version: opened.payload.version, expires_at: opened.payload.expires_at, hash: opened.hash },
      rate: { capacity: 600, refillPerSecond: 100 },
      info: {},
    };
    const edge = createEdgeApp(rt);
    const atEdge = async (token: string) => {
      const r = await edge.request('/api/public/v1/edge/authz/edge.read', { headers: { authorization: `Bearer ${token}` } });
      const body = (await r.json()) as { details?: { reason?: string } };
      return `${r.status} ${body.details?.reason ?? ''}`.trim();
    };
    const token = await issue({ resource: `edge:${dev.kid}` });
    assert.equal(claimsOf(token)['iss'], ISSUER);
    assert.equal(await atEdge(token), '200');
    assert.equal(await atEdge(await signed(token, groupIssuer())), '200');
    for (const iss of ['https://evil.example.test', `${ISSUER}/`, 'service://another-group']) {
      assert.equal(await atEdge(await signed(token, iss)), '401 bad_issuer', iss);
    }
    const prm = await edge.request('/.well-known/oauth-protected-resource');
    assert.deepEqual(((await prm.json()) as { authorization_servers: string[] }).authorization_servers, [ISSUER]);
  });
});

test('without the flag the metadata keeps the spec issuer, service://<group id>, and no URL is accepted', async () => {
  const t = await inProcessCell();
  try {
    const meta = await t.request('GET', '/.well-known/oauth-authorization-server');
    assert.equal(meta.body.issuer, `service://${t.core.config.groupId}`);
    assert.deepEqual(t.modules.oauth.api.acceptedIssuers(), [`service://${t.core.config.groupId}`]);
    assert.equal(await t.row('SELECT issuer FROM oauth_issuers'), undefined);
  } finally {
    await t.close();
  }
});

test('--oauth-issuer values: https, http on loopback only, no user, query or fragment', () => {
  const ok = (s: string) => {
    const r = parseOAuthIssuer(s);
    assert.ok(r.ok, s);
    return r.issuer;
  };
  assert.equal(ok('https://auth.example.com'), 'https://auth.example.com');
  assert.equal(ok('https://auth.example.com/'), 'https://auth.example.com', 'a bare origin is published without its slash');
  assert.equal(ok('https://example.com/tenants/a'), 'https://example.com/tenants/a');
  assert.equal(ok('http://127.0.0.1:8080'), 'http://127.0.0.1:8080');
  assert.equal(ok('http://localhost:8080'), 'http://localhost:8080');
  assert.equal(ok('http://[::1]:8080'), 'http://[::1]:8080');
  for (const [bad, says] of [
    ['auth.example.com', 'is not a URL'],
    ['http://auth.example.com', 'must use https'],
    ['http://10.0.0.1', 'must use https'],
    ['ftp://auth.example.com', 'must use https'],
    ['https://user:pw@auth.example.com', 'user or password'],
    ['https://auth.example.com/?a=1', 'no query or fragment'],
    ['https://auth.example.com/?', 'no query or fragment'],
    ['https://auth.example.com/#x', 'no query or fragment'],
  ] as const) {
    const r = parseOAuthIssuer(bad);
    assert.ok(!r.ok, bad);
    assert.match(r.error, new RegExp(says.replace(/[?]/g, '\\?')), bad);
    assert.match(r.error, /^--oauth-issuer: /);
  }
});
