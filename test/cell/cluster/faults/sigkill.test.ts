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
import { SKIP, busiestDriver, check, report, sleep, startFaultGroup, startWorkload } from './_group.ts';

test('SIGKILL the busiest driver: its runs are taken over within 6 s, nothing lost, at most one re-issue per run', {
  skip: SKIP,
  timeout: 180_000,
}, async () => {
  const g = await startFaultGroup({ heartbeatMs: 500, leaseMs: 2000 });
  try {
    const w = startWorkload(g);
    await sleep(4000);
    const victim = await busiestDriver(g);
    const victimId = `cell-${'abc'[victim]}`;
    await g.cells[victim]!.kill('SIGKILL');
    const from = Date.now();
    g.down.add(victim);
    await sleep(5000);
    await w.stop();
    // Takeover latency: from the kill to each taken_over record of the victim's runs.
    const lat: number[] = [];
    for (const a of w.acked) {
      const j = await call(g.reader().url, 'GET', `/api/public/v1/admin/jobs/runs/${a.id}/journal`, { token: g.token });
      for (const r of j.body.records as { kind: string; at: number; data: { previous_owner?: string } }[])
        if (r.kind === 'taken_over' && r.data.previous_owner === victimId && r.at >= from) lat.push(r.at - from);
    }
    lat.sort((x, y) => x - y);
    const max = lat.at(-1) ?? 0;
    console.log(`# takeover after SIGKILL of ${victimId}: ${lat.length} runs, ms from the kill: ${lat.join(', ')}`);
    const f = await check(g, w, { fault: { from, to: from + 3000 }, driverLost: true, silent: [victimId], recoveryBoundMs: 15_000 });
    report('sigkill', f, { taken_over: lat.length, takeover_p50_ms: lat[Math.floor(lat.length / 2)] ?? 0, takeover_max_ms: max });
    // The docs' < 3 s holds on a quiet machine (1.9 s); at a load of ~20 on 2 cores it took 2.3–4.8 s
    // (the lease's 2 s, then the sweep, the claim and the journal's verification, each slowed down).
    assert.ok(max < 6000, `every run of the killed cell taken over within 6 s of the kill (slowest ${max} ms)`);
  } finally {
    await g.stop();
  }
});
