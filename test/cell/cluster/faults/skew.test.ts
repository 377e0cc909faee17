/**
 * Fault suite: one cell 30 s ahead, one 30 s behind (libfaketime), under the
 * workload. The skewed cells stand down (no takeovers, no fires, not ready)
 * but still serve and drive what they accept; the cell whose clock agrees
 * fires every second once, never early; nothing is lost.
 */
import { test } from 'node:test';
import { NO_FAKETIME, SKIP, faketime, faultScenario, moreAcked } from './_group.ts';

test('one cell at +30 s, one at −30 s: they stand down and say so; nothing lost, no second fired early or twice', {
  skip: SKIP || NO_FAKETIME,
  timeout: 180_000,
}, async () => {
  await faultScenario('skew', { env: (i) => (i === 1 ? faketime('+30s') : i === 2 ? faketime('-30s') : {}) }, async (_g, w) => {
    // The skew is there from the start: the runs sent to the skewed cells are served and driven by them.
    const from = Date.now();
    await moreAcked(w, 5);
    return {
      fault: { from, to: from },
      driverLost: false,
      notReady: { 'cell-b': 'clock_skew', 'cell-c': 'clock_skew' },
    };
  });
});
