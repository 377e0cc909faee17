// http.request (runtime/http-request.ts), through a cell's tools module against a real HTTP server on
// loopback (the cell's operator allow-lists it): the method must be on the egress allowlist (entries without
// methods allow reading only), headers and bodies are bounded and an agent may not set credentials,
// hop-by-hop or framing headers, writes carry the call's effect key as Idempotency-Key, redirects are not
// followed, responses are cut at 64 KiB, the SSRF floor holds, a protected resource gets the delegated
// token, and a write that may have arrived without an answer is reported as an unknown outcome.
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { createLocalJWKSet, EmbeddedJWK, jwtVerify } from 'jose';
import type { ToolCaller } from '../../../cell/tools/catalog.ts';
import { DENIED_HEADERS } from '../../../runtime/http-request.ts';
import { isServiceError } from '../../../core/errors.ts';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}
let t: InProcess;
let origin: string;
let server: ReturnType<typeof createServer>;
const seen: Seen[] = [];
before(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => {
      body += c.toString('utf8');
    });
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      if (req.url === '/big') return void res.end('x'.repeat(100 * 1024));
      if (req.url === '/redirect') {
        res.writeHead(302, { location: 'http://example.com/elsewhere' });
        return void res.end();
      }
      // Reads the request, then closes the connection without an answer.
      if (req.url === '/vanish') return void req.socket.destroy();
      res.writeHead(req.method === 'POST' ? 201 : 200, { 'content-type': 'application/json' });
      res.end(req.method === 'HEAD' ? undefined : JSON.stringify({ method: req.method }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  t = await inProcessCell({ config: { egressAllowPrivate: ['127.0.0.1'], protectedResources: [`${origin}/api`] } });
});
after(async () => {
  await t.close();
  server.close();
  server.closeAllConnections();
});

const caller = (egress: string[], extra: Partial<ToolCaller> = {}): ToolCaller => ({
  workspaceId: 'ws1',
  agentId: 'agt_test',
  authority: { egress_allowlist: egress },
  ...extra,
});
const call = (c: ToolCaller, args: Record<string, unknown>, cell: InProcess = t) =>
  cell.modules.tools.tools.run('http.request', c, args) as Promise<Record<string, unknown>>;
const refusedWith = (reason: string) => (e: unknown) => isServiceError(e) && e.code === 'forbidden' && e.details?.['reason'] === reason;
const badArgs = (e: unknown) => isServiceError(e) && e.code === 'invalid_request' && e.details?.['reason'] === 'tool_bad_arguments';
const last = () => seen.at(-1)!;

test('each method is allowed only by an egress entry that allows it: without methods, GET and HEAD only', async () => {
  const before = seen.length;
  for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
    await assert.rejects(call(caller([origin, '*']), { method, url: `${origin}/x` }), (e: unknown) => {
      return refusedWith('egress_denied')(e) && (e as { details: Record<string, unknown> }).details['method'] === method;
    });
  }
  await assert.rejects(call(caller(['POST:https://example.com']), { method: 'POST', url: `${origin}/x` }), refusedWith('egress_denied'));
  await assert.rejects(call(caller([`PUT:${origin}`]), { method: 'POST', url: `${origin}/x` }), refusedWith('egress_denied'));
  assert.equal(seen.length, before, 'nothing reached the server');
  for (const method of ['GET', 'HEAD']) {
    const r = await call(caller([origin]), { method, url: `${origin}/read` });
    assert.equal(r['status'], 200);
    assert.equal(last().method, method);
  }
  for (const [method, entry] of [
    ['POST', `POST:${origin}`],
    ['PUT', `POST,PUT:${origin}`],
    ['PATCH', '*:127.0.0.1'],
    ['DELETE', '*:*'],
  ]) {
    const r = await call(caller([entry!]), { method, url: `${origin}/w` });
    assert.equal(last().method, method);
    assert.equal(r['status'], method === 'POST' ? 201 : 200);
  }
  const head = await call(caller([origin]), { method: 'HEAD', url: `${origin}/read` });
  assert.equal(head['body'], '');
  await assert.rejects(call(caller(['*:*']), { method: 'TRACE', url: `${origin}/x` }), badArgs);
  await assert.rejects(call(caller(['*:*']), { method: 'post', url: `${origin}/x` }), badArgs);
  await assert.rejects(call(caller(['*:*']), { method: 'POST', url: 'file:///etc/passwd' }), badArgs);
});

