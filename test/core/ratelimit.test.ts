// core/ratelimit: the token bucket arithmetic the cell and the edge share.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TokenBuckets, rateLimitHeaders, rateLimited } from '../../core/ratelimit.ts';

function clock(t = 0) {
  return {
    t,
    now() {
      return this.t;
    },
  };
}

test('a bucket grants its capacity, then refuses with Retry-After until it refills', () => {
  const c = clock();
  const b = new TokenBuckets(3, 1, c);
  for (let i = 0; i < 3; i++) assert.equal(b.take('ip').allowed, true);
  const r = b.take('ip');
  assert.equal(r.allowed, false);
  assert.equal(r.remaining, 0);
  assert.equal(r.retryAfterSeconds, 1);
  assert.equal(r.resetSeconds, 3);
  c.t += 1000;
  assert.equal(b.take('ip').allowed, true);
  assert.equal(b.take('other').remaining, 2, 'keys have separate buckets');
});

test('a clock stepping back neither refills nor drains', () => {
  const c = clock(10_000);
  const b = new TokenBuckets(2, 1, c);
  b.take('k');
  b.take('k');
  c.t = 0;
  assert.equal(b.take('k').allowed, false);
  c.t = 10_000 + 999;
  assert.equal(b.take('k').allowed, false, 'the step back did not reset the bucket time into the past');
});

test('headers and the 429 refusal', () => {
  const b = new TokenBuckets(1, 1 / 60, clock());
  b.take('k');
  const r = b.take('k');
  const h = rateLimitHeaders(r, 'credential', 60);
  assert.deepEqual(h, {
    'X-RateLimit-Limit': '1',
    'X-RateLimit-Remaining': '0',
    'X-RateLimit-Reset': '60',
    'RateLimit-Policy': '"credential";q=1;w=60',
    RateLimit: '"credential";r=0;t=60',
  });
  const e = rateLimited(r, 'x', h);
  assert.equal(e.code, 'rate_limited');
  assert.equal(e.status, 429);
  assert.equal(e.retryable, true);
  assert.equal(e.headers?.['Retry-After'], '60');
});

test('misuse is a TypeError', () => {
  assert.throws(() => new TokenBuckets(0, 1, clock()), TypeError);
  assert.throws(() => new TokenBuckets(1, 0, clock()), TypeError);
});
