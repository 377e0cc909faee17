// Runs INSIDE a network namespace with only loopback (spawned by tokens.e2e.test.ts under `unshare -n`):
// starts the real dist/edge with mTLS, answers the token rows for the device's tokens, puts reverse
// proxies in front of it, replays a proof across a kill -9 and restart, steps the device clock past
// expiry, and prints every observation as one JSON line for the outer test.
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { networkInterfaces } from 'node:os';
import { connect as tlsConnect } from 'node:tls';
import { join } from 'node:path';
import { Agent, fetch as ufetch } from 'undici';
import * as oauth from 'oauth4webapi';
import { answerOf, oauth4webapiRequest, proof, runRows, type RowEnv, type TokenName, type Who } from './_token-rows.ts';
import { serveEdge, stopEdge } from './_listening.ts';

interface Config {
  edge: string;
  data: string;
  keyBundle: string;
  certDir: string;
  deviceId: string;
  cellUrl: string;
  tokens: Record<TokenName, string>;
  dpopKey: RowEnv['dpopKey'];
  issuer: string;
}
const cfg = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as Config;
const pem = (f: string) => readFileSync(join(cfg.certDir, f));
const out: Record<string, unknown> = { interfaces: Object.keys(networkInterfaces()) };
const ca = pem('ca.pem');
const agents: Record<Who, Agent> = {
  none: new Agent({ connect: { ca } }),
  robot: new Agent({ connect: { ca, cert: pem('robot.pem'), key: pem('robot.key') } }),
  intruder: new Agent({ connect: { ca, cert: pem('intruder.pem'), key: pem('intruder.key') } }),
  stranger: new Agent({ connect: { ca, cert: pem('stranger.pem'), key: pem('stranger.key') } }),
};
const fetchAs = (who: Who) =>
  ((url: string, init?: RequestInit) => ufetch(url, { ...(init as object), dispatcher: agents[who] })) as unknown as typeof fetch;
const PATH = '/api/public/v1/edge/authz/edge.read';

function startEdge(extra: string[] = [], port = '0'): Promise<{ url: string; proc: ChildProcess }> {
  const tls = ['--tls-cert', join(cfg.certDir, 'server.pem'), '--tls-key', join(cfg.certDir, 'server.key')];
  return serveEdge(cfg, ['--port', port, ...tls, '--client-ca', join(cfg.certDir, 'ca.pem'), ...extra], {
    ...process.env,
    AGENT_CELL_EDGE_TEST_CLOCK: '1',
  });
}

/** A tiny reverse proxy (plain http) in front of the edge: `rewrite` strips a path prefix; else the path is kept. */
function proxy(target: string, mode: 'rewrite' | 'tls-terminating'): Promise<{ url: string; close(): void }> {
  const t = new URL(target);
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const path = mode === 'rewrite' ? (req.url ?? '/').replace(/^\/edge-proxy/, '') : (req.url ?? '/');
    const headers = {
      ...req.headers,
      host: t.host,
      'x-forwarded-host': req.headers.host ?? '',
      'x-forwarded-proto': 'http',
      'x-forwarded-for': '127.0.0.1',
    };
    const up = httpsRequest({ host: t.hostname, port: t.port, path, method: req.method, headers, ca }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', () => {
      res.writeHead(502);
      res.end();
    });
    req.pipe(up);
  });
  return new Promise((res) =>
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as { port: number }).port;
      res({ url: `http://127.0.0.1:${port}`, close: () => server.close() });
    }),
  );
}