test('a write carries the effect key as Idempotency-Key (a Structured Field string); a read, none', async () => {
  const key = '0b9a4b3e-2f4c-8d1a-9c2b-1234567890ab';
  for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
    await call(caller(['*:*'], { effectKey: key }), { method, url: `${origin}/w` });
    assert.equal(last().headers['idempotency-key'], `"${key}"`, method);
  }
  for (const method of ['GET', 'HEAD']) {
    await call(caller(['*:*'], { effectKey: key }), { method, url: `${origin}/r` });
    assert.equal(last().headers['idempotency-key'], undefined, method);
  }
  await call(caller(['*:*']), { method: 'POST', url: `${origin}/w` });
  assert.equal(last().headers['idempotency-key'], undefined, 'no key, no header');
});

test('headers: bounded, and none an agent may not set (credentials, hop-by-hop, framing, the effect key)', async () => {
  const c = caller(['*:*']);
  const r = await call(c, { method: 'POST', url: `${origin}/w`, headers: { 'X-Trace': 'abc', 'Content-Type': 'text/csv' }, body: 'a,b' });
  assert.equal(r['status'], 201);
  assert.equal(last().headers['x-trace'], 'abc');
  assert.equal(last().headers['content-type'], 'text/csv');
  for (const name of [...DENIED_HEADERS, 'Authorization', 'COOKIE', 'Host', 'DPoP', 'Idempotency-Key', 'Proxy-Anything']) {
    const before = seen.length;
    await assert.rejects(
      call(c, { method: 'POST', url: `${origin}/w`, headers: { [name]: 'v' } }),
      refusedWith('header_not_allowed'),
      name,
    );
    assert.equal(seen.length, before, `${name}: nothing was sent`);
  }
  const many = Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`x-h${i}`, 'v']));
  await assert.rejects(call(c, { method: 'GET', url: `${origin}/r`, headers: many }), badArgs);
  await assert.rejects(call(c, { method: 'GET', url: `${origin}/r`, headers: { 'x-a': 'v\r\nx-b: smuggled' } }), badArgs);
  await assert.rejects(call(c, { method: 'GET', url: `${origin}/r`, headers: { 'bad name': 'v' } }), badArgs);
  await assert.rejects(call(c, { method: 'GET', url: `${origin}/r`, headers: { 'x-a': 'v'.repeat(4097) } }), badArgs);
  const wide = Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`x-w${i}`, 'v'.repeat(4000)]));
  await assert.rejects(call(c, { method: 'GET', url: `${origin}/r`, headers: wide }), badArgs);
  await assert.rejects(call(c, { method: 'GET', url: `${origin}/r`, headers: { 'X-A': '1', 'x-a': '2' } }), badArgs);
  await assert.rejects(call(c, { method: 'GET', url: `${origin}/r`, headers: { 'x-a': 1 } }), badArgs);
  await assert.rejects(call(c, { method: 'GET', url: `${origin}/r`, headers: ['x-a', 'v'] }), badArgs);
});

test('bodies: a string as it is, other JSON as application/json, at most 64 KiB, none with GET or HEAD', async () => {
  const c = caller(['*:*']);
  await call(c, { method: 'POST', url: `${origin}/w`, body: 'plain text' });
  assert.equal(last().body, 'plain text');
  await call(c, { method: 'PUT', url: `${origin}/w`, body: { amount: 5, items: [1, 2] } });
  assert.equal(last().body, '{"amount":5,"items":[1,2]}');
  assert.equal(last().headers['content-type'], 'application/json');
  await assert.rejects(call(c, { method: 'POST', url: `${origin}/w`, body: 'x'.repeat(64 * 1024 + 1) }), badArgs);
  await assert.rejects(call(c, { method: 'GET', url: `${origin}/r`, body: 'x' }), badArgs);
  await assert.rejects(call(c, { method: 'HEAD', url: `${origin}/r`, body: { a: 1 } }), badArgs);
});

