/**
 * Fault suite: `pg_ctl restart -m immediate` (the server crashes and
 * recovers) under the workload. No driver is lost: no model call is
 * re-issued; refusals meanwhile are 503 envelopes; every cell stays alive.
 */
import { test } from 'node:test';
import { SKIP, check, report, sleep, startFaultGroup, startWorkload } from './_group.ts';

test('pg_ctl restart -m immediate: every cell survives, nothing lost, no re-issue, refusals are 503s', {
  skip: SKIP,
  timeout: 180_000,
}, async () => {
  const g = await startFaultGroup({ ownServer: true });
  try {
    const w = startWorkload(g);
    await sleep(4000);
    const from = Date.now();
    await g.server!.restartImmediate();
    const to = Date.now();
    await sleep(4000);
    await w.stop();
    const f = await check(g, w, { fault: { from, to }, driverLost: false, recoveryBoundMs: 15_000 });
    report('pg-restart', f, { restart_ms: to - from });
  } finally {
    await g.stop();
  }
});
