/**
 * Keep-alive connections against the real cell process (issue 13): requests
 * the gateway answers before reading their body (401 on a large POST, 413 on
 * an oversize one, 400 on a body nested too deep, …) must leave the
 * connection usable, so a client's pool loses nothing. 10,000 mixed requests,
 * half through undici's Pool, half through node:http's keep-alive Agent, four
 * sockets each: every one gets its answer, none a reset.
 */
import { strict as assert } from 'node:assert';
import { Agent, request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { Pool } from 'undici';
import { startCellProcess, type CellProcess } from '../helpers/cell-process.ts';

const TOTAL = 10_000;
const SOCKETS = 4;
const P = '/api/public/v1/admin';

interface Shape {
  name: string;
  method: 'GET' | 'POST';
  path: string;
  auth: boolean;
  body?: Buffer;
  /** Send the body chunked (no Content-Length): the gateway learns its size only by reading. */
  chunked?: boolean;
  status: number;
}

function shapes(): Shape[] {
  const big = Buffer.alloc(300 * 1024, 'a');
  const oversize = Buffer.alloc(1024 * 1024 + 4096, 'b');
  const deep = Buffer.from('['.repeat(200) + ']'.repeat(200));
  return [
    { name: 'authenticated GET', method: 'GET', path: `${P}/ai/tool-registry`, auth: true, status: 200 },
    { name: 'anonymous GET', method: 'GET', path: `${P}/ai/tool-registry`, auth: false, status: 401 },
    { name: 'anonymous POST, 300 KB body', method: 'POST', path: `${P}/principals`, auth: false, body: big, status: 401 },
    {
      name: 'anonymous POST, 300 KB chunked body',
      method: 'POST',
      path: `${P}/principals`,
      auth: false,
      body: big,
      chunked: true,
      status: 401,
    },
    { name: 'oversize POST', method: 'POST', path: `${P}/principals`, auth: true, body: oversize, status: 400 },
    { name: 'oversize chunked POST', method: 'POST', path: `${P}/principals`, auth: true, body: oversize, chunked: true, status: 400 },
    { name: 'body nested too deep', method: 'POST', path: `${P}/principals`, auth: true, body: deep, status: 400 },
    { name: 'invalid body', method: 'POST', path: `${P}/principals`, auth: true, body: Buffer.from('{}'), status: 400 },
    { name: 'unknown route, 300 KB body', method: 'POST', path: '/nowhere', auth: false, body: big, status: 404 },
  ];
}

/** Mostly small requests, with the early rejections often enough to meet every socket many times. */
const WEIGHTS = [40, 10, 8, 4, 3, 2, 8, 20, 5];

function pick(rand: () => number, all: Shape[]): Shape {
  const total = WEIGHTS.reduce((a, b) => a + b, 0);
  let r = rand() * total;
  for (let i = 0; i < all.length; i++) {
    r -= WEIGHTS[i]!;
    if (r < 0) return all[i]!;
  }
  return all[0]!;
}

/** Deterministic: the same run every time (mulberry32). */
function seeded(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function* chunks(body: Buffer): Generator<Buffer> {
  for (let i = 0; i < body.length; i += 64 * 1024) yield body.subarray(i, i + 64 * 1024);
}

describe('keep-alive connections survive early answers', () => {
  let cell: CellProcess;
  before(async () => {
    // A bucket that never empties: this test is about connections, not the rate gate.
    cell = await startCellProcess({ args: ['--rate-capacity', '1000000', '--rate-refill', '1000000'] });
  });
  after(async () => {
    await cell?.stop();
    cell?.cleanup();
  });

  const tally = (results: { shape: string; status: number | string }[], all: Shape[]) => {
    const wrong = results.filter((r) => all.find((s) => s.name === r.shape)!.status !== r.status);
    const byKind = new Map<string, number>();
    for (const r of wrong) byKind.set(`${r.shape} -> ${r.status}`, (byKind.get(`${r.shape} -> ${r.status}`) ?? 0) + 1);
    return Object.fromEntries(byKind);
  };

  it(`undici Pool (${SOCKETS} connections): ${TOTAL / 2} mixed requests, every one answered as expected`, { timeout: 60_000 }, async () => {
    const all = shapes();
    const rand = seeded(13);
    const plan = Array.from({ length: TOTAL / 2 }, () => pick(rand, all));
    const pool = new Pool(cell.url, { connections: SOCKETS, pipelining: 1 });
    const results: { shape: string; status: number | string }[] = [];
    let next = 0;
    const worker = async () => {
      while (next < plan.length) {
        const s = plan[next++]!;
        const headers: Record<string, string> = { 'content-type': 'application/json' };
        if (s.auth) headers['authorization'] = `Bearer ${cell.adminKey}`;
        try {
          const res = await pool.request({
            method: s.method,
            path: s.path,
            headers,
            ...(s.body ? { body: s.chunked ? Readable.from(chunks(s.body)) : s.body } : {}),
          });
          await res.body.dump();
          results.push({ shape: s.name, status: res.statusCode });
        } catch (err) {
          results.push({ shape: s.name, status: (err as { code?: string }).code ?? String(err) });
        }
      }
    };
    try {
      await Promise.all(Array.from({ length: SOCKETS }, worker));
    } finally {
      await pool.close();
    }
    assert.equal(results.length, plan.length);
    assert.deepEqual(tally(results, all), {});
  });

  it(`node:http keep-alive Agent (${SOCKETS} sockets): ${TOTAL / 2} mixed requests, every one answered as expected`, {
    timeout: 60_000,
  }, async () => {
    const all = shapes();
    const rand = seeded(31);
    const plan = Array.from({ length: TOTAL / 2 }, () => pick(rand, all));
    const agent = new Agent({ keepAlive: true, maxSockets: SOCKETS });
    const url = new URL(cell.url);
    const results: { shape: string; status: number | string }[] = [];
    const sockets = new Set<Socket>();
    const one = (s: Shape) =>
      new Promise<number | string>((resolve) => {
        const headers: Record<string, string | number> = { 'content-type': 'application/json' };
        if (s.auth) headers['authorization'] = `Bearer ${cell.adminKey}`;
        if (s.body && !s.chunked) headers['content-length'] = s.body.length;
        const req = httpRequest({ agent, host: url.hostname, port: url.port, method: s.method, path: s.path, headers }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
          res.on('error', (err) => resolve((err as { code?: string }).code ?? String(err)));
        });
        req.on('error', (err) => resolve((err as { code?: string }).code ?? String(err)));
        req.on('socket', (sock) => sockets.add(sock));
        if (s.body && s.chunked) {
          for (const c of chunks(s.body)) req.write(c);
          req.end();
        } else {
          req.end(s.body);
        }
      });
    let next = 0;
    const worker = async () => {
      while (next < plan.length) {
        const s = plan[next++]!;
        results.push({ shape: s.name, status: await one(s) });
      }
    };
    try {
      await Promise.all(Array.from({ length: SOCKETS }, worker));
    } finally {
      agent.destroy();
    }
    assert.equal(results.length, plan.length);
    assert.deepEqual(tally(results, all), {});
    assert.ok(sockets.size <= SOCKETS, `${sockets.size} sockets opened: connections were lost and reopened`);
  });

  it('a body declared larger than the cell will ever read: answered with Connection: close, and the socket is closed', async () => {
    const url = new URL(cell.url);
    const sock = connect(Number(url.port), url.hostname);
    let text = '';
    sock.on('data', (d: Buffer) => {
      text += d.toString('latin1');
    });
    const closed = new Promise<void>((resolve) => sock.once('close', () => resolve()));
    sock.write(
      `POST ${P}/principals HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/json\r\nContent-Length: ${64 * 1024 * 1024}\r\n\r\n`,
    );
    await closed;
    assert.match(text, /^HTTP\/1\.1 400 /);
    assert.match(text, /\r\nconnection: close\r\n/i);
  });
});
