/**
 * Edge benchmarks (targets from issue 7), each beside a baseline measured in the same run:
 *  1. load and verify a 100,000-key bundle (read, signature over the payload, SHA-256,
 *     parse, index): target < 500 ms; baseline: a bare JSON.parse of the same file;
 *  2. offline key check after load (hash the secret, look up, core's verifyPresentedKey):
 *     target < 10 µs per check; baseline: hashSecret alone;
 *  3. edge cold start to the first answered request (spawn `dist/edge serve` with a key bundle,
 *     first authenticated GET answered): target < 400 ms; baseline: a bare node:http server
 *     spawned the same way;
 *  4. bundle size per key, in bytes;
 * and for OAuth access tokens at the edge (issue 16):
 *  5. first presentation of a token (core's judgeAccessToken over a format 2 bundle: signature,
 *     claims, denylist, subject, authority), no cache; baseline: a bare native Ed25519 verify
 *     (node:crypto) of the same signing input;
 *  6. a token seen before, from the verified-token cache: target < 10 µs per check;
 *  7. DPoP-bound vs plain bearer requests against the real edge process (bench/edge-tokens.ts; a
 *     fresh pre-signed proof per request: signature, htm/htu, iat, ath, thumbprint, the replay
 *     cache in memory with its horizon on disk), 5 rounds alternating which goes first; the
 *     edge's CPU a request of each beside the throughputs (bench/edge-dpop-cpu.ts compares builds).
 */
import { spawn } from 'node:child_process';
import { createPublicKey, verify as nodeVerify } from 'node:crypto';
import { judgeAccessToken, type TokenRequestFacts } from '../core/tokens/judge.ts';
import { VerifiedTokenCache } from '../core/tokens/cache.ts';
import { MemoryReplayCache } from '../core/tokens/replay.ts';
import { tokenJudgeFromBundle } from '../bundles/token-trust.ts';
import { startTokenEdge, tokenBundle } from './edge-tokens.ts';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { buildKeyBundle, openKeyBundle } from '../bundles/key-bundle.ts';
import { generateEd25519, signerFromJwk } from '../bundles/codec.ts';
import { hashSecret } from '../core/apikey/hash.ts';
import type { KeyRecord } from '../core/apikey/verify.ts';
import { initialState, writeFileDurable, writeState } from '../edge/files.ts';
import { nativeSha256Hex as nodeSha256Hex } from '../runtime/native-hash.ts';
import { listeningPort } from './_util.ts';

