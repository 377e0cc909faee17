/**
 * OAuth on the real cell process, all figures in one run:
 * - JWT-authenticated GET vs API-key-authenticated GET of the same operation
 *   (target >= 0.8; the JWT path has a verified-token cache, the denylist
 *   and the subject's roles are still checked on every request);
 * - DPoP-bound requests (a fresh proof per request: signature, htu/htm, iat,
 *   replay cache, ath) vs plain bearer;
 * - token endpoint issuance rate for client_credentials (HTTP Basic).
 */
import autocannon from 'autocannon';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createHash } from 'node:crypto';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { fmt, load, spawnServer } from './_util.ts';

/** The cell under test: dist/cell.mjs, or $BENCH_CELL (another build, e.g. main's, for a before/after in one session). */
const CELL = process.env['BENCH_CELL'] ?? resolve(import.meta.dirname, '../dist/cell.mjs');
const SECONDS = 5;
const CONNECTIONS = 20;

async function post(url: string, headers: Record<string, string>, body: string) {
  const r = await fetch(url, { method: 'POST', headers, body });
  return { status: r.status, body: (await r.json()) as any };
}

export default async function run(): Promise<void> {
  const data = mkdtempSync(join(tmpdir(), 'bench-oauth-'));
  const cell = await spawnServer([
    ...(process.env['BENCH_CELL_NODE_ARGS']?.split(' ') ?? []),
    CELL,
    'serve',
    '--port',
    '0',
    '--data',
    data,
    '--rate-capacity',
    '100000000',
    '--rate-refill',
    '100000000',
  ]);
  try {
    const admin = readFileSync(join(data, 'bootstrap-admin.key'), 'utf8').trim();
    const json = { authorization: `Bearer ${admin}`, 'content-type': 'application/json' };
    const reg = await post(
      `${cell.url}/api/public/v1/admin/oauth/clients`,
      json,
      JSON.stringify({ name: 'bench', scope: ['oauth.clients.read'] }),
    );
    const basic = `Basic ${Buffer.from(`${reg.body.client_id}:${reg.body.client_secret}`).toString('base64')}`;
    const form = { authorization: basic, 'content-type': 'application/x-www-form-urlencoded' };
    const key = await post(
      `${cell.url}/api/public/v1/admin/api-keys`,
      json,
      JSON.stringify({ name: 'bench', scopes: ['oauth.clients.read'] }),
    );
    const apiKey = key.body.secret as string;
    const bearer = (await post(`${cell.url}/oauth/token`, form, 'grant_type=client_credentials')).body.access_token as string;
    const path = '/api/public/v1/admin/oauth/clients?limit=1';
    const target = `${cell.url}${path}`;

    // warm-up, then API key vs JWT
    await load({ url: target, connections: CONNECTIONS, seconds: 1, headers: { authorization: `Bearer ${apiKey}` } });
    const k = await load({ url: target, connections: CONNECTIONS, seconds: SECONDS, headers: { authorization: `Bearer ${apiKey}` } });
    const j = await load({ url: target, connections: CONNECTIONS, seconds: SECONDS, headers: { authorization: `Bearer ${bearer}` } });
    console.log(
      `  authenticated GET: JWT ${fmt(j.rps)} req/s (p99 ${j.p99} ms, non-2xx ${j.non2xx}) vs API key ${fmt(k.rps)} req/s (non-2xx ${k.non2xx}) -> ratio ${fmt(j.rps / k.rps, 2)} (target >= 0.8)`,
    );

    // DPoP: one pre-signed proof per request (each jti is single use)
    const kp = await generateKeyPair('Ed25519');
    const jwk = await exportJWK(kp.publicKey);
    const dpopRes = await fetch(`${cell.url}/oauth/token`, {
      method: 'POST',
      body: 'grant_type=client_credentials',
      headers: {
        ...form,
        dpop: await new SignJWT({
          htm: 'POST',
          htu: `${cell.url}/oauth/token`,
          iat: Math.floor(Date.now() / 1000),
          jti: crypto.randomUUID(),
        })
          .setProtectedHeader({ alg: 'EdDSA', typ: 'dpop+jwt', jwk })
          .sign(kp.privateKey),
      },
    });
    const bound = ((await dpopRes.json()) as { access_token: string }).access_token;
    const ath = createHash('sha256').update(bound).digest('base64url');
    const N = 12_000;
    const t0 = performance.now();
    const proofs: string[] = [];
    const htu = `${cell.url}/api/public/v1/admin/oauth/clients`;
    for (let i = 0; i < N; i++) {
      proofs.push(
        await new SignJWT({ htm: 'GET', htu, iat: Math.floor(Date.now() / 1000), jti: crypto.randomUUID(), ath })
          .setProtectedHeader({ alg: 'EdDSA', typ: 'dpop+jwt', jwk })
          .sign(kp.privateKey),
      );
    }
    const signSecs = (performance.now() - t0) / 1000;
    let next = 0;
    const started = performance.now();
    const d = await (
      autocannon as unknown as (o: unknown) => Promise<{ requests: { total: number }; non2xx: number; latency: { p99: number } }>
    )({
      url: target,
      connections: CONNECTIONS,
      amount: N,
      requests: [
        {
          method: 'GET',
          path,
          setupRequest: (req: { headers: Record<string, string> }) => {
            req.headers = { ...req.headers, authorization: `DPoP ${bound}`, dpop: proofs[next++ % N]! };
            return req;
          },
        },
      ],
    });
    const dRps = d.requests.total / ((performance.now() - started) / 1000);
    const b = await load({ url: target, connections: CONNECTIONS, seconds: SECONDS, headers: { authorization: `Bearer ${bearer}` } });
    console.log(
      `  DPoP-bound GET: ${fmt(dRps)} req/s (p99 ${d.latency.p99} ms, non-2xx ${d.non2xx}, ${N} proofs pre-signed in ${fmt(signSecs, 1)} s) vs bearer ${fmt(b.rps)} req/s -> ratio ${fmt(dRps / b.rps, 2)}`,
    );

    // issuance
    const iss = await load({
      url: `${cell.url}/oauth/token`,
      connections: CONNECTIONS,
      seconds: SECONDS,
      method: 'POST',
      headers: form,
      body: 'grant_type=client_credentials',
    });
    console.log(`  client_credentials issuance: ${fmt(iss.rps)} tokens/s (p99 ${iss.p99} ms, non-2xx ${iss.non2xx})`);
  } finally {
    await cell.stop();
    rmSync(data, { recursive: true, force: true });
  }
}
