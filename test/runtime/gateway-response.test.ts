/**
 * runtime/gateway.ts's GatewayResponse writes the gateway's headers with the
 * answer's in one head, as setting them first with setHeader did: the
 * gateway's first in their order, a header the answer carries itself (in any
 * case) winning in their place, then the answer's others; also with a status
 * message, with the raw-array form, with no headers, and after setHeader.
 * A real node:http server and client.
 */
import assert from 'node:assert/strict';
import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { GatewayResponse } from '../../runtime/gateway.ts';

/** Serves one answer with `respond`, returns the head the client saw (raw header pairs, without Date/Connection/Keep-Alive). */
async function head(respond: (res: GatewayResponse) => void): Promise<{ status: number; message: string; headers: string[][] }> {
  const server = createServer({ ServerResponse: GatewayResponse as unknown as typeof ServerResponse }, (_req, res) =>
    respond(res as unknown as GatewayResponse),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const { port } = server.address() as AddressInfo;
    const res = await new Promise<IncomingMessage>((resolve, reject) =>
      request({ port, host: '127.0.0.1' }, resolve).on('error', reject).end(),
    );
    res.resume();
    const headers: string[][] = [];
    for (let i = 0; i < res.rawHeaders.length; i += 2)
      if (!['date', 'connection', 'keep-alive'].includes(res.rawHeaders[i]!.toLowerCase()))
        headers.push([res.rawHeaders[i]!, res.rawHeaders[i + 1]!]);
    return { status: res.statusCode!, message: res.statusMessage!, headers };
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
}

const GATEWAY = { 'X-RateLimit-Limit': '600', RateLimit: '"gateway";r=599;t=1' };

test('the gateway headers go first, the answer wins in their place, then its others', async () => {
  const h = await head((res) => {
    res.defer(GATEWAY);
    res.defer({ 'X-Request-Id': 'r1' });
    res.writeHead(429, { 'content-type': 'application/json', ratelimit: '"credential";r=0;t=60', 'Content-Length': '2' });
    res.end('{}');
  });
  assert.equal(h.status, 429);
  assert.deepEqual(h.headers, [
    ['X-RateLimit-Limit', '600'],
    ['ratelimit', '"credential";r=0;t=60'],
    ['X-Request-Id', 'r1'],
    ['content-type', 'application/json'],
    ['Content-Length', '2'],
  ]);
});

test('with a status message, with no headers of its own, with the raw-array form, after setHeader', async () => {
  const withMessage = await head((res) => {
    res.defer(GATEWAY);
    res.writeHead(200, 'Fine', { 'Content-Length': '0' });
    res.end();
  });
  assert.equal(withMessage.message, 'Fine');
  assert.deepEqual(withMessage.headers, [
    ['X-RateLimit-Limit', '600'],
    ['RateLimit', '"gateway";r=599;t=1'],
    ['Content-Length', '0'],
  ]);

  const bare = await head((res) => {
    res.defer(GATEWAY);
    res.end(); // node's implicit head goes through writeHead too
  });
  assert.deepEqual(bare.headers.slice(0, 2), [
    ['X-RateLimit-Limit', '600'],
    ['RateLimit', '"gateway";r=599;t=1'],
  ]);

  const raw = await head((res) => {
    res.defer(GATEWAY);
    res.writeHead(200, ['RateLimit', 'own', 'Content-Length', '0']);
    res.end();
  });
  assert.deepEqual(raw.headers, [
    ['X-RateLimit-Limit', '600'],
    ['RateLimit', 'own'],
    ['Content-Length', '0'],
  ]);

  const set = await head((res) => {
    res.setHeader('X-Early', 'e');
    res.defer(GATEWAY);
    res.writeHead(200, { 'x-ratelimit-limit': '5', 'Content-Length': '0' });
    res.end();
  });
  assert.deepEqual(set.headers, [
    ['X-Early', 'e'],
    ['x-ratelimit-limit', '5'],
    ['RateLimit', '"gateway";r=599;t=1'],
    ['Content-Length', '0'],
  ]);
});
