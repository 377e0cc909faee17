/**
 * Operations against the real cell process (issue 13): /healthz and /readyz,
 * metrics on the loopback --metrics-port (parsed with an independent
 * exposition-format parser, numbers checked to move), and one JSON access-log
 * line per request that never carries a secret. Issue 42: stdout carries JSON
 * lines only (the banner too), a well-formed X-Request-Id is adopted, and a
 * cell not ready answers 503 without logging it as an error.
 */
import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { startCell } from '../../cell/server.ts';
import { startCellProcess, type CellProcess } from '../helpers/cell-process.ts';
import { testStore } from '../helpers/inproc.ts';
import { parseExposition, type PromSample } from '../helpers/prometheus.ts';

const P = '/api/public/v1/admin';

async function scrape(url: string): Promise<PromSample[]> {
  const res = await request(url);
  assert.equal(res.statusCode, 200);
  assert.match(String(res.headers['content-type']), /^text\/plain; version=0\.0\.4/);
  return parseExposition(await res.body.text());
}

/** The sum of the samples named `name` whose labels include `labels` (0 when none). */
function sample(m: PromSample[], name: string, labels: Record<string, string> = {}): number {
  return m.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)).reduce((a, s) => a + s.value, 0);
}

describe('operations: health, metrics, access log', () => {
  let cell: CellProcess;
  let metricsUrl: string;
  before(async () => {
    // A small bucket so that a burst meets the gateway's 429.
    cell = await startCellProcess({ args: ['--metrics-port', '0', '--rate-capacity', '40', '--rate-refill', '1'] });
    const m = /metrics on (http:\/\/127\.0\.0\.1:\d+\/metrics)/.exec(cell.output());
    assert.ok(m, cell.output());
    metricsUrl = m[1]!;
  });
  after(async () => {
    await cell?.stop();
    cell?.cleanup();
  });

  it('healthz and readyz answer without a credential; readyz names its checks', async () => {
    const h = await request(`${cell.url}/healthz`);
    assert.equal(h.statusCode, 200);
    assert.deepEqual(await h.body.json(), { status: 'ok' });
    assert.ok(h.headers['x-ratelimit-remaining'], 'behind the rate gate');
    const r = await request(`${cell.url}/readyz`);
    assert.equal(r.statusCode, 200);
    assert.deepEqual(await r.body.json(), { status: 'ready', checks: { store: 'ok', modules: 'ok', member: 'ok' } });
    // Not in the curated document.
    const doc = (await (await request(`${cell.url}/api/public/v1/openapi.json`)).body.json()) as { paths: Record<string, unknown> };
    assert.equal(doc.paths['/healthz'], undefined);
    assert.equal(doc.paths['/readyz'], undefined);
  });

  it('one JSON access-log line per request: request id as X-Request-Id, route template, principal, key id; no secret', async () => {
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const res = await request(`${cell.url}${P}/principals`, { headers: { authorization: `Bearer ${cell.adminKey}`, traceparent } });
    await res.body.dump();
    const id = String(res.headers['x-request-id']);
    let line: Record<string, unknown> | undefined;
    for (let i = 0; i < 100 && !line; i++) {
      line = cell
        .output()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((l) => l['request_id'] === id);
      if (!line) await new Promise((r) => setTimeout(r, 20));
    }
    assert.ok(line, `no access-log line for ${id}`);
    assert.equal(line['level'], 30, "pino's numeric level for info");
    assert.equal(line['msg'], 'request');
    assert.equal(line['route'], `${P}/principals`);
    assert.equal(line['method'], 'GET');
    assert.equal(line['status'], 200);
    assert.equal(typeof line['duration_ms'], 'number');
    assert.match(String(line['time']), /^\d{4}-\d\d-\d\dT/);
    assert.match(String(line['principal_id']), /\S/);
    assert.equal(line['credential_kind'], 'api_key');
    assert.match(String(line['key_id']), /\S/);
    assert.equal(line['trace_id'], '4bf92f3577b34da6a3ce929d0e0e4736');
    // Never a secret: the admin key appears in the output only in the bootstrap banner.
    const logLines = cell
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'));
    assert.ok(logLines.length >= 2);
    assert.ok(!logLines.some((l) => l.includes(cell.adminKey)), 'a log line carries the admin key');
    assert.ok(!logLines.some((l) => /svck_live_|Bearer /.test(l)), 'a log line carries a credential');
  });
  it('a well-formed X-Request-Id is adopted (answer, access line); a malformed one is replaced by a new id', async () => {
    const sent = async (id: string) => {
      const r = await request(`${cell.url}/healthz`, { headers: { 'x-request-id': id } });
      await r.body.dump();
      return String(r.headers['x-request-id']);
    };
    for (const id of ['edge-proxy_42.a:b=c+d/e-f', 'f47ac10b-58cc-4372-a567-0e02b2c3d479', 'Z'.repeat(128)])
      assert.equal(await sent(id), id);
    const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
    for (const bad of ['two words', 'Z'.repeat(129), '-leading-dash', '"quoted"', 'a,b', 'tab\there', 'é-accent']) {
      const got = await sent(bad);
      assert.match(got, uuid, `${JSON.stringify(bad)} is replaced`);
    }
    const adopted = 'adopted-request-7';
    await sent(adopted);
    const line = await (async () => {
      for (let i = 0; i < 100; i++) {
        const l = cell
          .stdout()
          .split('\n')
          .filter((x) => x.startsWith('{'))
          .map((x) => JSON.parse(x) as Record<string, unknown>)
          .find((x) => x['request_id'] === adopted);
        if (l) return l;
        await new Promise((r) => setTimeout(r, 20));
      }
      return undefined;
    })();
    assert.ok(line, 'the access line names the adopted id');
    assert.equal(line['route'], '/healthz');
  });

  it('stdout carries JSON lines only, the banner included: jq reads every line', async () => {
    const lines = cell
      .stdout()
      .split('\n')
      .filter((l) => l !== '');
    assert.ok(lines.length >= 3, cell.stdout());
    for (const l of lines) assert.doesNotThrow(() => JSON.parse(l), `not JSON on stdout: ${l}`);
    const banner = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((o) => String(o['msg']).includes('listening on'));
    assert.ok(banner);
    assert.equal(banner['url'], cell.url);
    assert.equal(banner['level'], 30);
    assert.match(String(banner['msg']), /^cell \S+ listening on http:\/\/127\.0\.0\.1:\d+$/);
  });

  it('metrics: served on loopback only, parsed by an exposition-format parser, and the numbers move', async () => {
    assert.equal((await request(metricsUrl.replace('/metrics', '/other'))).statusCode, 404);
    const before = await scrape(metricsUrl);
    const auth = { authorization: `Bearer ${cell.adminKey}`, 'content-type': 'application/json' };
    const ok = await request(`${cell.url}${P}/principals`, { headers: auth });
    await ok.body.dump();
    assert.equal(ok.statusCode, 200);
    const anon = await request(`${cell.url}${P}/principals/p_nobody`);
    await anon.body.dump();
    assert.equal(anon.statusCode, 401);
    // Store writes: a minted key (then revoked) under the admin's authority.
    const mint = await request(`${cell.url}${P}/api-keys`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ name: 'metrics-test', scopes: ['audit.read'] }),
    });
    assert.equal(mint.statusCode, 201);
    await mint.body.dump();
    // A burst past the gateway's bucket: some 429s.
    let refused = 0;
    for (let i = 0; i < 60; i++) {
      const r = await request(`${cell.url}/healthz`);
      await r.body.dump();
      if (r.statusCode === 429) refused++;
    }
    assert.ok(refused > 0, 'the burst met the gateway gate');

    const after = await scrape(metricsUrl);
    const moved = (name: string, labels: Record<string, string> = {}) => sample(after, name, labels) - sample(before, name, labels);
    assert.equal(moved('cell_http_requests_total', { route: `${P}/principals`, method: 'GET', status: '200' }), 1);
    assert.equal(moved('cell_http_requests_total', { route: `${P}/principals/:id`, method: 'GET', status: '401' }), 1);
    assert.equal(moved('cell_http_requests_total', { route: `${P}/api-keys`, method: 'POST', status: '201' }), 1);
    assert.equal(moved('cell_http_request_duration_seconds_count', { route: `${P}/principals`, method: 'GET', status: '200' }), 1);
    assert.equal(
      moved('cell_http_request_duration_seconds_bucket', { route: `${P}/principals`, method: 'GET', status: '200', le: '+Inf' }),
      1,
    );
    assert.ok(moved('cell_http_request_duration_seconds_sum', { route: `${P}/principals`, method: 'GET', status: '200' }) > 0);
    assert.equal(moved('cell_rate_limit_refusals_total', { gate: 'gateway' }), refused);
    assert.ok(moved('cell_store_write_duration_seconds_count', { outcome: 'committed' }) >= 1, 'store writes observed');
    if (process.env['CELL_TEST_STORE'] !== 'postgres')
      assert.ok(moved('cell_store_fsync_batch_transactions_count') >= 1, 'group commits observed');
    // Process metrics (prom-client's defaults).
    for (const name of ['process_cpu_user_seconds_total', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_seconds'])
      assert.ok(
        after.some((s) => s.name === name),
        name,
      );
    assert.equal(sample(after, 'cell_ready'), 1);
  });
});

