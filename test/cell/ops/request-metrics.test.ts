/**
 * The request metrics (cell/ops/request-metrics.ts) expose what prom-client's
 * own Counter and Histogram exposed for the same requests, byte for byte:
 * names, help, types, labels (escaped), cumulative buckets, `+Inf`, `_sum`
 * and `_count`, in the text format and in the JSON view; `reset` empties them.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Counter, Histogram, Registry } from 'prom-client';
import { CellMetrics } from '../../../cell/ops/metrics.ts';

const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const REQUESTS: [string, string, number, number][] = [
  ['/api/public/v1/admin/principals/:id', 'GET', 200, 0.0003],
  ['/api/public/v1/admin/principals/:id', 'GET', 200, 0.02],
  ['/api/public/v1/admin/api-keys', 'POST', 201, 12],
  ['/api/public/v1/admin/principals/:id', 'GET', 404, 0.001],
  ['/api/public/v1/admin/api-keys', 'POST', 201, 0.0005],
  ['(unmatched)', 'GET', 404, 10],
  ['/odd/"quoted"\\path', 'DELETE', 429, 2.5],
];

/** prom-client's instruments as the cell declared them before, fed the same requests. */
function promClient(): Registry {
  const registry = new Registry();
  const labelNames = ['route', 'method', 'status'] as const;
  const counter = new Counter({
    name: 'cell_http_requests_total',
    help: 'HTTP requests answered, by route template, method and status.',
    labelNames,
    registers: [registry],
  });
  const histogram = new Histogram({
    name: 'cell_http_request_duration_seconds',
    help: 'Time from a request reaching the gateway to its answer, by route template, method and status.',
    labelNames,
    buckets: BUCKETS,
    registers: [registry],
  });
  for (const [route, method, status, seconds] of REQUESTS) {
    const labels = { route, method, status: String(status) };
    counter.inc(labels);
    histogram.observe(labels, seconds);
  }
  return registry;
}

const requestMetrics = (text: string) =>
  text
    .split('\n\n')
    .filter((block) => block.includes('cell_http_request'))
    .join('\n\n');

test('the request metrics expose what prom-client exposed for the same requests', async () => {
  const metrics = new CellMetrics();
  for (const [route, method, status, seconds] of REQUESTS) metrics.request(route, method, status, seconds);
  const expected = await promClient().metrics();
  assert.equal(requestMetrics(await metrics.expose()), expected.trimEnd());
  const json = (await metrics.registry.getMetricsAsJSON()).filter((m) => m.name.startsWith('cell_http_request'));
  assert.deepEqual(json, await promClient().getMetricsAsJSON());
});

test('reset empties the request metrics', async () => {
  const metrics = new CellMetrics();
  metrics.request('/a', 'GET', 200, 0.01);
  metrics.registry.resetMetrics();
  assert.equal(requestMetrics(await metrics.expose()), requestMetrics(await new CellMetrics().expose()));
  assert.doesNotMatch(await metrics.expose(), /route="\/a"/);
});