const fmt = (n: number, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const ROOT = resolve(import.meta.dirname, '..');

function secretOf(i: number): string {
  return 'svck_live_' + (i.toString(36).padStart(8, '0') + 'A'.repeat(43)).slice(0, 43);
}

function records(n: number, now: number): KeyRecord[] {
  const out: KeyRecord[] = [];
  for (let i = 0; i < n; i++) {
    const rotated = i % 10 === 0;
    out.push({
      key_id: `key_${i.toString(16).padStart(20, '0')}`,
      owner_id: `svc_${(i % 500).toString(16).padStart(20, '0')}`,
      owner_status: 'active',
      status: 'active',
      hashes: rotated
        ? [
            { hash: hashSecret(secretOf(i)), not_after: null },
            { hash: hashSecret(secretOf(i) + 'x'), not_after: now + 3600_000 },
          ]
        : [{ hash: hashSecret(secretOf(i)), not_after: null }],
      expires_at: null,
      owner_permissions: ['agent_teams', 'system.orchestration.admin', 'edge.read', 'catalog.read'],
      scopes: i % 3 === 0 ? [] : ['agent_teams.read', 'system.orchestration.admin.read'],
      rate_limit_rpm: i % 2 ? 600 : null,
      allowed_ips: i % 5 === 0 ? ['10.0.0.0/8'] : [],
      allowed_regions: i % 7 === 0 ? ['local'] : [],
    });
  }
  return out;
}

async function coldStart(cmd: string, args: string[], url: (port: string) => string, headers: Record<string, string>): Promise<number> {
  const t0 = performance.now();
  const proc = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await listeningPort(proc, 20_000);
  const r = await fetch(url(port), { headers });
  await r.arrayBuffer();
  const ms = performance.now() - t0;
  if (r.status !== 200) throw new Error(`first request answered ${r.status}`);
  await new Promise<void>((res) => {
    proc.once('exit', () => res());
    proc.kill('SIGTERM');
  });
  return ms;
}

export default async function edgeBench(): Promise<void> {
  const now = Date.now();
  const cell = await generateEd25519();
  const signer = signerFromJwk(cell.kid, cell.privateJwk);
  const trusted = [{ kid: cell.kid, jwk: cell.publicJwk }];
  const N = 100_000;
  const recs = records(N, now);
  let t = performance.now();
  const text = await buildKeyBundle({
    issuer: 'cell-bench',
    signer,
    audience: 'dev',
    version: 1,
    issuedAt: now,
    expiresAt: now + 86_400_000,
    records: recs,
    tombstones: [],
  });
  const buildMs = performance.now() - t;
  const bytes = Buffer.byteLength(text);
  console.log(
    `  bundle of ${fmt(N)} keys: ${fmt(bytes / 1e6, 1)} MB, ${fmt(bytes / N, 0)} bytes per key (built and signed in ${fmt(buildMs)} ms)`,
  );

  const file = join(mkdtempSync(join(tmpdir(), 'edge-bench-')), 'keys.json');
  writeFileSync(file, text);
  const loads: number[] = [];
  const parses: number[] = [];
  let index!: Awaited<ReturnType<typeof openKeyBundle>>['index'];
  let coreIndex!: Awaited<ReturnType<typeof openKeyBundle>>['index'];
  for (let i = 0; i < 3; i++) {
    t = performance.now();
    JSON.parse(readFileSync(file, 'utf8').slice(text.indexOf('\n') + 1));
    parses.push(performance.now() - t);
    t = performance.now();
    // What `edge serve` does: read the file's bytes, verify, parse, index.
    index = (await openKeyBundle(readFileSync(file), trusted, nodeSha256Hex)).index;
    loads.push(performance.now() - t);
  }
  coreIndex = (await openKeyBundle(text, trusted)).index;
  rmSync(dirname(file), { recursive: true, force: true });
  const load = median(loads);
  console.log(
    `  load + verify ${fmt(N)} keys: ${fmt(load)} ms (target < 500 ms: ${load < 500 ? 'met' : 'MISSED'}); bare JSON.parse of the same file: ${fmt(median(parses))} ms (ratio ${fmt(load / median(parses), 2)})`,
  );

  const M = 200_000;
  const ctx = { now, ip: '10.1.2.3', region: 'local' };
  const secrets = Array.from({ length: 1000 }, (_, i) => secretOf((i * 97) % N));
  let ok = 0;
  t = performance.now();
  for (let i = 0; i < M; i++) if (index.check(secrets[i % 1000]!, ctx).ok) ok++;
  const checkUs = ((performance.now() - t) * 1000) / M;
  t = performance.now();
  for (let i = 0; i < M; i++) nodeSha256Hex(secrets[i % 1000]!);
  const hashUs = ((performance.now() - t) * 1000) / M;
  t = performance.now();
  for (let i = 0; i < M; i++) coreIndex.check(secrets[i % 1000]!, ctx);
  const coreUs = ((performance.now() - t) * 1000) / M;
  console.log(
    `  offline key check (edge: native SHA-256 + core verifyPresentedKey): ${fmt(checkUs, 2)} µs per check (target < 10 µs: ${checkUs < 10 ? 'met' : 'MISSED'}; ${fmt(ok)} of ${fmt(M)} allowed); the SHA-256 alone: ${fmt(hashUs, 2)} µs (ratio ${fmt(checkUs / hashUs, 2)}); with core's pure-JS hashSecret instead: ${fmt(coreUs, 2)} µs`,
  );

  // The real edge: the single executable when built, else dist/edge.mjs under node.
  const sea = join(ROOT, 'dist/edge');
  const mjs = join(ROOT, 'dist/edge.mjs');
  const bin: [string, string[]] | null = existsSync(sea) ? [sea, []] : existsSync(mjs) ? [process.execPath, [mjs]] : null;
  await tokenBench(bin, signer, trusted, now);
  if (!bin) {
    console.log('  cold start: skipped (run `make edge` to build dist/edge)');
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'edge-bench-'));
  try {
    const dev = await generateEd25519();
    writeFileDurable(
      join(dir, 'dev', 'device.json'),
      JSON.stringify({ format_version: 1, device_id: dev.kid, public_jwk: dev.publicJwk, private_jwk: dev.privateJwk }),
      0o600,
    );
    writeFileDurable(
      join(dir, 'dev', 'trust.json'),
      JSON.stringify({ format_version: 1, cell_id: 'cell-bench', keys: trusted, publishers: [] }),
    );
    // What `edge init` writes beside device.json: the edge refuses a device without it.
    writeState(join(dir, 'dev'), initialState(dev.kid), {
      format_version: 1,
      device_id: dev.kid,
      public_jwk: dev.publicJwk,
      private_jwk: dev.privateJwk,
    });
    const small = recs.slice(0, 100).map((r) => ({ ...r, allowed_ips: [], allowed_regions: [], scopes: [] }));
    writeFileSync(
      join(dir, 'keys.json'),
      await buildKeyBundle({
        issuer: 'cell-bench',
        signer,
        audience: dev.kid,
        version: 1,
        issuedAt: now,
        expiresAt: now + 86_400_000,
        records: small,
        tombstones: [],
      }),
    );
    const headers = { authorization: `Bearer ${secretOf(0)}` };
    const [cmd, pre] = existsSync(sea) ? [sea, [] as string[]] : [process.execPath, [mjs]];
    const edgeRuns: number[] = [];
    const bareRuns: number[] = [];
    const bare =
      "require('node:http').createServer((q,s)=>{s.setHeader('content-type','application/json');s.end('{\"ok\":true}')}).listen(0,'127.0.0.1',function(){console.log('listening '+this.address().port)})";
    for (let i = 0; i < 5; i++) {
      edgeRuns.push(
        await coldStart(
          cmd,
          [...pre, 'serve', '--data', join(dir, 'dev'), '--bundle', join(dir, 'keys.json'), '--port', '0'],
          (p) => `http://127.0.0.1:${p}/api/public/v1/edge/authz/edge.read`,
          headers,
        ),
      );
      bareRuns.push(await coldStart(process.execPath, ['-e', bare], (p) => `http://127.0.0.1:${p}/`, {}));
    }
    const cs = median(edgeRuns);
    console.log(
      `  cold start to first answered request (${existsSync(sea) ? 'dist/edge' : 'node dist/edge.mjs'}, 100-key bundle): ${fmt(cs)} ms (target < 400 ms: ${cs < 400 ? 'met' : 'MISSED'}); bare node:http server: ${fmt(median(bareRuns))} ms (ratio ${fmt(cs / median(bareRuns), 2)})`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Issue 16: OAuth access tokens judged offline at the edge. */
async function tokenBench(
  bin: [string, string[]] | null,
  signer: ReturnType<typeof signerFromJwk>,
  trusted: { kid: string; jwk: JsonWebKey }[],
  now: number,
): Promise<void> {
  const dev = await generateEd25519();
  const { text, sign, audience: AUD, oauthJwk } = await tokenBundle(signer, dev.kid, now);
  const { index } = await openKeyBundle(text, trusted);

  // 5. First presentation (no cache) vs a bare native Ed25519 verify of the same signing inputs.
  const N = 4000;
  const fresh: string[] = [];
  for (let i = 0; i < N; i++) fresh.push(await sign());
  const judgeNoCache = tokenJudgeFromBundle(index, { audience: AUD, replay: new MemoryReplayCache() })!;
  const facts: TokenRequestFacts = {
    scheme: 'bearer',
    method: 'GET',
    uri: 'http://127.0.0.1/api/public/v1/edge/status',
    dpop: null,
    certThumbprint: () => null,
    now,
  };
  for (let i = 0; i < 200; i++) await judgeAccessToken(fresh[i]!, facts, judgeNoCache); // warm-up
  let t = performance.now();
  let ok = 0;
  for (const tk of fresh) if ((await judgeAccessToken(tk, facts, judgeNoCache)).ok) ok++;
  const firstUs = ((performance.now() - t) * 1000) / N;
  const pub = createPublicKey({ key: oauthJwk as import('node:crypto').JsonWebKey, format: 'jwk' });
  const parts = fresh.map((tk) => {
    const [h, p, sg] = tk.split('.');
    return [Buffer.from(`${h}.${p}`), Buffer.from(sg!, 'base64url')] as const;
  });
  for (let i = 0; i < 200; i++) nodeVerify(null, parts[i]![0], pub, parts[i]![1]);
  t = performance.now();
  let vok = 0;
  for (const [data, sig] of parts) if (nodeVerify(null, data, pub, sig)) vok++;
  const verifyUs = ((performance.now() - t) * 1000) / N;
  console.log(
    `  token, first presentation (edge: core judgeAccessToken, no cache, ${fmt(ok)}/${fmt(N)} allowed): ${fmt(firstUs, 1)} µs per token; bare native Ed25519 verify (node:crypto, ${fmt(vok)} valid): ${fmt(verifyUs, 1)} µs (ratio ${fmt(firstUs / verifyUs, 2)})`,
  );

  // 6. A token seen before: from the verified-token cache.
  const judge = tokenJudgeFromBundle(index, { audience: AUD, replay: new MemoryReplayCache(), cache: new VerifiedTokenCache() })!;
  const seen = fresh.slice(0, 1000);
  for (const tk of seen) await judgeAccessToken(tk, facts, judge);
  const M = 200_000;
  t = performance.now();
  let cok = 0;
  for (let i = 0; i < M; i++) if ((await judgeAccessToken(seen[i % 1000]!, facts, judge)).ok) cok++;
  const cachedUs = ((performance.now() - t) * 1000) / M;
  console.log(
    `  token seen before (verified-token cache; exp, denylist, subject and authority still checked): ${fmt(cachedUs, 2)} µs per check (target < 10 µs: ${cachedUs < 10 ? 'met' : 'MISSED'}; ${fmt(cok)} of ${fmt(M)} allowed); ratio to the first presentation ${fmt(cachedUs / firstUs, 3)}`,
  );

  // 7. The real edge: DPoP-bound (fresh proof per request) vs plain bearer, same operation, 5 alternating rounds.
  if (!bin) {
    console.log('  edge, DPoP-bound vs bearer: skipped (run `make edge` to build dist/edge)');
    return;
  }
  const edge = await startTokenEdge(bin[0], bin[1]);
  try {
    await edge.bearerLoad(1); // warm-up
    await edge.dpopLoad(await edge.proofs(1000));
    const ROUNDS = 5;
    const P = 6000;
    const b = { rps: [] as number[], cpu: [] as number[], p99: 0, non2xx: 0 };
    const d = { rps: [] as number[], cpu: [] as number[], p99: 0, non2xx: 0 };
    for (let r = 0; r < ROUNDS; r++) {
      const proofs = await edge.proofs(P); // signed here, before the round: not the edge's work
      const one = async (which: 'bearer' | 'dpop') => {
        const x = which === 'bearer' ? await edge.bearerLoad(2) : await edge.dpopLoad(proofs);
        const into = which === 'bearer' ? b : d;
        into.rps.push(x.rps);
        into.cpu.push(x.cpuUs);
        into.p99 = Math.max(into.p99, x.p99);
        into.non2xx += x.non2xx;
      };
      for (const which of r % 2 === 0 ? (['bearer', 'dpop'] as const) : (['dpop', 'bearer'] as const)) await one(which);
    }
    const [bRps, dRps, bCpu, dCpu] = [median(b.rps), median(d.rps), median(b.cpu), median(d.cpu)];
    console.log(
      `  edge, DPoP-bound GET (fresh proof per request, replay cache in memory, a horizon on disk): ${fmt(dRps)} req/s (worst p99 ${d.p99} ms, non-2xx ${d.non2xx}) vs plain bearer ${fmt(bRps)} req/s (worst p99 ${b.p99} ms, non-2xx ${b.non2xx}) -> ratio ${fmt(dRps / bRps, 2)}; the edge's CPU per request ${fmt(dCpu)} vs ${fmt(bCpu)} µs (ratio ${fmt(bCpu / dCpu, 2)}) (medians of ${ROUNDS} alternating rounds: ${P} DPoP requests, 2 s of bearer)`,
    );
  } finally {
    await edge.stop();
  }
}
