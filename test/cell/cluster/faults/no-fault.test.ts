/**
 * Fault suite, the baseline: three cells under the workload with no fault.
 * Every promise of the checker (test/cell/cluster/faults/_group.ts) holds,
 * with no re-issue and no refusal at all.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SKIP, check, report, sleep, startFaultGroup, startWorkload } from './_group.ts';

test('no fault: every run completes once, every second fires once, nothing is refused', {
  skip: SKIP,
  timeout: 180_000,
}, async () => {
  const g = await startFaultGroup();
  try {
    const w = startWorkload(g);
    await sleep(6000);
    await w.stop();
    const now = Date.now();
    const f = await check(g, w, { fault: { from: now, to: now }, driverLost: false, recoveryBoundMs: 15_000 });
    assert.equal(f.refusals, 0, 'nothing refused without a fault');
    report('none', f);
  } finally {
    await g.stop();
  }
});
