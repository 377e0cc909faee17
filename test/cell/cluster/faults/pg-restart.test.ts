/**
 * Fault suite: `pg_ctl restart -m immediate` (the server crashes and
 * recovers) under the workload. No driver is lost: no model call is
 * re-issued; refusals meanwhile are 503 envelopes; every cell stays alive.
 */
import { test } from 'node:test';
import { SKIP, faultScenario, recovered } from './_group.ts';

test('pg_ctl restart -m immediate: every cell survives, nothing lost, no re-issue, refusals are 503s', {
  skip: SKIP,
  timeout: 180_000,
}, async () => {
  await faultScenario('pg-restart', { ownServer: true }, async (g, w) => {
    const from = Date.now();
    await g.server!.restartImmediate();
    const to = Date.now();
    await recovered(w);
    return { fault: { from, to }, driverLost: false, extra: { restart_ms: to - from } };
  });
});