test('responses: cut at 64 KiB; redirects are answers, never followed', async () => {
  const c = caller(['*:*']);
  const big = await call(c, { method: 'GET', url: `${origin}/big` });
  assert.equal(big['truncated'], true);
  assert.equal((big['body'] as string).length, 64 * 1024);
  const before = seen.length;
  const r = await call(c, { method: 'POST', url: `${origin}/redirect` });
  assert.equal(r['status'], 302);
  assert.equal(r['location'], 'http://example.com/elsewhere');
  assert.equal(seen.length, before + 1, 'the redirect was not followed');
});

test('the SSRF floor: no loopback, private or link-local address unless the operator allow-listed it, whatever the allowlist', async () => {
  const strict = await inProcessCell();
  try {
    const port = (server.address() as AddressInfo).port;
    for (const u of [
      `${origin}/`,
      `http://localhost:${port}/`,
      `http://[::ffff:127.0.0.1]:${port}/`,
      'http://169.254.169.254/',
      'http://10.0.0.1/',
    ]) {
      await assert.rejects(call(caller(['*:*']), { method: 'POST', url: u }, strict), refusedWith('egress_private_address'), u);
    }
  } finally {
    await strict.close();
  }
});

test('a protected resource gets the per-call delegated token (scope tools.http.request), its DPoP proof for the method', async () => {
  const me = (await t.request('GET', '/api/public/v1/admin/whoami', { token: t.adminKey })).body.principal.id as string;
  const c = caller(['*:*'], { onBehalf: { requester: me, runId: 'run_0123456789abcdef0123' } });
  const r = await call(c, { method: 'POST', url: `${origin}/api/orders`, body: { n: 1 } });
  const auth = String(last().headers['authorization']);
  assert.match(auth, /^DPoP /);
  const token = auth.slice('DPoP '.length);
  const jwks = createLocalJWKSet((await (await t.app.request('/oauth/jwks.json')).json()) as { keys: [] });
  const { payload } = await jwtVerify(token, jwks, { audience: `${origin}/api`, currentDate: new Date(t.clock.now()) });
  assert.equal(payload['sub'], me);
  assert.equal(payload['scope'], 'tools.http.request');
  const proof = await jwtVerify(String(last().headers['dpop']), EmbeddedJWK, { typ: 'dpop+jwt', currentDate: new Date(t.clock.now()) });
  assert.equal(proof.payload['htm'], 'POST');
  assert.equal(proof.payload['htu'], `${origin}/api/orders`);
  assert.deepEqual(Object.keys(r['on_behalf'] as object).sort(), ['jti', 'token_sha256']);
  // Outside the resource: no token.
  await call(c, { method: 'POST', url: `${origin}/public` });
  assert.equal(last().headers['authorization'], undefined);
});

test('a write that may have arrived and got no answer is an unknown outcome; an idempotent method or an unsent request is unreachable', async () => {
  const c = caller(['*:*']);
  const reason = (e: unknown) => (isServiceError(e) ? e.details?.['reason'] : String(e));
  for (const [method, expected] of [
    ['POST', 'outcome_unknown'],
    ['PATCH', 'outcome_unknown'],
    ['PUT', 'tool_unreachable'],
    ['DELETE', 'tool_unreachable'],
  ]) {
    const e = await call(c, { method, url: `${origin}/vanish` }).then(
      () => assert.fail('answered'),
      (x: unknown) => x,
    );
    assert.equal(reason(e), expected, method);
  }
  // Connection refused: the request never left, so it did nothing (unreachable, safe to retry).
  const closed = createServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', () => r()));
  const dead = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
  await new Promise<void>((r) => closed.close(() => r()));
  const e = await call(c, { method: 'POST', url: `${dead}/w` }).then(
    () => assert.fail('answered'),
    (x: unknown) => x,
  );
  assert.equal(reason(e), 'tool_unreachable');
});
