/**
 * `serve --oauth-issuer URL` with the real program (issue #25): openid-client 6, a standard RFC 8414
 * client, discovers a cell started with `--oauth-issuer http://127.0.0.1:<port>` and completes a
 * client-credentials grant whose token the cell honours; without the flag the metadata keeps the
 * spec's `service://<group id>` (which the client refuses, as RFC 8414 §3.3 says it must). A bad value
 * stops the start with a message that says what to fix. On PostgreSQL, a group whose members differ
 * in the flag: a token of either issuer verifies on every member and at an edge holding a bundle from a
 * member without the flag; a member declaring a URL later is followed; a URL retired (its cell restarted
 * without the flag) is refused everywhere (`bad_issuer`).
 *
 * Needs `node scripts/build.mjs` first; the group part needs PostgreSQL (test/helpers/postgres.ts).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import * as oidc from 'openid-client';
import { openKeyBundle } from '../../bundles/key-bundle.ts';
import { acceptArtifact, emptyDeviceState } from '../../bundles/accept.ts';
import { generateEd25519 } from '../../bundles/codec.ts';
import { createEdgeApp, type EdgeRuntime } from '../../edge/gateway.ts';
import { CELL_BIN, startCellProcess, type CellProcess } from '../helpers/cell-process.ts';
import { call, msUntil, ok, startGroup, type Group } from '../helpers/group.ts';
import { pgUnavailable } from '../helpers/postgres.ts';

const A = '/api/public/v1/admin';

function claimsOf(token: string): Record<string, any> {
  return JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString());
}

/** A port free now (the cell is then told to listen on it, so its issuer URL can name it before it starts). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** A client-credentials client for a new service principal holding `roles`, registered on `base`. */
async function serviceClient(base: string, adminKey: string, scope: string[]) {
  const name = `svc-${Math.random().toString(16).slice(2, 8)}`;
  const svc = await ok(base, 'POST', `${A}/principals`, { token: adminKey, body: { kind: 'service', name, roles: ['admin'] } });
  const c = await ok(base, 'POST', `${A}/oauth/clients`, { token: adminKey, body: { name, scope, subject_id: svc.id } });
  return { id: c.client_id as string, secret: c.client_secret as string };
}

/** A client-credentials token from `base` (a form post, as any client sends it). */
async function tokenFrom(base: string, client: { id: string; secret: string }, extra: Record<string, string> = {}): Promise<string> {
  const r = await call(base, 'POST', '/oauth/token', {
    form: { grant_type: 'client_credentials', ...extra },
    headers: {
      authorization: `Basic ${Buffer.from(`${encodeURIComponent(client.id)}:${encodeURIComponent(client.secret)}`).toString('base64')}`,
    },
  });
  assert.equal(r.status, 200, r.text);
  return r.body.access_token as string;
}

/** `status reason` of a token at a cell's API. */
async function atCell(base: string, token: string): Promise<string> {
  const r = await call(base, 'GET', `${A}/oauth/clients?limit=1`, { token });
  return `${r.status} ${r.body?.details?.reason ?? ''}`.trim();
}

describe('a cell process with --oauth-issuer, and openid-client', { timeout: 180_000 }, () => {
  let cell: CellProcess;
  let plain: CellProcess;
  let issuer: string;

  before(async () => {
    const port = await freePort();
    issuer = `http://127.0.0.1:${port}`;
    cell = await startCellProcess({ args: ['--port', String(port), '--oauth-issuer', issuer] });
    assert.equal(cell.url, issuer, 'listening where the issuer says');
    plain = await startCellProcess();
  });
  after(async () => {
    for (const c of [cell, plain]) {
      await c?.stop();
      c?.cleanup();
    }
  });

  test('discovery() accepts the metadata and a client-credentials grant gives a token the cell honours', async () => {
    const client = await serviceClient(cell.url, cell.adminKey, ['oauth.clients.read']);
    const config = await oidc.discovery(new URL(issuer), client.id, undefined, oidc.ClientSecretBasic(client.secret), {
      algorithm: 'oauth2',
      execute: [oidc.allowInsecureRequests],
      timeout: 120,
    });
    assert.equal(config.serverMetadata().issuer, issuer);
    const tokens = await oidc.clientCredentialsGrant(config, { scope: 'oauth.clients.read' });
    assert.equal(tokens.token_type.toLowerCase(), 'bearer');
    assert.equal(claimsOf(tokens.access_token)['iss'], issuer);
    assert.equal(await atCell(cell.url, tokens.access_token), '200');
  });

  test('without the flag the metadata issuer stays service://…, which discovery() refuses', async () => {
    const meta = await ok(plain.url, 'GET', '/.well-known/oauth-authorization-server');
    assert.match(meta.issuer, /^service:\/\/cell-[0-9a-f]{8}$/);
    await assert.rejects(
      oidc.discovery(new URL(plain.url), 'any', undefined, oidc.None(), {
        algorithm: 'oauth2',
        execute: [oidc.allowInsecureRequests],
        timeout: 120,
      }),
      (e: Error & { code?: string }) => e.code === 'OAUTH_JSON_ATTRIBUTE_COMPARISON_FAILED',
    );
  });
});

