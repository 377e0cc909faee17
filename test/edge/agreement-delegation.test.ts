// The delegation axis of the cell/edge agreement (test/edge/agreement.test.ts): RFC 8693 chains of
// 1-4 hops x which link was revoked (each token of the chain, the actor, the subject's client, the key
// the subject token was obtained with) x the binding of the last hop (none, DPoP, certificate), each
// presented rightly and without its binding; an actor archived or narrowed. The cell judges the chain's last token addressed to its
// API, the edge gateway its twin addressed to the device (aud edge:<device_id>) from the signed key
// bundle alone; both run core's judgeAccessToken. Every answer must be the same, and the expected one.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT } from 'jose';
import { inProcessCell, type InProcess } from '../helpers/inproc.ts';
import { makeTestCerts, tlsSocket } from '../helpers/certs.ts';
import { accessTokenHash } from '../../core/tokens/ath.ts';
import { openKeyBundle } from '../../bundles/key-bundle.ts';
import { acceptArtifact, emptyDeviceState } from '../../bundles/accept.ts';
import { generateEd25519 } from '../../bundles/codec.ts';
import { createEdgeApp } from '../../edge/gateway.ts';

const A = '/api/public/v1/admin';
const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const AT = 'urn:ietf:params:oauth:token-type:access_token';
type Side = 'cell' | 'edge';
type Binding = 'plain' | 'dpop' | 'cert';
type Client = { client_id: string; client_secret: string };

interface DpopKey {
  privateKey: CryptoKey;
  jwk: Record<string, unknown>;
  jkt: string;
}

function claims(token: string): Record<string, any> {
  return JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString());
}

