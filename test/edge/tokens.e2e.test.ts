// OAuth access tokens at the air-gapped edge, end to end: the real cell (https, client CA) issues
// tokens to oauth4webapi, an independent client, with RFC 8707 resource indicators (the device's
// twin of every token has aud = edge:<device_id>); the cell answers every row for the tokens
// addressed to it; the cell stops; the real single executable dist/edge runs in a network namespace
// with only loopback (`unshare -n`, root), terminating mTLS itself, and answers the same rows for the
// device's tokens: same status, code and reason. Inside, too: oauth4webapi's own DPoP proofs, a
// reverse proxy in front of the edge (path rewritten, or TLS terminated with X-Forwarded-*) refused
// with dpop_htu_mismatch, a proof replayed across a kill -9 and restart, and expiry on the device clock.
// Needs `make edge` (dist/cell.mjs and dist/edge).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, fetch as ufetch } from 'undici';
import * as oauth from 'oauth4webapi';
import { airgapSkip, EDGE, edge, runAirgapped } from './_airgapped.ts';
import { startCellProcess, type CellProcess } from '../helpers/cell-process.ts';
import { makeTestCerts, type TestCerts } from '../helpers/certs.ts';
import { EXPECTED, runRows, type RowEnv, type TokenName, type Who } from './_token-rows.ts';

const A = '/api/public/v1/admin';

/** undici agents presenting each client certificate (or none), trusting the test CA. */
export function agentsFor(certs: TestCerts): Record<Who, Agent> {
  const ca = certs.pem['ca.pem'];
  const leaf = (n: 'robot' | 'intruder' | 'stranger') =>
    new Agent({ connect: { ca, cert: certs.pem[`${n}.pem`], key: certs.pem[`${n}.key`] } });
  return { none: new Agent({ connect: { ca } }), robot: leaf('robot'), intruder: leaf('intruder'), stranger: leaf('stranger') };
}

