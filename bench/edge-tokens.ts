/**
 * The real edge serving OAuth access tokens, for the DPoP-bound vs bearer
 * figures (bench/edge.bench.ts) and their profile (bench/profile-edge.ts): a
 * device directory as `edge init` leaves it, a key bundle with a token issuer
 * and one subject, the edge started on port 0 with its rate gate out of the
 * way, a plain bearer token and a DPoP-bound one, and loads of each. Not a
 * `*.bench.ts`: a helper.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { buildKeyBundle } from '../bundles/key-bundle.ts';
import { edgeAudience } from '../bundles/token-trust.ts';
import { generateEd25519, signerFromJwk } from '../bundles/codec.ts';
import { initialState, writeFileDurable, writeState } from '../edge/files.ts';
import { cpuSeconds } from './_util.ts';
import { rawGet, rawLoad, type RawLoadResult } from './_raw-client.ts';

export const EDGE_TOKEN_PATH = '/api/public/v1/edge/authz/edge.read';
const ISS = 'service://cell-bench';

/** A bundle with a token issuer (one EdDSA key), one subject and one registered client, and what signs its tokens. */
export async function tokenBundle(
  signer: ReturnType<typeof signerFromJwk>,
  deviceId: string,
  now: number,
): Promise<{ text: string; sign: (over?: Record<string, unknown>) => Promise<string>; audience: string; oauthJwk: JWK }> {
  const oauthKey = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
  const oauthJwk = await exportJWK(oauthKey.publicKey);
  const audience = edgeAudience(deviceId);
  const text = await buildKeyBundle({
    issuer: 'cell-bench',
    signer,
    audience: deviceId,
    version: 1,
    issuedAt: now,
    expiresAt: now + 86_400_000,
    records: [],
    tombstones: [],
    subjects: { svc_bench: { status: 'active', permissions: ['edge', 'agent_teams', 'system.orchestration.admin'] } },
    tokens: {
      issuer: ISS,
      keys: [{ kid: 'k1', kty: 'OKP', crv: 'Ed25519', x: oauthJwk.x!, alg: 'EdDSA' }],
      revoked: [['jti-revoked-000000', Math.floor(now / 1000) + 600]],
      // Format 3 lists the clients that exist: a token of an unlisted client is refused as revoked.
      clients: ['ocl_bench'],
    },
  });
  const sign = (over: Record<string, unknown> = {}) =>
    new SignJWT({
      iss: ISS,
      sub: 'svc_bench',
      aud: audience,
      client_id: 'ocl_bench',
      scope: 'edge.read agent_teams.read',
      iat: Math.floor(now / 1000),
      exp: Math.floor(now / 1000) + 600,
      jti: crypto.randomUUID(),
      ...over,
    })
      .setProtectedHeader({ alg: 'EdDSA', typ: 'at+jwt', kid: 'k1' })
      .sign(oauthKey.privateKey);
  return { text, sign, audience, oauthJwk };
}

export interface TokenEdge {
  base: string;
  proc: ChildProcess;
  /** A plain bearer token, and a DPoP-bound one with the key its proofs are signed with. */
  bearer: string;
  bound: string;
  /** `n` fresh proofs for GET EDGE_TOKEN_PATH (iat now), signed in this process. */
  proofs(n: number): Promise<string[]>;
  /** The bearer load for `seconds` (bench/_raw-client.ts), with the edge's CPU µs a request. */
  bearerLoad(seconds: number, connections?: number): Promise<RawLoadResult & { cpuUs: number }>;
  /** One request per proof, each proof once (the same client), with the edge's CPU µs a request. */
  dpopLoad(proofs: string[], connections?: number): Promise<RawLoadResult & { cpuUs: number }>;
  stop(): Promise<void>;
}

/**
 * Starts the edge (`cmd pre… serve …`; env e.g. NODE_OPTIONS for a profiler)
 * with a fresh device, its trust in `signer`'s key, and a token bundle.
 */