test('cell and edge agree on every delegation chain: hops x revoked links x bindings', async () => {
  const work = mkdtempSync(join(tmpdir(), 'agree-deleg-'));
  const certs = makeTestCerts(work);
  const t: InProcess = await inProcessCell();
  try {
    const post = async (path: string, body: unknown) => {
      const r = await t.request('POST', path, { token: t.adminKey, body });
      assert.ok(r.status === 200 || r.status === 201, `${path}: ${r.status} ${r.text}`);
      return r.body;
    };
    const cellBase = t.modules.oauth.api.publicBase();
    const CELL_AUD = `${cellBase}/api/public/v1`;
    const dev = await generateEd25519();
    const reg = await post(`${A}/edge/devices`, { name: 'd', public_jwk: dev.publicJwk });
    const EDGE_AUD = `edge:${dev.kid}`;
    const kp = await generateKeyPair('Ed25519', { extractable: true });
    const jwk = await exportJWK(kp.publicKey);
    const k1: DpopKey = { privateKey: kp.privateKey, jwk, jkt: await calculateJwkThumbprint(jwk) };
    const proof = (htm: string, htu: string, ath?: string) =>
      new SignJWT({ htm, htu, iat: Math.floor(t.clock.now() / 1000), jti: crypto.randomUUID(), ...(ath ? { ath } : {}) })
        .setProtectedHeader({ alg: 'EdDSA', typ: 'dpop+jwt', jwk: k1.jwk })
        .sign(k1.privateKey);
    const basic = (c: Client) => `Basic ${Buffer.from(`${c.client_id}:${c.client_secret}`).toString('base64')}`;

    const scope = ['edge.read', 'oauth.clients.read'];
    const subject = await post(`${A}/principals`, { kind: 'service', name: 'person', roles: ['admin'] });
    const mkActor = async (name: string) => {
      const p = await post(`${A}/principals`, { kind: 'service', name, roles: ['viewer'] });
      const c = await post(`${A}/oauth/clients`, { name, scope, subject_id: p.id, grant_types: [EXCHANGE] });
      return { id: p.id as string, client: c as Client };
    };
    const actors = [await mkActor('hop1'), await mkActor('hop2'), await mkActor('hop3'), await mkActor('hop4')];
    const subjectClient: Client = await post(`${A}/oauth/clients`, { name: 'subject', scope, subject_id: subject.id });

    async function tokenRequest(client: Client, fields: Record<string, string>, binding: Binding = 'plain') {
      const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(client) };
      if (binding === 'dpop') headers['dpop'] = await proof('POST', `${cellBase}/oauth/token`);
      const socket = binding === 'cert' ? tlsSocket(certs.der('robot'), true) : { remoteAddress: '127.0.0.1' };
      const r = await t.app.request('/oauth/token', { method: 'POST', headers, body: new URLSearchParams(fields).toString() }, {
        incoming: { socket },
      } as never);
      return { status: r.status, body: (await r.json()) as Record<string, any> };
    }
    const revoke = async (token: string, client: Client) => {
      const r = await t.app.request(
        '/oauth/revoke',
        {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(client) },
          body: new URLSearchParams({ token }).toString(),
        },
        { incoming: { socket: { remoteAddress: '127.0.0.1' } } } as never,
      );
      assert.equal(r.status, 200);
    };

    /**
     * A chain: the subject token (client_credentials, or with a dedicated API key), then `hops` exchanges
     * by actors[0..], the last one twice (for the cell's API and for the device), bound as asked.
     */
    async function chain(hops: number, binding: Binding, o: { actorsOf?: typeof actors; subjectClient?: Client } = {}) {
      const sc = o.subjectClient ?? subjectClient;
      const s = await tokenRequest(sc, { grant_type: 'client_credentials' });
      assert.equal(s.status, 200, JSON.stringify(s.body));
      const links: { token: string; client: Client }[] = [{ token: s.body['access_token'], client: sc }];
      const as = o.actorsOf ?? actors;
      for (let h = 1; h < hops; h++) {
        const r = await tokenRequest(as[h - 1]!.client, {
          grant_type: EXCHANGE,
          subject_token: links.at(-1)!.token,
          subject_token_type: AT,
          audience: CELL_AUD,
        });
        assert.equal(r.status, 200, JSON.stringify(r.body));
        links.push({ token: r.body['access_token'], client: as[h - 1]!.client });
      }
      const last = as[hops - 1]!.client;
      const twin = async (aud: string) =>
        tokenRequest(last, { grant_type: EXCHANGE, subject_token: links.at(-1)!.token, subject_token_type: AT, audience: aud }, binding);
      const cell = await twin(CELL_AUD);
      const edge = await twin(EDGE_AUD);
      return { links, last, cell, edge };
    }

    type Case = { name: string; expected: string; tokens: Record<Side, string>; binding: Binding };
    const cases: Case[] = [];
    const revokedLater: (() => Promise<void>)[] = [];
    for (const binding of ['plain', 'dpop', 'cert'] as const) {
      for (const hops of [1, 2, 3]) {
        // No link revoked.
        const ok = await chain(hops, binding);
        assert.equal(ok.cell.status, 200, JSON.stringify(ok.cell.body));
        assert.equal(claims(ok.edge.body['access_token']).aud, EDGE_AUD);
        assert.equal(hopsOf(claims(ok.cell.body['access_token']).act), hops);
        cases.push({ name: `${hops} hops, ${binding}`, expected: '200 ok', binding, tokens: both(ok) });
        // Each token of the chain revoked in turn (the subject token, every intermediate, the last twins).
        for (let k = 0; k <= hops; k++) {
          const c = await chain(hops, binding);
          const name = `${hops} hops, ${binding}, link ${k} revoked`;
          cases.push({ name, expected: '401 unauthorized revoked', binding, tokens: both(c) });
          revokedLater.push(async () => {
            if (k < hops) await revoke(c.links[k]!.token, c.links[k]!.client);
            else for (const tw of [c.cell, c.edge]) await revoke(tw.body['access_token'], c.last);
          });
        }
      }
    }
    // An actor archived, the subject token's client deleted, the subject token's key revoked (2 hops, plain).
    const archived = [await mkActor('gone-1'), ...actors.slice(1)];
    const ca = await chain(2, 'plain', { actorsOf: archived });
    cases.push({ name: 'actor of hop 1 archived', expected: '401 unauthorized revoked', binding: 'plain', tokens: both(ca) });
    revokedLater.push(async () => void (await post(`${A}/principals/${archived[0]!.id}/archive`, {})));
    const doomed: Client = await post(`${A}/oauth/clients`, { name: 'doomed', scope, subject_id: subject.id });
    const cd = await chain(2, 'plain', { subjectClient: doomed });
    cases.push({ name: "subject token's client deleted", expected: '401 unauthorized revoked', binding: 'plain', tokens: both(cd) });
    revokedLater.push(async () => {
      assert.equal((await t.request('DELETE', `${A}/oauth/clients/${doomed.client_id}`, { token: t.adminKey })).status, 200);
    });
    const key = await post(`${A}/api-keys`, { name: 'as-client', owner_id: subject.id, scopes: scope });
    const ck = await chain(2, 'plain', { subjectClient: { client_id: key.key_id, client_secret: key.secret } });
    cases.push({ name: "subject token's API key revoked", expected: '401 unauthorized revoked', binding: 'plain', tokens: both(ck) });
    revokedLater.push(async () => void (await post(`${A}/api-keys/${key.key_id}/revoke`, {})));
    // An actor narrowed: its role no longer grants edge.read, so no token of its chain does.
    const narrowed = [await mkActor('narrowed-1'), ...actors.slice(1)];
    const cn = await chain(2, 'plain', { actorsOf: narrowed });
    cases.push({ name: 'actor of hop 1 narrowed', expected: '403 forbidden', binding: 'plain', tokens: both(cn) });
    revokedLater.push(async () => {
      await post(`${A}/roles`, { name: 'auditor-only', permissions: ['audit.read'] });
      const r = await t.request('PATCH', `${A}/principals/${narrowed[0]!.id}`, { token: t.adminKey, body: { roles: ['auditor-only'] } });
      assert.equal(r.status, 200, r.text);
    });

    // A fourth hop is refused by the cell; a 4-hop token signed with the cell's own key (as a cell with a
    // higher limit would issue) is refused by both.
    const three = await chain(3, 'plain');
    const fourth = await tokenRequest(actors[3]!.client, {
      grant_type: EXCHANGE,
      subject_token: three.cell.body['access_token'],
      subject_token_type: AT,
      audience: CELL_AUD,
    });
    assert.equal(fourth.status, 400);
    assert.equal(fourth.body['error'], 'invalid_grant');
    const ring = t.modules.oauth.api.keyring();
    const deeper = async (tk: string) => {
      const c = claims(tk);
      return new SignJWT({ ...c, act: { sub: actors[3]!.id, act: c['act'] } })
        .setProtectedHeader({ alg: 'EdDSA', typ: 'at+jwt', kid: ring.active.kid })
        .sign(ring.active.key);
    };
    cases.push({
      name: '4 hops',
      expected: '401 unauthorized delegation_too_deep',
      binding: 'plain',
      tokens: { cell: await deeper(three.cell.body['access_token']), edge: await deeper(three.edge.body['access_token']) },
    });

    for (const r of revokedLater) await r();
    const b = await t.request('POST', `${A}/edge/key-bundles`, { token: t.adminKey, body: { device_id: dev.kid } });
    assert.equal(b.status, 201, b.text);
    const { opened, index } = await openKeyBundle(b.text, reg.trust.keys);
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

    const paths: Record<Side, { path: string; uri: string }> = {
      cell: { path: `${A}/edge/devices`, uri: `${cellBase}${A}/edge/devices` },
      edge: { path: '/api/public/v1/edge/authz/edge.read', uri: 'http://localhost/api/public/v1/edge/authz/edge.read' },
    };
    async function present(s: Side, token: string, binding: Binding, withBinding: boolean): Promise<string> {
      const headers = new Headers();
      let socket: object = { remoteAddress: '127.0.0.1' };
      if (binding === 'dpop') {
        headers.set('authorization', `DPoP ${token}`);
        if (withBinding) headers.set('dpop', await proof('GET', paths[s].uri, await accessTokenHash(token)));
      } else headers.set('authorization', `Bearer ${token}`);
      if (binding === 'cert' && withBinding) socket = tlsSocket(certs.der('robot'), true);
      const app = s === 'cell' ? t.app : edge;
      const r = await app.request(paths[s].path, { headers }, { incoming: { socket } } as never);
      const body = (await r.json()) as { error?: string; details?: { reason?: string } };
      return `${r.status} ${body.error ?? 'ok'}${body.details?.reason ? ` ${body.details.reason}` : ''}`;
    }

    const disagreements: string[] = [];
    const wrong: string[] = [];
    let compared = 0;
    for (const c of cases) {
      const variants: [string, boolean, string][] = [[c.name, true, c.expected]];
      if (c.binding !== 'plain' && c.expected === '200 ok')
        variants.push([
          `${c.name}, binding missing`,
          false,
          c.binding === 'dpop' ? '401 unauthorized dpop_required' : '401 unauthorized cert_required',
        ]);
      for (const [name, withBinding, expected] of variants) {
        const got = {
          cell: await present('cell', c.tokens.cell, c.binding, withBinding),
          edge: await present('edge', c.tokens.edge, c.binding, withBinding),
        };
        compared++;
        if (got.cell !== got.edge) disagreements.push(`${name}: cell ${got.cell} | edge ${got.edge}`);
        if (got.edge !== expected) wrong.push(`${name}: expected ${expected}, edge ${got.edge}, cell ${got.cell}`);
      }
    }
    assert.deepEqual(disagreements, [], 'cell and edge disagree');
    assert.deepEqual(wrong, [], 'unexpected answers');
    assert.ok(compared >= 45, `compared ${compared}`);

    function both(c: { cell: { body: Record<string, any> }; edge: { body: Record<string, any> } }): Record<Side, string> {
      return { cell: c.cell.body['access_token'], edge: c.edge.body['access_token'] };
    }
  } finally {
    await t.close();
    rmSync(work, { recursive: true, force: true });
  }
});

function hopsOf(act: unknown): number {
  let n = 0;
  for (let a = act as { act?: unknown } | undefined; a; a = a.act as typeof a) n++;
  return n;
}