describe('operations: --log-format pretty and --log-level', () => {
  it('pretty lines for people; warn drops the access log', async () => {
    const pretty = await startCellProcess({ args: ['--log-format', 'pretty'] });
    try {
      const r = await request(`${pretty.url}/healthz`);
      await r.body.dump();
      const id = String(r.headers['x-request-id']);
      for (let i = 0; i < 100 && !pretty.output().includes(id); i++) await new Promise((res) => setTimeout(res, 20));
      const line = pretty
        .output()
        .split('\n')
        .find((l) => l.includes(id));
      assert.match(line ?? '', new RegExp(`^\\d{4}-\\S+ INFO  request GET /healthz 200 [\\d.]+ms request_id=${id}$`));
    } finally {
      await pretty.stop();
      pretty.cleanup();
    }
    const quiet = await startCellProcess({ args: ['--log-level', 'warn'] });
    try {
      const r = await request(`${quiet.url}/healthz`);
      await r.body.dump();
      await quiet.stop();
      assert.ok(!quiet.output().includes(String(r.headers['x-request-id'])), quiet.output());
    } finally {
      quiet.cleanup();
    }
  });
});

describe('operations: no access-log line lost on a clean stop', () => {
  it('SIGTERM right after a burst: one line for every answered request', async () => {
    const cell = await startCellProcess();
    try {
      const auth = { authorization: `Bearer ${cell.adminKey}` };
      const ids = await Promise.all(
        Array.from({ length: 400 }, async () => {
          const r = await request(`${cell.url}${P}/ai/tool-registry`, { headers: auth });
          await r.body.dump();
          assert.equal(r.statusCode, 200);
          return String(r.headers['x-request-id']);
        }),
      );
      await cell.stop();
      const logged = new Set(
        cell
          .output()
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => (JSON.parse(l) as { request_id?: string }).request_id),
      );
      assert.deepEqual(
        ids.filter((id) => !logged.has(id)),
        [],
      );
      assert.equal(cell.proc.exitCode, 0);
    } finally {
      cell.cleanup();
    }
  });
});