/** One request on a raw TLS socket, its request line written by hand: "status error reason". */
function rawRequest(origin: string, requestLine: string, headers: Record<string, string>): Promise<string> {
  const u = new URL(origin);
  return new Promise((res, rej) => {
    const s = tlsConnect({ host: u.hostname, port: Number(u.port), ca }, () => {
      const lines = [requestLine, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), 'connection: close', '', ''];
      s.write(lines.join('\r\n')); // no end(): a TLS half-close would drop the connection before the answer
    });
    const chunks: Buffer[] = [];
    s.on('data', (d: Buffer) => chunks.push(d));
    s.on('error', rej);
    s.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const [head = '', ...rest] = text.split('\r\n\r\n');
      let body = rest.join('\r\n\r\n');
      if (/^transfer-encoding:\s*chunked/im.test(head)) {
        let out = '';
        for (let i = 0; ; ) {
          const nl = body.indexOf('\r\n', i);
          const n = Number.parseInt(body.slice(i, nl), 16);
          if (!n) break;
          out += body.slice(nl + 2, nl + 2 + n);
          i = nl + 2 + n + 2;
        }
        body = out;
      }
      const status = Number(head.split(' ')[1]);
      if (!(status >= 200 && status <= 599)) res(`no HTTP answer: ${JSON.stringify(text.slice(0, 200))}`);
      else res(answerOf(new Response(body, { status })));
    });
  });
}

try {
  out['cell_reachable'] = await fetch(cfg.cellUrl, { signal: AbortSignal.timeout(2000) }).then(
    () => true,
    () => false,
  );
  let e = await startEdge();
  const env: RowEnv = { origin: e.url, path: PATH, tokens: cfg.tokens, dpopKey: cfg.dpopKey, fetch: fetchAs };

  const meta = await fetchAs('none')(`${e.url}/.well-known/oauth-protected-resource`);
  out['metadata'] = await oauth.processResourceDiscoveryResponse(new URL(`edge:${cfg.deviceId}`), meta);
  out['rows'] = await runRows(env);

  // An absolute-form request target (RFC 9112 3.2.2) names another origin, and the proof's htu matches it:
  // the edge judges the htu against its own connection (TLS) and the Host header, so the forged URL fails;
  // the same request with a proof for the connection's own origin is served.
  const forged = 'https://edge.example:8443';
  const absolute = async (htuOrigin: string) =>
    rawRequest(e.url, `GET ${forged}${PATH} HTTP/1.1`, {
      host: new URL(e.url).host,
      authorization: `DPoP ${cfg.tokens.dpop}`,
      dpop: await proof({ ...env, origin: htuOrigin }, cfg.tokens.dpop),
    });
  out['absolute_form'] = { forged_htu: await absolute(forged), own_htu: await absolute(e.url) };

  for (const [key, mode, prefix] of [
    ['proxy_rewrite', 'rewrite', '/edge-proxy'],
    ['proxy_tls_terminating', 'tls-terminating', ''],
  ] as const) {
    const p = await proxy(e.url, mode);
    try {
      out[key] = await oauth4webapiRequest(env, `${p.url}${prefix}${PATH}`, { insecure: true });
    } finally {
      p.close();
    }
  }
  out['direct_after_proxy'] = (await oauth4webapiRequest(env, e.url + PATH)).answer;

  // A proof accepted, the edge killed (-9) and restarted on the same address: the same proof is still a replay.
  const p = await proof(env, cfg.tokens.dpop);
  const send = (url: string, dpop: string) =>
    fetchAs('none')(url + PATH, { headers: { authorization: `DPoP ${cfg.tokens.dpop}`, dpop } }).then(answerOf);
  const before = await send(e.url, p);
  await stopEdge(e.proc, 'SIGKILL');
  e = await startEdge([], new URL(e.url).port);
  const after = await send(e.url, p);
  const fresh = await send(e.url, await proof({ ...env, origin: e.url }, cfg.tokens.dpop));
  out['replay_restart'] = { before, after_restart: after, fresh_after_restart: fresh };
  await stopEdge(e.proc);

  // Ten minutes and a second later on the device clock, the plain token has expired.
  e = await startEdge(['--now-offset-ms', String(601_000)]);
  out['expired'] = await fetchAs('none')(e.url + PATH, { headers: { authorization: `Bearer ${cfg.tokens.plain}` } }).then(answerOf);
  await stopEdge(e.proc);
} catch (err) {
  out['error'] = err instanceof Error ? err.stack : String(err);
}
for (const a of Object.values(agents)) await a.close();
process.stdout.write(JSON.stringify(out) + '\n');
