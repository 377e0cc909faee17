/**
 * Fault suite: SIGKILL the busiest driver (the cell holding the most running
 * leases) under the workload, with the default heartbeat and lease (500 ms,
 * 2 s). Its runs are taken over by peers (the takeover is on each journal);
 * the promise: taken over in < 3 s after the kill on a quiet machine, < 6 s with
 * the machine busy (docs/multi-cell.md, "Under faults").
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call } from '../../../helpers/group.ts';
import { adminQuery } from '../../../helpers/postgres.ts';
import { SKIP, busiestDriver, faultScenario, recovered, until } from './_group.ts';

test('SIGKILL the busiest driver: its runs are taken over within 6 s, nothing lost, at most one re-issue per run', {
  skip: SKIP,
  timeout: 180_000,
}, async () => {
  let max = 0;
  await faultScenario('sigkill', { heartbeatMs: 500, leaseMs: 2000 }, async (g, w) => {
    const victim = await busiestDriver(g);
    const victimId = `cell-${'abc'[victim]}`;
    await g.cells[victim]!.kill('SIGKILL');
    const from = Date.now();
    g.down.add(victim);
    // Until no run is held by the victim any more (each taken over), and the group accepts work again.
    await until(
      `the runs of ${victimId} to be taken over`,
      async () =>
        (await adminQuery(g.db.url, `SELECT 1 FROM runs WHERE lease_owner = '${victimId}' AND state IN ('queued', 'running') LIMIT 1`)).rows
          .length === 0,
      30_000,
    );
    await recovered(w);
    await w.stop();
    // Takeover latency: from the kill to each taken_over record of the victim's runs.
    const lat: number[] = [];
    for (const a of w.acked) {
      const j = await call(g.reader().url, 'GET', `/api/public/v1/admin/jobs/runs/${a.id}/journal`, { token: g.token });
      for (const r of j.body.records as { kind: string; at: number; data: { previous_owner?: string } }[])
        if (r.kind === 'taken_over' && r.data.previous_owner === victimId && r.at >= from) lat.push(r.at - from);
    }
    lat.sort((x, y) => x - y);
    max = lat.at(-1) ?? 0;
    console.log(`# takeover after SIGKILL of ${victimId}: ${lat.length} runs, ms from the kill: ${lat.join(', ')}`);
    return {
      fault: { from, to: from + 3000 },
      driverLost: true,
      silent: [victimId],
      extra: { taken_over: lat.length, takeover_p50_ms: lat[Math.floor(lat.length / 2)] ?? 0, takeover_max_ms: max },
    };
  });
  // The docs' < 3 s holds on a quiet machine (1.9 s); at a load of ~20 on 2 cores it took 2.3–4.8 s
  // (the lease's 2 s, then the sweep, the claim and the journal's verification, each slowed down).
  assert.ok(max < 6000, `every run of the killed cell taken over within 6 s of the kill (slowest ${max} ms)`);
});