export async function startTokenEdge(
  cmd: string,
  pre: string[],
  opts: { env?: NodeJS.ProcessEnv; args?: string[] } = {},
): Promise<TokenEdge> {
  const now = Date.now();
  const cell = await generateEd25519();
  const signer = signerFromJwk(cell.kid, cell.privateJwk);
  const dev = await generateEd25519();
  const { text, sign } = await tokenBundle(signer, dev.kid, now);
  const dir = mkdtempSync(join(tmpdir(), 'edge-bench-tok-'));
  const data = join(dir, 'dev');
  writeFileDurable(
    join(data, 'device.json'),
    JSON.stringify({ format_version: 1, device_id: dev.kid, public_jwk: dev.publicJwk, private_jwk: dev.privateJwk }),
    0o600,
  );
  writeFileDurable(
    join(data, 'trust.json'),
    JSON.stringify({ format_version: 1, cell_id: 'cell-bench', keys: [{ kid: cell.kid, jwk: cell.publicJwk }], publishers: [] }),
  );
  // What `edge init` writes beside device.json: the edge refuses a device without it.
  writeState(data, initialState(dev.kid), {
    format_version: 1,
    device_id: dev.kid,
    public_jwk: dev.publicJwk,
    private_jwk: dev.privateJwk,
  });
  writeFileSync(join(dir, 'keys.json'), text);
  const args = ['serve', '--data', data, '--bundle', join(dir, 'keys.json'), '--port', '0'];
  const proc = spawn(cmd, [...pre, ...args, '--rate-capacity', '100000000', '--rate-refill', '100000000', ...(opts.args ?? [])], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: opts.env ?? process.env,
  });
  let out = '';
  const base = await new Promise<string>((res, rej) => {
    const timer = setTimeout(() => rej(new Error('edge did not start')), 20_000);
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = /listening on (https?:\/\/[^\s"]+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        proc.stdout!.off('data', onData);
        proc.stdout!.resume();
        res(m[1]!);
      }
    };
    proc.stdout!.on('data', onData);
  });
  const nowS = () => Math.floor(Date.now() / 1000);
  const bearer = await sign({ iat: nowS(), exp: nowS() + 3600 });
  const kp: { privateKey: CryptoKey; publicKey: CryptoKey } = await generateKeyPair('Ed25519');
  const jwk = await exportJWK(kp.publicKey);
  const bound = await sign({ iat: nowS(), exp: nowS() + 3600, cnf: { jkt: await calculateJwkThumbprint(jwk) } });
  const ath = createHash('sha256').update(bound).digest('base64url');
  const url = base + EDGE_TOKEN_PATH;
  return {
    base,
    proc,
    bearer,
    bound,
    async proofs(n) {
      const out: string[] = [];
      for (let i = 0; i < n; i++)
        out.push(
          await new SignJWT({ htm: 'GET', htu: url, iat: nowS(), jti: crypto.randomUUID(), ath })
            .setProtectedHeader({ alg: 'EdDSA', typ: 'dpop+jwt', jwk })
            .sign(kp.privateKey),
        );
      return out;
    },
    async bearerLoad(seconds, connections = 20) {
      const req = rawGet(new URL(base).host, EDGE_TOKEN_PATH, { authorization: `Bearer ${bearer}` });
      const cpu0 = cpuSeconds(proc.pid!);
      const r = await rawLoad({ url, connections, seconds, next: () => req });
      return { ...r, cpuUs: ((cpuSeconds(proc.pid!) - cpu0) * 1e6) / r.requests };
    },
    async dpopLoad(proofs, connections = 20) {
      const host = new URL(base).host;
      const authorization = `DPoP ${bound}`;
      const reqs = proofs.map((dpop) => rawGet(host, EDGE_TOKEN_PATH, { authorization, dpop }));
      let next = 0;
      const cpu0 = cpuSeconds(proc.pid!);
      const r = await rawLoad({ url, connections, next: () => reqs[next++] ?? null });
      return { ...r, cpuUs: ((cpuSeconds(proc.pid!) - cpu0) * 1e6) / r.requests };
    },
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null)
        await new Promise<void>((res) => {
          proc.once('exit', () => res());
          proc.kill('SIGTERM');
        });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
