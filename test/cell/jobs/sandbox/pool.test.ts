import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SandboxPool } from '../../../../cell/jobs/sandbox/pool.ts';

const caps = { input: null, timeLimitMs: 10_000, memoryLimitBytes: 16 << 20, outputLimitBytes: 10_000 };

test('pool: more tasks than workers queue for a slot; a cancel while queued returns at once; close ends everything', async () => {
  const pool = new SandboxPool();
  try {
    const busy = Array.from({ length: 4 }, (_, i) =>
      pool.compute({ ...caps, code: `const t = Date.now(); while (Date.now() - t < 1500) {} return ${i};` }),
    );
    await new Promise((r) => setTimeout(r, 100));
    const ac = new AbortController();
    const queued = pool.compute({ ...caps, code: 'return "late";' }, ac.signal);
    const t0 = Date.now();
    ac.abort();
    const q = await queued;
    assert.equal(q.ok, false);
    assert.equal(!q.ok && q.reason, 'cancelled');
    assert.ok(Date.now() - t0 < 500, 'a queued task is cancelled without waiting for a slot');
    const extra = pool.compute({ ...caps, code: 'return "after";' });
    const results = await Promise.all(busy);
    assert.deepEqual(
      results.map((r) => r.ok && r.output),
      [0, 1, 2, 3],
    );
    const e = await extra;
    assert.equal(e.ok && e.output, 'after', 'the waiting task ran once a slot freed');
  } finally {
    await pool.close();
  }
  const after = await pool.compute({ ...caps, code: 'return 1;' });
  assert.equal(after.ok, false, 'a closed pool runs nothing');
});
