// Delegation chains, end to end and offline: the real cell process issues RFC 8693 chains of two hops
// (oauth4webapi performs every exchange), each chain's last token twice (for the cell's API and for the
// device); then each link of a chain is stopped in turn (the subject token revoked, the first hop
// revoked, the last token revoked, the first actor archived, the subject token's client deleted, the
// subject token's API key revoked). The cell refuses the token on the bearer path and at introspection;
// the cell stops; the real single executable dist/edge, in a network namespace with only loopback
// (`unshare -n`, root), refuses its twin from the key bundle alone, with the cell's reason.
// Needs `make edge` (dist/cell.mjs and dist/edge).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as oauth from 'oauth4webapi';
import { airgapSkip, EDGE, edge, runAirgapped } from './_airgapped.ts';
import { startCellProcess, type CellProcess } from '../helpers/cell-process.ts';

const A = '/api/public/v1/admin';
const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const AT = 'urn:ietf:params:oauth:token-type:access_token';

test('revoking each link of a delegation chain refuses it at the cell, at introspection and at the air-gapped edge', {
  skip: airgapSkip('the air-gapped delegation e2e'),
  timeout: 240_000,
}, async () => {
  const work = mkdtempSync(join(tmpdir(), 'edge-deleg-'));
  const dev = join(work, 'device');
  let cell: CellProcess | undefined;
  try {
    cell = await startCellProcess({ args: ['--cell-id', 'cell-deleg'] });
    const c = cell;
    const api = async (method: string, path: string, body?: unknown) => {
      const r = await fetch(c.url + path, {
        method,
        headers: { authorization: `Bearer ${c.adminKey}`, 'content-type': 'application/json' },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      const b = (await r.json()) as any;
      assert.ok(r.status === 200 || r.status === 201, `${path}: ${r.status} ${JSON.stringify(b)}`);
      return b;
    };
    const init = JSON.parse(edge(['init', '--data', dev]));
    const reg = await api('POST', `${A}/edge/devices`, { name: 'pump-house', public_jwk: init.public_jwk });
    writeFileSync(join(work, 'trust.json'), JSON.stringify(reg));
    edge(['trust', '--data', dev, '--file', join(work, 'trust.json')]);
    const DEVICE = `edge:${init.device_id}`;
    const CELL = `${c.url}/api/public/v1`;

    const as = await oauth.processDiscoveryResponse(
      new URL('service://cell-deleg'),
      await fetch(`${c.url}/.well-known/oauth-authorization-server`),
    );
    const insecure = { [oauth.allowInsecureRequests]: true } as const;
    const scope = ['edge.read', 'oauth.clients.read'];
    const person = await api('POST', `${A}/principals`, { kind: 'service', name: 'person', roles: ['admin'] });
    const actor = async (name: string) => {
      const p = await api('POST', `${A}/principals`, { kind: 'service', name, roles: ['viewer'] });
      return {
        id: p.id as string,
        client: await api('POST', `${A}/oauth/clients`, { name, scope, subject_id: p.id, grant_types: [EXCHANGE] }),
      };
    };
    const subjectToken = async (client: { client_id: string; client_secret: string }) => {
      const r = await oauth.clientCredentialsGrantRequest(
        as,
        { client_id: client.client_id },
        oauth.ClientSecretBasic(client.client_secret),
        {},
        insecure,
      );
      return (await oauth.processClientCredentialsResponse(as, { client_id: client.client_id }, r)).access_token;
    };
    const exchange = async (client: { client_id: string; client_secret: string }, subject: string, audience: string) => {
      const r = await oauth.genericTokenEndpointRequest(
        as,
        { client_id: client.client_id },
        oauth.ClientSecretBasic(client.client_secret),
        EXCHANGE,
        { subject_token: subject, subject_token_type: AT, audience },
        insecure,
      );
      return (await oauth.processGenericTokenEndpointResponse(as, { client_id: client.client_id }, r)).access_token;
    };
    const form = (path: string, fields: Record<string, string>, client: { client_id: string; client_secret: string }) =>
      fetch(c.url + path, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: `Basic ${Buffer.from(`${client.client_id}:${client.client_secret}`).toString('base64')}`,
        },
        body: new URLSearchParams(fields).toString(),
      });

    const hop2 = await actor('hop-2');
    const subjectClient = await api('POST', `${A}/oauth/clients`, { name: 'person', scope, subject_id: person.id });
    /** subject token -> hop 1 (aud: the cell) -> hop 2, twice: for the cell and for the device. */
    const chain = async (o: { hop1?: Awaited<ReturnType<typeof actor>>; client?: { client_id: string; client_secret: string } } = {}) => {
      const h1 = o.hop1 ?? (await actor(`hop-1-${Math.random().toString(36).slice(2, 8)}`));
      const sc = o.client ?? subjectClient;
      const st = await subjectToken(sc);
      const t1 = await exchange(h1.client, st, CELL);
      return { st, t1, h1, sc, cell: await exchange(hop2.client, t1, CELL), edge: await exchange(hop2.client, t1, DEVICE) };
    };

    const chains = {
      intact: await chain(),
      subject_revoked: await chain(),
      hop1_revoked: await chain(),
      last_revoked: await chain(),
      actor_archived: await chain(),
      client_deleted: await chain({ client: await api('POST', `${A}/oauth/clients`, { name: 'doomed', scope, subject_id: person.id }) }),
      key_revoked: await (async () => {
        const key = await api('POST', `${A}/api-keys`, { name: 'as-client', owner_id: person.id, scopes: scope });
        const ch = await chain({ client: { client_id: key.key_id, client_secret: key.secret } });
        return { ...ch, key };
      })(),
    };
    const claims = (t: string) => JSON.parse(Buffer.from(t.split('.')[1]!, 'base64url').toString());
    assert.deepEqual(claims(chains.intact.edge).act, { sub: hop2.id, act: { sub: chains.intact.h1.id } });
    assert.equal(claims(chains.intact.edge).aud, DEVICE);

    const revoke = async (token: string, client: { client_id: string; client_secret: string }) =>
      assert.equal((await form('/oauth/revoke', { token }, client)).status, 200);
    await revoke(chains.subject_revoked.st, subjectClient);
    await revoke(chains.hop1_revoked.t1, chains.hop1_revoked.h1.client);
    await revoke(chains.last_revoked.cell, hop2.client);
    await revoke(chains.last_revoked.edge, hop2.client);
    await api('POST', `${A}/principals/${chains.actor_archived.h1.id}/archive`);
    await api('DELETE', `${A}/oauth/clients/${chains.client_deleted.sc.client_id}`);
    await api('POST', `${A}/api-keys/${chains.key_revoked.key.key_id}/revoke`);

    // The cell: the bearer path and introspection (by a registered resource server), for both twins.
    const rs = await api('POST', `${A}/oauth/clients`, { name: 'resource-server', scope: ['edge.read'] });
    const cellRows: Record<string, string> = {};
    for (const [name, ch] of Object.entries(chains)) {
      const r = await fetch(`${c.url}${A}/edge/devices`, { headers: { authorization: `Bearer ${ch.cell}` } });
      const b = (await r.json()) as any;
      cellRows[name] = `${r.status} ${b.error ?? 'ok'}${b.details?.reason ? ` ${b.details.reason}` : ''}`;
      for (const tk of [ch.cell, ch.edge]) {
        const i = (await (await form('/oauth/introspect', { token: tk }, rs)).json()) as any;
        assert.equal(i.active, name === 'intact', `${name}: introspection ${JSON.stringify(i)}`);
        if (i.active) assert.deepEqual(i.act, claims(tk).act);
      }
    }
    const expected = Object.fromEntries(Object.keys(chains).map((k) => [k, k === 'intact' ? '200 ok' : '401 unauthorized revoked']));
    assert.deepEqual(cellRows, expected);

    const bundle = await fetch(`${c.url}${A}/edge/key-bundles`, {
      method: 'POST',
      headers: { authorization: `Bearer ${c.adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ device_id: init.device_id }),
    });
    assert.equal(bundle.status, 201);
    writeFileSync(join(work, 'keys.bundle'), await bundle.text());
    await c.stop();

    const cfg = {
      edge: EDGE,
      data: dev,
      keyBundle: join(work, 'keys.bundle'),
      cellUrl: c.url,
      tokens: Object.fromEntries(Object.entries(chains).map(([k, ch]) => [k, ch.edge])),
    };
    const o = runAirgapped('_delegation-client.ts', work, cfg, 180_000);
    assert.deepEqual(o.rows, expected, 'the air-gapped edge answers as the cell did');
  } finally {
    await cell?.stop().catch(() => {});
    cell?.cleanup();
    rmSync(work, { recursive: true, force: true });
  }
});