test('a bad --oauth-issuer stops the start and says what to fix', { timeout: 60_000 }, async () => {
  for (const [value, says] of [
    ['http://auth.example.com', 'must use https'],
    ['https://auth.example.com/?tenant=a', 'no query or fragment'],
    ['auth.example.com', 'is not a URL'],
  ] as const) {
    const dir = mkdtempSync(join(tmpdir(), 'cell-issuer-'));
    try {
      const p = spawn(process.execPath, [CELL_BIN, 'serve', '--port', '0', '--data', dir, '--oauth-issuer', value], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      p.stdout!.on('data', (d: Buffer) => (out += d.toString()));
      p.stderr!.on('data', (d: Buffer) => (out += d.toString()));
      const code = await new Promise<number | null>((r) => p.once('exit', (c) => r(c)));
      assert.equal(code, 2, out);
      assert.match(out, /--oauth-issuer: /, value);
      assert.ok(out.includes(says), `${value}: ${out}`);
      assert.doesNotMatch(out, /listening on/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
});

const skip = pgUnavailable() ?? false;
const URL_A = 'https://auth-a.example.test';
const URL_C = 'https://auth-c.example.test';

describe('a group whose members differ in --oauth-issuer (PostgreSQL)', { skip, timeout: 240_000 }, () => {
  let g: Group;
  let withFlag: CellProcess;
  let without: CellProcess;

  before(async () => {
    g = await startGroup(2, { args: (i) => (i === 0 ? ['--oauth-issuer', URL_A] : []) });
    [withFlag, without] = g.cells as [CellProcess, CellProcess];
  });
  after(async () => {
    await g?.stop();
  });

  test('a token from the member with the flag verifies on the member without it, and the other way round', async () => {
    const client = await serviceClient(withFlag.url, g.adminKey, ['oauth.clients.read']);
    const a = await tokenFrom(withFlag.url, client);
    assert.equal(claimsOf(a)['iss'], URL_A);
    assert.equal(await atCell(without.url, a), '200');
    const b = await tokenFrom(without.url, client);
    assert.match(claimsOf(b)['iss'], /^service:\/\//);
    assert.equal(await atCell(withFlag.url, b), '200');
    // Each member publishes its own issuer.
    assert.equal((await ok(withFlag.url, 'GET', '/.well-known/oauth-authorization-server')).issuer, URL_A);
    assert.equal((await ok(without.url, 'GET', '/.well-known/oauth-authorization-server')).issuer, claimsOf(b)['iss']);
  });

  test('at the edge: a bundle from the member without the flag accepts tokens of both issuers', async () => {
    // The client's subject exists before the bundle is issued (a bundle lists the principals of its time).
    const client = await serviceClient(withFlag.url, g.adminKey, ['edge.read']);
    const dev = await generateEd25519();
    const reg = await ok(without.url, 'POST', `${A}/edge/devices`, {
      token: g.adminKey,
      body: { name: 'pump', public_jwk: dev.publicJwk },
    });
    const b = await call(without.url, 'POST', `${A}/edge/key-bundles`, { token: g.adminKey, body: { device_id: dev.kid } });
    assert.equal(b.status, 201, b.text);
    const { opened, index } = await openKeyBundle(b.text, reg.trust.keys);
    assert.ok(index.tokens?.issuers?.includes(URL_A), JSON.stringify(index.tokens?.issuers));
    const now = () => Date.now();
    const rt: EdgeRuntime = {
      deviceId: dev.kid,
      cellId: reg.trust.cell_id,
      region: 'local',
      clock: { now },
      state: acceptArtifact(emptyDeviceState(dev.kid), opened, { now: now(), issuer: reg.trust.cell_id }),
      keys: { index, version: opened.payload.version, expires_at: opened.payload.expires_at, hash: opened.hash },
      rate: { capacity: 600, refillPerSecond: 100 },
      info: {},
    };
    const edge = createEdgeApp(rt);
    for (const from of [withFlag, without]) {
      const token = await tokenFrom(from.url, client, { resource: `edge:${dev.kid}` });
      const r = await edge.request('/api/public/v1/edge/authz/edge.read', { headers: { authorization: `Bearer ${token}` } });
      assert.equal(r.status, 200, `${claimsOf(token)['iss']}: ${await r.text()}`);
    }
  });

  test('a member declaring a URL later is followed; a URL retired by a restart without the flag is refused everywhere', async () => {
    const late = await g.add(['--oauth-issuer', URL_C]);
    const client = await serviceClient(late.url, g.adminKey, ['oauth.clients.read']);
    const c = await tokenFrom(late.url, client);
    assert.equal(claimsOf(c)['iss'], URL_C);
    // The earlier members hear of the new row through the store's notifications.
    for (const m of [withFlag, without])
      await msUntil(`${m.url} accepts ${URL_C}`, Date.now(), async () => (await atCell(m.url, c)) === '200', 60_000);
    // Restarted without the flag (same data directory, same cell id): its URL leaves the group's set.
    await late.stop();
    const again = await startCellProcess({ dataDir: late.dataDir, args: ['--store', g.db.url, '--posture', 'multi-cell'] });
    g.cells.push(again);
    assert.match((await ok(again.url, 'GET', '/.well-known/oauth-authorization-server')).issuer, /^service:\/\//);
    for (const m of [withFlag, without, again]) {
      await msUntil(`${m.url} refuses ${URL_C}`, Date.now(), async () => (await atCell(m.url, c)) === '401 bad_issuer', 60_000);
    }
    // The members' own issuers are untouched.
    assert.equal(await atCell(without.url, await tokenFrom(withFlag.url, client)), '200');
  });
});
