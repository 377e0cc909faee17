// GET /healthz and GET /readyz (issue 13), in process on both engines: public, behind the rate
// gate, and /readyz answers 503 in the spec's envelope naming the failing part: the store that
// cannot take writes, or modules that are stopping.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inProcessCell } from '../../helpers/inproc.ts';

test('healthz and readyz: 200 while the cell works, without a credential', async () => {
  const t = await inProcessCell();
  try {
    const h = await t.request('GET', '/healthz');
    assert.equal(h.status, 200);
    assert.deepEqual(h.body, { status: 'ok' });
    assert.equal(h.headers.get('cache-control'), 'no-store');
    const r = await t.request('GET', '/readyz');
    assert.equal(r.status, 200);
    assert.deepEqual(r.body, { status: 'ready', checks: { store: 'ok', modules: 'ok', member: 'ok' } });
  } finally {
    await t.close();
  }
});

test('readyz: 503 naming the store when it cannot take writes; healthz stays 200', async () => {
  const t = await inProcessCell();
  try {
    await t.core.store.close();
    const r = await t.request('GET', '/readyz');
    assert.equal(r.status, 503);
    const { correlation_id, ...body } = r.body as Record<string, unknown>;
    assert.equal(typeof correlation_id, 'string');
    assert.deepEqual(body, {
      error: 'service_unavailable',
      message: 'not ready: store (store_closed)',
      details: { reason: 'not_ready', checks: { store: 'store_closed', modules: 'ok', member: 'ok' } },
      retryable: true,
    });
    assert.equal(r.headers.get('retry-after'), '1');
    assert.equal((await t.request('GET', '/healthz')).status, 200);
  } finally {
    await t.close();
  }
});

test('readyz: 503 naming the modules while the cell stops', async () => {
  const t = await inProcessCell();
  try {
    await t.modules.ops.stop?.();
    const r = await t.request('GET', '/readyz');
    assert.equal(r.status, 503);
    assert.deepEqual((r.body as { details: unknown }).details, {
      reason: 'not_ready',
      checks: { store: 'ok', modules: 'stopping', member: 'ok' },
    });
  } finally {
    await t.close();
  }
});

test('healthz is behind the gateway rate gate', async () => {
  const t = await inProcessCell({ config: { rate: { capacity: 3, refillPerSecond: 1 } } });
  try {
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await t.request('GET', '/healthz')).status);
    assert.deepEqual(statuses, [200, 200, 200, 429, 429]);
  } finally {
    await t.close();
  }
});
