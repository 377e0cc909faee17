import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import type { ToolCaller } from '../../../cell/tools/catalog.ts';
import { isServiceError } from '../../../core/errors.ts';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';

let t: InProcess;
let url: string;
let server: ReturnType<typeof createServer>;
before(async () => {
  // The test server is on loopback: this cell's operator allow-lists it (the default refuses it).
  t = await inProcessCell({ config: { egressAllowPrivate: ['127.0.0.1'] } });
  server = createServer((req, res) => {
    if (req.url === '/big') {
      res.end('x'.repeat(100 * 1024));
      return;
    }
    if (req.url === '/redirect') {
      res.writeHead(302, { location: 'http://example.com/' });
      res.end();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('hello from the allowlist');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(async () => {
  await t.close();
  server.close();
  server.closeAllConnections();
});

const ctx = (authority: ToolCaller['authority'], workspaceId = 'ws1'): ToolCaller => ({ workspaceId, agentId: 'agt_test', authority });
/** A catalog tool, run through a cell's tools module (this file's allow-listed cell unless another is given). */
const getTool = (name: string, cell: InProcess = t) => ({
  run: (caller: ToolCaller, args: Record<string, unknown>) => cell.modules.tools.tools.run(name, caller, args),
});
const refusedWith = (reason: string) => (e: unknown) => isServiceError(e) && e.code === 'forbidden' && e.details?.['reason'] === reason;

test('kv.put needs egress to the workspace; kv.get needs a data grant and enough clearance', async () => {
  const put = getTool('kv.put');
  const get = getTool('kv.get');
  await assert.rejects(put.run(ctx({ egress_allowlist: [] }), { key: 'a', value: 1 }), refusedWith('egress_denied'));
  await assert.rejects(put.run(ctx({ egress_allowlist: ['kv:other'] }), { key: 'a', value: 1 }), refusedWith('egress_denied'));
  assert.deepEqual(await put.run(ctx({ egress_allowlist: ['kv:ws1'] }), { key: 'a', value: { n: 1 } }), { ok: true, key: 'a' });
  await assert.rejects(
    put.run(ctx({ egress_allowlist: ['kv:ws1'], clearance_level: 1 }), { key: 's', value: 'secret', classification: 2 }),
    refusedWith('clearance_insufficient'),
  );
  await put.run(ctx({ egress_allowlist: ['kv:*'], clearance_level: 2 }), { key: 's', value: 'secret', classification: 2 });

  await assert.rejects(get.run(ctx({ data_grant_ids: [] }), { key: 'a' }), refusedWith('data_not_granted'));
  assert.deepEqual(await get.run(ctx({ data_grant_ids: ['kv:ws1'] }), { key: 'a' }), { found: true, value: { n: 1 } });
  assert.deepEqual(await get.run(ctx({ data_grant_ids: ['kv:ws1'] }, 'ws1'), { key: 'missing' }), { found: false });
  await assert.rejects(
    get.run(ctx({ data_grant_ids: ['kv:ws1'], clearance_level: 1 }), { key: 's' }),
    refusedWith('clearance_insufficient'),
  );
  assert.deepEqual(await get.run(ctx({ data_grant_ids: ['kv:*'], clearance_level: 2 }), { key: 's' }), { found: true, value: 'secret' });
  // Workspaces are separate.
  assert.deepEqual(await get.run(ctx({ data_grant_ids: ['kv:*'] }, 'ws2'), { key: 'a' }), { found: false });
  await assert.rejects(
    put.run(ctx({ egress_allowlist: ['kv:*'] }), { key: 'bad key!', value: 1 }),
    (e: unknown) => isServiceError(e) && e.code === 'invalid_request',
  );
});

test('http.get fetches only allowlisted URLs, without redirects, bounded', async () => {
  const h = getTool('http.get');
  await assert.rejects(h.run(ctx({ egress_allowlist: [] }), { url: `${url}/` }), refusedWith('egress_denied'));
  await assert.rejects(h.run(ctx({ egress_allowlist: ['https://example.com'] }), { url: `${url}/` }), refusedWith('egress_denied'));
  const r = (await h.run(ctx({ egress_allowlist: [url] }), { url: `${url}/` })) as { status: number; body: string };
  assert.equal(r.status, 200);
  assert.equal(r.body, 'hello from the allowlist');
  const big = (await h.run(ctx({ egress_allowlist: ['127.0.0.1'] }), { url: `${url}/big` })) as { body: string; truncated: boolean };
  assert.equal(big.truncated, true);
  assert.equal(big.body.length, 64 * 1024);
  const redir = (await h.run(ctx({ egress_allowlist: [url] }), { url: `${url}/redirect` })) as { status: number };
  assert.equal(redir.status, 302, 'redirects are not followed (they could leave the allowlist)');
  await assert.rejects(
    h.run(ctx({ egress_allowlist: ['*'] }), { url: 'file:///etc/passwd' }),
    (e: unknown) => isServiceError(e) && e.code === 'invalid_request',
  );
});

test('http.get never reaches loopback, private or link-local addresses unless the operator allow-listed them, whatever the allowlist says', async () => {
  const strict = await inProcessCell();
  try {
    const h = getTool('http.get', strict);
    const c = (u: string) => h.run({ workspaceId: 'ws1', agentId: 'agt_test', authority: { egress_allowlist: ['*'] } }, { url: u });
    const port = (server.address() as AddressInfo).port;
    for (const u of [
      `${url}/`,
      `http://localhost:${port}/`,
      `http://[::1]:${port}/`,
      `http://[::ffff:127.0.0.1]:${port}/`,
      // IPv6 forms that embed a loopback IPv4 address (security round 3, finding 13)
      `http://[::127.0.0.1]:${port}/`,
      'http://[::7f00:2]/',
      `http://[64:ff9b::127.0.0.1]:${port}/`,
      `http://[2002:7f00:1::]:${port}/`,
      'http://169.254.169.254/latest/meta-data/',
      'http://10.0.0.1/',
      'http://192.168.1.1/',
      'http://0.0.0.0/',
      'http://100.64.0.1/',
    ]) {
      await assert.rejects(c(u), refusedWith('egress_private_address'), u);
    }
    // The name is judged at connect time (DNS rebinding cannot swap in a private address after the check).
    await assert.rejects(c(`http://localhost:${port}/`), refusedWith('egress_private_address'));
    // The allow-listed cell reaches the same server.
    const ok = (await getTool('http.get').run(ctx({ egress_allowlist: ['*'] }), { url: `http://localhost:${port}/` })) as {
      status: number;
    };
    assert.equal(ok.status, 200);
  } finally {
    await strict.close();
  }
});

test('clock.now reads the cell clock; calc returns a value', async () => {
  assert.equal(((await getTool('clock.now').run(ctx({}), {})) as { epoch_ms: number }).epoch_ms, t.clock.now());
  assert.deepEqual(await getTool('calc').run(ctx({}), { expression: '2^10' }), { value: 1024 });
});
