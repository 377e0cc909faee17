// Certificate-bound tokens (RFC 8705) over the cell's own TLS with client certificates:
// tls_client_auth, cnf x5t#S256, refused with no leaf or another leaf, and DPoP + mTLS both enforced.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, fetch as ufetch } from 'undici';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT } from 'jose';
import { accessTokenHash } from '../../../core/tokens/ath.ts';
import { manualClock } from '../../../cell/context.ts';
import { startCell, type RunningCell } from '../../../cell/server.ts';
import { CELL_BIN, startCellProcess } from '../../helpers/cell-process.ts';
import { testStore } from '../../helpers/inproc.ts';
import { existsSync } from 'node:fs';

const quiet = { info() {}, warn() {}, error() {} };
let dir: string;
let running: RunningCell;
let store: Awaited<ReturnType<typeof testStore>>;
let url: string;
let adminKey: string;
const pem: Record<string, Buffer> = {};
const agents: Record<string, Agent> = {};

function openssl(args: string[]) {
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
}

function makeCerts() {
  openssl([
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    'ca.key',
    '-out',
    'ca.pem',
    '-days',
    '2',
    '-subj',
    '/CN=test-ca',
  ]);
  const leaf = (name: string, ext: string) => {
    openssl([
      'req',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.csr`,
      '-subj',
      `/CN=${name}`,
    ]);
    openssl([
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      `${name}.pem`,
      '-days',
      '2',
      '-extfile',
      ext,
    ]);
  };
  writeFileSync(join(dir, 'server.ext'), 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
  writeFileSync(join(dir, 'robot.ext'), 'extendedKeyUsage=clientAuth\n');
  writeFileSync(join(dir, 'intruder.ext'), 'extendedKeyUsage=clientAuth\n');
  leaf('server', 'server.ext');
  leaf('robot', 'robot.ext');
  leaf('intruder', 'intruder.ext');
  for (const f of ['ca.pem', 'server.pem', 'server.key', 'robot.pem', 'robot.key', 'intruder.pem', 'intruder.key'])
    pem[f] = readFileSync(join(dir, f));
}

async function req(
  who: 'robot' | 'intruder' | 'none',
  path: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
) {
  const r = await ufetch(url + path, { ...init, dispatcher: agents[who]! });
  const text = await r.text();
  return { status: r.status, text, body: text ? JSON.parse(text) : undefined };
}

const formHeaders = { 'content-type': 'application/x-www-form-urlencoded' };
let clientId: string;
/** The cell's clock: frozen at start, so a proof's iat is taken from it, not from the wall (a slow run would make it stale). */
let clock: ReturnType<typeof manualClock>;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cell-mtls-'));
  makeCerts();
  clock = manualClock(Date.now());
  const orig = process.stdout.write.bind(process.stdout);
  process.stdout.write = (() => true) as typeof process.stdout.write;
  store = await testStore();
  try {
    running = await startCell({
      config: { dataDir: join(dir, 'data'), cellId: 'cell-mtls', port: 0, ...(store.url ? { storeUrl: store.url } : {}) },
      clock,
      log: quiet,
      tls: { cert: pem['server.pem']!, key: pem['server.key']!, ca: pem['ca.pem']! },
    });
  } finally {
    process.stdout.write = orig;
  }
  url = running.url!;
  adminKey = running.bootstrapSecret!;
  agents['none'] = new Agent({ connect: { ca: pem['ca.pem']! } });
  agents['robot'] = new Agent({ connect: { ca: pem['ca.pem']!, cert: pem['robot.pem']!, key: pem['robot.key']! } });
  agents['intruder'] = new Agent({ connect: { ca: pem['ca.pem']!, cert: pem['intruder.pem']!, key: pem['intruder.key']! } });
  const reg = await req('none', '/api/public/v1/admin/oauth/clients', {
    method: 'POST',
    headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      name: 'robot',
      scope: ['oauth.clients.read'],
      token_endpoint_auth_method: 'tls_client_auth',
      tls_client_auth_subject_dn: 'CN=robot',
    }),
  });
  assert.equal(reg.status, 201, reg.text);
  clientId = reg.body.client_id;
});

after(async () => {
  for (const a of Object.values(agents)) await a.close();
  await running?.stop();
  await store?.drop();
  rmSync(dir, { recursive: true, force: true });
});

const x5t = (p: Buffer) => createHash('sha256').update(new X509Certificate(p).raw).digest('base64url');

test('with a client CA the metadata offers tls_client_auth, certificate-bound tokens and the mTLS endpoint aliases', async () => {
  const m = await req('none', '/.well-known/oauth-authorization-server');
  assert.equal(m.status, 200);
  assert.equal(m.body.tls_client_certificate_bound_access_tokens, true);
  for (const k of [
    'token_endpoint_auth_methods_supported',
    'introspection_endpoint_auth_methods_supported',
    'revocation_endpoint_auth_methods_supported',
  ])
    assert.ok(m.body[k].includes('tls_client_auth'), k);
  assert.deepEqual(m.body.mtls_endpoint_aliases, {
    token_endpoint: m.body.token_endpoint,
    device_authorization_endpoint: m.body.device_authorization_endpoint,
    introspection_endpoint: m.body.introspection_endpoint,
    revocation_endpoint: m.body.revocation_endpoint,
  });
  const doc = await req('none', '/api/public/v1/openapi.json');
  for (const [path, key] of [
    ['/oauth/token', 'token_endpoint_auth_methods_supported'],
    ['/oauth/introspect', 'introspection_endpoint_auth_methods_supported'],
    ['/oauth/revoke', 'revocation_endpoint_auth_methods_supported'],
  ] as const) {
    assert.deepEqual(doc.body.paths[path].post['x-client-authentication'], m.body[key], path);
    assert.match(doc.body.paths[path].post.description, /`tls_client_auth` \(RFC 8705\)/, path);
  }
});

test('tls_client_auth: the client certificate authenticates and binds the token (cnf x5t#S256)', async () => {
  const r = await req('robot', '/oauth/token', {
    method: 'POST',
    headers: formHeaders,
    body: `grant_type=client_credentials&client_id=${clientId}`,
  });
  assert.equal(r.status, 200, r.text);
  const claims = JSON.parse(Buffer.from(r.body.access_token.split('.')[1], 'base64url').toString());
  assert.equal(claims.cnf['x5t#S256'], x5t(pem['robot.pem']!));
  const ok = await req('robot', '/api/public/v1/admin/oauth/clients', { headers: { authorization: `Bearer ${r.body.access_token}` } });
  assert.equal(ok.status, 200, ok.text);
  const noLeaf = await req('none', '/api/public/v1/admin/oauth/clients', { headers: { authorization: `Bearer ${r.body.access_token}` } });
  assert.equal(noLeaf.status, 401);
  assert.equal(noLeaf.body.details.reason, 'cert_required');
  const other = await req('intruder', '/api/public/v1/admin/oauth/clients', {
    headers: { authorization: `Bearer ${r.body.access_token}` },
  });
  assert.equal(other.status, 401);
  assert.equal(other.body.details.reason, 'cert_mismatch');
});

test('tls_client_auth with another certificate, or none, is refused at the token endpoint', async () => {
  const a = await req('intruder', '/oauth/token', {
    method: 'POST',
    headers: formHeaders,
    body: `grant_type=client_credentials&client_id=${clientId}`,
  });
  assert.equal(a.status, 401);
  assert.equal(a.body.error, 'invalid_client');
  const b = await req('none', '/oauth/token', {
    method: 'POST',
    headers: formHeaders,
    body: `grant_type=client_credentials&client_id=${clientId}`,
  });
  assert.equal(b.status, 401);
});

test('DPoP + mTLS: both bindings are recorded and both must hold', async () => {
  const kp = await generateKeyPair('Ed25519');
  const jwk = await exportJWK(kp.publicKey);
  const proof = async (htm: string, path: string, ath?: string) =>
    new SignJWT({ htm, htu: url + path, iat: Math.floor(clock.now() / 1000), jti: crypto.randomUUID(), ...(ath ? { ath } : {}) })
      .setProtectedHeader({ alg: 'EdDSA', typ: 'dpop+jwt', jwk })
      .sign(kp.privateKey);
  const r = await req('robot', '/oauth/token', {
    method: 'POST',
    headers: { ...formHeaders, dpop: await proof('POST', '/oauth/token') },
    body: `grant_type=client_credentials&client_id=${clientId}`,
  });
  assert.equal(r.status, 200, r.text);
  const claims = JSON.parse(Buffer.from(r.body.access_token.split('.')[1], 'base64url').toString());
  assert.equal(claims.cnf.jkt, await calculateJwkThumbprint(jwk));
  assert.equal(claims.cnf['x5t#S256'], x5t(pem['robot.pem']!));
  const tok = r.body.access_token as string;
  const path = '/api/public/v1/admin/oauth/clients';
  const both = await req('robot', path, {
    headers: { authorization: `DPoP ${tok}`, dpop: await proof('GET', path, await accessTokenHash(tok)) },
  });
  assert.equal(both.status, 200, both.text);
  const noCert = await req('none', path, {
    headers: { authorization: `DPoP ${tok}`, dpop: await proof('GET', path, await accessTokenHash(tok)) },
  });
  assert.equal(noCert.status, 401);
  assert.equal(noCert.body.details.reason, 'cert_required');
  const noProof = await req('robot', path, { headers: { authorization: `DPoP ${tok}` } });
  assert.equal(noProof.status, 401);
  assert.equal(noProof.body.details.reason, 'dpop_required');
});

test('the real process: serve --tls-cert --tls-key --client-ca serves https and binds tokens to client certificates', {
  skip: existsSync(CELL_BIN) ? false : 'dist/cell.mjs missing: node scripts/build.mjs',
}, async () => {
  const proc = await startCellProcess({
    args: [
      '--cell-id',
      'cell-tls',
      '--tls-cert',
      join(dir, 'server.pem'),
      '--tls-key',
      join(dir, 'server.key'),
      '--client-ca',
      join(dir, 'ca.pem'),
    ],
  });
  try {
    assert.match(proc.url, /^https:\/\/127\.0\.0\.1:\d+$/);
    const get = (who: 'robot' | 'none', path: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}) =>
      ufetch(proc.url + path, { ...init, dispatcher: agents[who]! }).then(async (r) => ({
        status: r.status,
        body: (await r.json()) as any,
      }));
    const meta = await get('none', '/.well-known/oauth-authorization-server');
    assert.equal(meta.body.token_endpoint, `${proc.url}/oauth/token`);
    const reg = await get('none', '/api/public/v1/admin/oauth/clients', {
      method: 'POST',
      headers: { authorization: `Bearer ${proc.adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        name: 'robot',
        scope: ['oauth.clients.read'],
        token_endpoint_auth_method: 'tls_client_auth',
        tls_client_auth_subject_dn: 'CN=robot',
      }),
    });
    assert.equal(reg.status, 201);
    const tok = await get('robot', '/oauth/token', {
      method: 'POST',
      headers: formHeaders,
      body: `grant_type=client_credentials&client_id=${reg.body.client_id}`,
    });
    assert.equal(tok.status, 200);
    const claims = JSON.parse(Buffer.from(tok.body.access_token.split('.')[1], 'base64url').toString());
    assert.equal(claims.cnf['x5t#S256'], x5t(pem['robot.pem']!));
    assert.equal(
      (await get('none', '/api/public/v1/admin/oauth/clients', { headers: { authorization: `Bearer ${tok.body.access_token}` } })).status,
      401,
    );
    assert.equal(
      (await get('robot', '/api/public/v1/admin/oauth/clients', { headers: { authorization: `Bearer ${tok.body.access_token}` } })).status,
      200,
    );
  } finally {
    await proc.stop();
    proc.cleanup();
  }
});