test('access tokens offline at the real dist/edge with DPoP and mTLS: the same answers as the cell', {
  skip: airgapSkip('the air-gapped token e2e', { openssl: true }),
  timeout: 180_000,
}, async () => {
  const work = mkdtempSync(join(tmpdir(), 'edge-tokens-'));
  const dev = join(work, 'device');
  const certs = makeTestCerts(work);
  const agents = agentsFor(certs);
  const fetchAs = (who: Who) =>
    ((url: string, init?: RequestInit) => ufetch(url, { ...(init as object), dispatcher: agents[who] })) as unknown as typeof fetch;
  let cell: CellProcess | undefined;
  try {
    cell = await startCellProcess({
      args: [
        '--cell-id',
        'cell-tok',
        '--tls-cert',
        join(work, 'server.pem'),
        '--tls-key',
        join(work, 'server.key'),
        '--client-ca',
        join(work, 'ca.pem'),
      ],
    });
    const c = cell;
    const api = async (method: string, path: string, body?: unknown) => {
      const r = await fetchAs('none')(c.url + path, {
        method,
        headers: { authorization: `Bearer ${c.adminKey}`, 'content-type': 'application/json' },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      const b = (await r.json()) as any;
      assert.ok(r.status === 200 || r.status === 201, `${path}: ${r.status} ${JSON.stringify(b)}`);
      return b;
    };

    // The device and its trust anchor.
    const init = JSON.parse(edge(['init', '--data', dev]));
    const reg = await api('POST', `${A}/edge/devices`, { name: 'pump-house', public_jwk: init.public_jwk });
    writeFileSync(join(work, 'trust.json'), JSON.stringify(reg));
    edge(['trust', '--data', dev, '--file', join(work, 'trust.json')]);
    const RESOURCE = `edge:${init.device_id}`;

    // oauth4webapi obtains every token: discovery, client_credentials, DPoP with its own key, resource indicators.
    const svc = await api('POST', `${A}/principals`, { kind: 'service', name: 'robot-svc', roles: ['admin'] });
    const gone = await api('POST', `${A}/principals`, { kind: 'service', name: 'leaver-svc', roles: ['admin'] });
    const reg1 = await api('POST', `${A}/oauth/clients`, { name: 'robot', scope: ['edge.read', 'oauth.clients.read'], subject_id: svc.id });
    const reg2 = await api('POST', `${A}/oauth/clients`, { name: 'leaver', scope: ['edge.read'], subject_id: gone.id });
    const reg3 = await api('POST', `${A}/oauth/clients`, { name: 'doomed', scope: ['edge.read'], subject_id: svc.id });
    const as = await oauth.processDiscoveryResponse(
      new URL('service://cell-tok'),
      await fetchAs('none')(`${c.url}/.well-known/oauth-authorization-server`),
    );
    const robot: oauth.Client = { client_id: reg1.client_id };
    const leaver: oauth.Client = { client_id: reg2.client_id };
    const doomed: oauth.Client = { client_id: reg3.client_id };
    const keyPair = (await crypto.subtle.generateKey({ name: 'Ed25519' }, true, ['sign', 'verify'])) as CryptoKeyPair;
    const obtain = async (o: { client?: oauth.Client; secret?: string; dpop?: boolean; who?: Who; scope?: string; resource?: string }) => {
      const client = o.client ?? robot;
      const opts = { [oauth.customFetch]: fetchAs(o.who ?? 'none'), ...(o.dpop ? { DPoP: oauth.DPoP(client, keyPair) } : {}) };
      const params: Record<string, string> = { scope: o.scope ?? 'edge.read', ...(o.resource ? { resource: o.resource } : {}) };
      const r = await oauth.clientCredentialsGrantRequest(
        as,
        client,
        oauth.ClientSecretBasic(o.secret ?? reg1.client_secret),
        params,
        opts,
      );
      return (await oauth.processClientCredentialsResponse(as, client, r)).access_token;
    };
    const twins = {} as Record<Exclude<TokenName, 'other_side'>, { cell: string; edge: string }>;
    const both = async (name: Exclude<TokenName, 'other_side'>, o: Parameters<typeof obtain>[0]) => {
      twins[name] = { cell: await obtain(o), edge: await obtain({ ...o, resource: RESOURCE }) };
    };
    await both('plain', {});
    await both('narrow', { scope: 'oauth.clients.read' });
    await both('dpop', { dpop: true });
    await both('cert', { who: 'robot' });
    await both('both', { dpop: true, who: 'robot' });
    await both('revoked', {});
    await both('leaver', { client: leaver, secret: reg2.client_secret });
    await both('orphan', { client: doomed, secret: reg3.client_secret });
    const claims = (t: string) => JSON.parse(Buffer.from(t.split('.')[1]!, 'base64url').toString());
    assert.equal(claims(twins.dpop.edge).aud, RESOURCE);
    assert.equal(claims(twins.both.edge).cnf['x5t#S256'], certs.x5t('robot'));
    assert.ok(claims(twins.both.edge).cnf.jkt);

    // Before the bundle: one pair revoked (oauth4webapi at /oauth/revoke), one subject archived, one client deleted.
    for (const t of Object.values(twins.revoked)) {
      await oauth.processRevocationResponse(
        await oauth.revocationRequest(as, robot, oauth.ClientSecretBasic(reg1.client_secret), t, { [oauth.customFetch]: fetchAs('none') }),
      );
    }
    await api('POST', `${A}/principals/${gone.id}/archive`);
    await api('DELETE', `${A}/oauth/clients/${reg3.client_id}`);
    const bundleRes = await fetchAs('none')(`${c.url}${A}/edge/key-bundles`, {
      method: 'POST',
      headers: { authorization: `Bearer ${c.adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ device_id: init.device_id }),
    });
    assert.equal(bundleRes.status, 201);
    writeFileSync(join(work, 'keys.bundle'), await bundleRes.text());

    // The cell's answers, for the tokens addressed to it.
    const dpopKey = {
      privateJwk: await crypto.subtle.exportKey('jwk', keyPair.privateKey),
      publicJwk: await crypto.subtle.exportKey('jwk', keyPair.publicKey),
    };
    const side = (s: 'cell' | 'edge') =>
      Object.fromEntries([
        ...Object.entries(twins).map(([k, v]) => [k, v[s]]),
        ['other_side', twins.plain[s === 'cell' ? 'edge' : 'cell']],
      ]) as Record<TokenName, string>;
    const cellEnv: RowEnv = { origin: c.url, path: `${A}/edge/devices`, tokens: side('cell'), dpopKey, fetch: fetchAs };
    const cellRows = await runRows(cellEnv);
    await c.stop();

    // The device, air-gapped.
    const cfg = {
      edge: EDGE,
      data: dev,
      keyBundle: join(work, 'keys.bundle'),
      certDir: work,
      deviceId: init.device_id,
      cellUrl: c.url,
      tokens: side('edge'),
      dpopKey,
      issuer: 'service://cell-tok',
    };
    const o = runAirgapped('_tokens-client.ts', work, cfg, 150_000);

    // Same answer on every row, and the answer the spec asks for.
    const disagree = Object.keys(EXPECTED)
      .filter((k) => cellRows[k] !== o.rows[k])
      .map((k) => `${k}: cell ${cellRows[k]} | edge ${o.rows[k]}`);
    assert.deepEqual(disagree, [], 'the cell and the edge disagree');
    assert.deepEqual(o.rows, EXPECTED);

    // An absolute-form request line cannot choose the URI the proof is checked against.
    assert.deepEqual(o.absolute_form, { forged_htu: '401 unauthorized dpop_htu_mismatch', own_htu: '200 ok' });

    // RFC 9728 metadata, read by oauth4webapi.
    assert.equal(o.metadata.resource, RESOURCE);
    assert.deepEqual(o.metadata.authorization_servers, ['service://cell-tok']);
    assert.equal(o.metadata.tls_client_certificate_bound_access_tokens, true);
    assert.deepEqual(o.metadata.dpop_signing_alg_values_supported, ['EdDSA', 'Ed25519', 'ES256', 'ES384', 'RS256']);

    // A proxy in front: path rewritten, or TLS terminated and X-Forwarded-* set; both refused, and
    // oauth4webapi reads our challenge (scheme DPoP, error invalid_dpop_proof).
    for (const k of ['proxy_rewrite', 'proxy_tls_terminating'] as const) {
      assert.equal(o[k].answer, '401 unauthorized dpop_htu_mismatch', k);
      assert.equal(o[k].challenge[0].scheme, 'dpop', k);
      assert.equal(o[k].challenge[0].parameters.error, 'invalid_dpop_proof', k);
    }
    assert.equal(o.direct_after_proxy, '200 ok', 'the same client straight to the edge is served');

    // The replay cache survives kill -9 and a restart within the proof window.
    assert.equal(o.replay_restart.before, '200 ok');
    assert.equal(o.replay_restart.after_restart, '401 unauthorized dpop_replay');
    assert.equal(o.replay_restart.fresh_after_restart, '200 ok');
    // Judged on the device clock: ten minutes later the token has expired.
    assert.equal(o.expired, '401 unauthorized expired');
  } finally {
    for (const a of Object.values(agents)) await a.close();
    if (cell) {
      await cell.stop();
      cell.cleanup();
    }
    rmSync(work, { recursive: true, force: true });
  }
});