describe('operations: a cell not ready answers 503 without logging an error', () => {
  it('GET /readyz while the modules stop: 503 not_ready, an info access line, no error line, no stack', async () => {
    const lines: { level: string; msg: string; fields: Record<string, unknown> | undefined }[] = [];
    const at = (level: string) => (msg: string, fields?: Record<string, unknown>) => void lines.push({ level, msg, fields });
    const dir = mkdtempSync(join(tmpdir(), 'cell-ready-'));
    const store = await testStore();
    const running = await startCell({
      config: { dataDir: dir, ...(store.url ? { storeUrl: store.url } : {}) },
      listen: false,
      log: { info: at('info'), warn: at('warn'), error: at('error') },
    });
    try {
      const ask = () => running.app.request('/readyz', {}, { incoming: { socket: { remoteAddress: '127.0.0.1' } } } as never);
      assert.equal((await ask()).status, 200);
      // The ops module stops first at a cell's stop (and starts last): from then on /readyz says `stopping`,
      // as it says `starting` before the start.
      await running.modules.ops.stop!();
      const r = await ask();
      assert.equal(r.status, 503);
      const body = (await r.json()) as { error: string; details: { reason: string; checks: { modules: string } } };
      assert.deepEqual([body.error, body.details.reason, body.details.checks.modules], ['service_unavailable', 'not_ready', 'stopping']);
      const access = lines.filter((l) => l.msg === 'request' && l.fields?.['route'] === '/readyz');
      assert.deepEqual(
        access.map((l) => [l.level, l.fields?.['status']]),
        [
          ['info', 200],
          ['info', 503],
        ],
      );
      assert.deepEqual(
        lines.filter((l) => l.level === 'error'),
        [],
        'a 503 the cell answers on purpose is not an error of the cell',
      );
    } finally {
      await running.stop();
      await store.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
