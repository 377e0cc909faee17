/**
 * Gateway throughput: API-key-authenticated GET on the real cell process vs a
 * raw node:http server answering the same JSON (target >= 0.6); durable
 * writes (a POST that commits) at 32 connections vs bare fsync calls/s on
 * the same disk (target >= 1,000 acknowledged writes/s).
 */
import { closeSync, fsyncSync, mkdtempSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fmt, load, spawnServer } from './_util.ts';

const CELL = resolve(import.meta.dirname, '../dist/cell.mjs');

const RAW_SERVER = `
const http = require('node:http');
const body = JSON.stringify(${JSON.stringify({ key_id: 'key_00000000000000000000', owner_id: 'usr_00000000000000000000', name: 'bench', status: 'active', scopes: [], rate_limit_rpm: null, allowed_ips: [], allowed_regions: [], created_at: '2026-01-01T00:00:00.000Z', created_by: 'usr_00000000000000000000', expires_at: null, rotated_at: null, previous_secret_valid_until: null, revoked_at: null })});
http.createServer((req, res) => { res.writeHead(200, { 'content-type': 'application/json' }); res.end(body); })
  .listen(0, '127.0.0.1', function () { console.log('listening ' + this.address().port); });
`;

// The same JSON from a bare Hono app on @hono/node-server: the framework's own ceiling.
const HONO_SERVER = `
import { Hono } from 'hono';
import { serve } from '@hono/node-server';
const body = JSON.parse(${JSON.stringify(JSON.stringify({ key_id: 'key_00000000000000000000', owner_id: 'usr_00000000000000000000', name: 'bench', status: 'active', scopes: [], rate_limit_rpm: null, allowed_ips: [], allowed_regions: [], created_at: '2026-01-01T00:00:00.000Z', created_by: 'usr_00000000000000000000', expires_at: null, rotated_at: null, previous_secret_valid_until: null, revoked_at: null }))});
const app = new Hono();
app.get('/x/:id', (c) => c.json(body));
serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (i) => console.log('listening ' + i.port));
`;

function bareFsyncRate(dir: string, seconds: number): number {
  const fd = openSync(join(dir, 'fsync.bin'), 'w');
  const buf = Buffer.alloc(200, 7);
  let n = 0;
  const end = performance.now() + seconds * 1000;
  while (performance.now() < end) {
    writeSync(fd, buf);
    fsyncSync(fd);
    n++;
  }
  closeSync(fd);
  return n / seconds;
}

export default async function run(): Promise<void> {
  const data = mkdtempSync(join(tmpdir(), 'bench-gw-'));
  const cell = await spawnServer([
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
  const raw = await spawnServer(['-e', RAW_SERVER]);
  const hono = await spawnServer(['--input-type=module', '-e', HONO_SERVER]);
  try {
    const key = readFileSync(join(data, 'bootstrap-admin.key'), 'utf8').trim();
    const auth = { authorization: `Bearer ${key}` };
    const list = (await (await fetch(`${cell.url}/api/public/v1/admin/api-keys?limit=1`, { headers: auth })).json()) as {
      keys: { key_id: string }[];
    };
    const keyUrl = `${cell.url}/api/public/v1/admin/api-keys/${list.keys[0]!.key_id}`;
    await load({ url: keyUrl, connections: 10, seconds: 1, headers: auth }); // warm-up
    await load({ url: raw.url, connections: 10, seconds: 1 });
    const c = await load({ url: keyUrl, connections: 50, seconds: 5, headers: auth });
    const r = await load({ url: raw.url, connections: 50, seconds: 5 });
    const h = await load({ url: `${hono.url}/x/key_00000000000000000000`, connections: 50, seconds: 5 });
    console.log(
      `  authenticated GET (API key): cell ${fmt(c.rps)} req/s (p99 ${c.p99} ms, non-2xx ${c.non2xx}) vs raw node:http ${fmt(r.rps)} req/s -> ratio ${fmt(c.rps / r.rps, 2)} (target >= 0.6)`,
    );
    console.log(
      `  for scale: a bare Hono app answering the same JSON ${fmt(h.rps)} req/s -> bare Hono / raw ${fmt(h.rps / r.rps, 2)}, cell / bare Hono ${fmt(c.rps / h.rps, 2)}`,
    );

    const fsyncs = bareFsyncRate(data, 2);
    const m = await load({
      url: `${cell.url}/api/public/v1/admin/api-keys`,
      connections: 32,
      seconds: 5,
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'bench', scopes: ['audit.read'] }),
    });
    console.log(
      `  durable writes (POST api-keys, 32 connections, group commit): ${fmt(m.rps)} acknowledged/s (non-2xx ${m.non2xx}) vs bare fsync ${fmt(fsyncs)} calls/s -> ratio ${fmt(m.rps / fsyncs, 2)} (target >= 1,000/s)`,
    );
  } finally {
    await cell.stop();
    await raw.stop();
    await hono.stop();
    rmSync(data, { recursive: true, force: true });
  }
}
