/**
 * Fault suite, the baseline: three cells under the workload with no fault.
 * Every promise of the checker (test/cell/cluster/faults/_group.ts) holds,
 * with no re-issue and no refusal at all.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SKIP, faultScenario, moreAcked } from './_group.ts';

test('no fault: every run completes once, every second fires once, nothing is refused', {
  skip: SKIP,
  timeout: 180_000,
}, async () => {
  const f = await faultScenario('none', {}, async (_g, w) => {
    // Two runs of each kind in all (the warm-up's three and three more).
    await moreAcked(w, 3);
    const now = Date.now();
    return { fault: { from: now, to: now }, driverLost: false };
  });
  assert.equal(f.refusals, 0, 'nothing refused without a fault');
});
