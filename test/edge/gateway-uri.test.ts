// The URI a DPoP proof's htu is checked against at the edge: the connection's scheme, the Host header and
// the route, never an absolute-form request target (the end-to-end attack is in tokens.e2e.test.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Context } from 'hono';
import { ownRequestUri, type EdgeEnv } from '../../edge/gateway.ts';

/** What @hono/node-server hands the app: the request URL it built, and the connection. */
function ctx(url: string, host: string | undefined, encrypted: boolean): Context<EdgeEnv> {
  return {
    req: { url },
    env: { incoming: { headers: host === undefined ? {} : { host }, socket: { remoteAddress: '127.0.0.1', encrypted } } },
  } as unknown as Context<EdgeEnv>;
}
const reason = (e: unknown) => (e as { details?: { reason?: string } }).details?.reason;

test('an absolute-form target names another origin: the URI is still the connection scheme and the Host', () => {
  // `GET https://edge.example:8443/x?y=1 HTTP/1.1` on a plain connection, Host: 10.0.0.7:8090.
  assert.equal(ownRequestUri(ctx('https://edge.example:8443/api/x?y=1', '10.0.0.7:8090', false)), 'http://10.0.0.7:8090/api/x?y=1');
  assert.equal(ownRequestUri(ctx('http://edge.example/api/x', '10.0.0.7:8443', true)), 'https://10.0.0.7:8443/api/x');
  assert.equal(ownRequestUri(ctx('http://[::1]:9/api/x', '[::1]:9', false)), 'http://[::1]:9/api/x');
});

test('a missing Host, or one that is not host[:port], is refused (400 bad_host)', () => {
  for (const host of [undefined, '', 'a b', 'evil.example/path', 'user@evil.example', 'h:99999999', '[:::::]']) {
    assert.throws(
      () => ownRequestUri(ctx('http://x/api/x', host, false)),
      (e) => reason(e) === 'bad_host' && (e as { code?: string }).code === 'invalid_request',
      String(host),
    );
  }
});

test('without a connection (in-process requests) the URL is the one the caller built', () => {
  const c = { req: { url: 'http://localhost/api/x' }, env: {} } as unknown as Context<EdgeEnv>;
  assert.equal(ownRequestUri(c), 'http://localhost/api/x');
});
