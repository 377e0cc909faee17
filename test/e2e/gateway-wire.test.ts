// The gateway as it answers on the wire from the real cell process: the
// rate-limit and request-id headers on every answer (success, 401, 429), a
// credential's own 429 headers winning over the gateway's, a repeated
// Authorization header refused, and the body gates (declared length, chunked
// body, nesting, a key twice in one object). The in-process tests (app.request) cannot see these: the
// real process writes the gateway's headers straight onto node:http's
// response and reads Content-Length and Authorization from node:http's
// parsed headers (runtime/gateway.ts, cell/app.ts).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { startCellProcess, type CellProcess } from '../helpers/cell-process.ts';

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  raw: string[];
  body: string;
}

/** One request over node:http, headers given as raw [name, value, …] pairs so a header can be repeated. */
function send(url: string, method: string, rawHeaders: string[], body?: string | string[]): Promise<Answer> {
  return new Promise((resolve, reject) => {
    // Raw header pairs get no Host header added by node:http.
    const req = http.request(url, { method, headers: ['host', new URL(url).host, ...rawHeaders] }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        text += d;
      });
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, raw: res.rawHeaders, body: text }));
    });
    req.on('error', reject);
    if (Array.isArray(body)) for (const chunk of body) req.write(chunk);
    else if (body !== undefined) req.write(body);
    req.end();
  });
}

/** How many times a header name appears in the answer. */
const count = (a: Answer, name: string) => a.raw.filter((v, i) => i % 2 === 0 && v.toLowerCase() === name).length;

const GATEWAY_HEADERS = [
  'ratelimit',
  'ratelimit-policy',
  'x-ratelimit-limit',
  'x-ratelimit-remaining',
  'x-ratelimit-reset',
  'x-request-id',
];

describe('the gateway on the wire (real process)', () => {
  let cell: CellProcess;
  const api = (p: string) => `${cell.url}/api/public/v1${p}`;
  const auth = () => ['authorization', `Bearer ${cell.adminKey}`];

  before(async () => {
    cell = await startCellProcess({ args: ['--rate-capacity', '40', '--rate-refill', '1'] });
  });
  after(async () => {
    await cell?.stop();
    cell?.cleanup();
  });

  it('a success carries each gateway header once, and a fresh request id', async () => {
    const a = await send(api('/admin/ai/tool-registry'), 'GET', auth());
    const b = await send(api('/admin/ai/tool-registry'), 'GET', auth());
    assert.equal(a.status, 200, a.body);
    for (const h of GATEWAY_HEADERS) assert.equal(count(a, h), 1, h);
    assert.match(String(a.headers['ratelimit-policy']), /^"gateway";q=40;w=40$/);
    assert.equal(a.headers['content-type'], 'application/json');
    assert.equal(Number(a.headers['content-length']), Buffer.byteLength(a.body));
    assert.notEqual(a.headers['x-request-id'], b.headers['x-request-id']);
    assert.equal(Number(b.headers['x-ratelimit-remaining']), Number(a.headers['x-ratelimit-remaining']) - 1);
  });

  it('a 401 carries the gateway headers and the challenge', async () => {
    const r = await send(api('/admin/ai/tool-registry'), 'GET', ['authorization', 'Bearer nope']);
    assert.equal(r.status, 401);
    assert.equal(JSON.parse(r.body).error, 'unauthorized');
    for (const h of GATEWAY_HEADERS) assert.equal(count(r, h), 1, h);
    assert.match(String(r.headers['www-authenticate']), /^Bearer realm="cell"/);
  });

  it('a repeated Authorization header is refused, even when each copy is a good key', async () => {
    const r = await send(api('/admin/ai/tool-registry'), 'GET', [...auth(), ...auth()]);
    assert.equal(r.status, 401, r.body);
    assert.equal(JSON.parse(r.body).error, 'unauthorized');
  });

  it("a credential's own 429 carries its headers, not the gateway's", async () => {
    const mint = await send(
      api('/admin/api-keys'),
      'POST',
      [...auth(), 'content-type', 'application/json'],
      JSON.stringify({ name: 'rpm', rate_limit_rpm: 1 }),
    );
    assert.equal(mint.status, 201, mint.body);
    const secret = (JSON.parse(mint.body) as { secret: string }).secret;
    const first = await send(api('/admin/ai/tool-registry'), 'GET', ['authorization', `Bearer ${secret}`]);
    assert.equal(first.status, 200, first.body);
    const second = await send(api('/admin/ai/tool-registry'), 'GET', ['authorization', `Bearer ${secret}`]);
    assert.equal(second.status, 429, second.body);
    assert.equal(JSON.parse(second.body).error, 'rate_limited');
    for (const h of GATEWAY_HEADERS) assert.equal(count(second, h), 1, h);
    assert.match(String(second.headers['ratelimit-policy']), /^"credential";q=1;w=60$/);
    assert.equal(second.headers['x-ratelimit-limit'], '1');
    assert.ok(Number(second.headers['retry-after']) > 0);
  });

  it('the body gates: a declared length over the limit, a chunked body over it, a body nested too deep', async () => {
    const post = (extra: string[], body: string | string[]) =>
      send(api('/admin/api-keys'), 'POST', [...auth(), 'content-type', 'application/json', ...extra], body);
    const big = JSON.stringify({ name: 'x'.repeat(1024 * 1024 + 10) });
    const declared = await post(['content-length', String(Buffer.byteLength(big))], big);
    assert.equal(declared.status, 400, declared.body);
    assert.equal(JSON.parse(declared.body).details.reason, 'body_too_large');
    const chunked = await post(['transfer-encoding', 'chunked'], [big.slice(0, 600_000), big.slice(600_000)]);
    assert.equal(chunked.status, 400, chunked.body);
    assert.equal(JSON.parse(chunked.body).details.reason, 'body_too_large');
    const deep = await post([], `${'['.repeat(200)}${']'.repeat(200)}`);
    assert.equal(deep.status, 400, deep.body);
    assert.equal(JSON.parse(deep.body).details.reason, 'too_deep');
    const twice = await post([], '{"name":"a","name":"b"}');
    assert.equal(twice.status, 400, twice.body);
    assert.deepEqual(JSON.parse(twice.body).details, { reason: 'duplicate_key', key: 'name' });
    const fine = await post([], JSON.stringify({ name: 'ok' }));
    assert.equal(fine.status, 201, fine.body);
  });

  it('past the gateway budget: 429 with the gateway headers', async () => {
    let last: Answer | undefined;
    for (let i = 0; i < 60; i++) {
      last = await send(api('/admin/ai/tool-registry'), 'GET', auth());
      if (last.status === 429) break;
    }
    assert.equal(last!.status, 429, 'the budget of 40 ran out');
    for (const h of GATEWAY_HEADERS) assert.equal(count(last!, h), 1, h);
    assert.match(String(last!.headers['ratelimit-policy']), /^"gateway";q=40;w=40$/);
    assert.equal(last!.headers['x-ratelimit-remaining'], '0');
  });
});
