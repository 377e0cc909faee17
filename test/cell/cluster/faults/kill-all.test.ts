/**
 * Fault suite: SIGKILL every cell with runs in flight, then restart one
 * (cell-a, on its own data directory). It re-drives what it held at once
 * (docs/multi-cell.md: a starting cell re-drives every run it held) and takes
 * over the dead peers' runs once their leases pass; every acknowledged run
 * completes; the definition fires again from the one cell, each second once.
 */
import { test } from 'node:test';
import { SKIP, faultScenario } from './_group.ts';

test('SIGKILL all, restart one: the restarted cell re-drives what it held and takes over the rest', {
  skip: SKIP,
  timeout: 180_000,
}, async () => {
  await faultScenario('kill-all-restart-one', {}, async (g, w) => {
    await w.stop();
    const from = Date.now();
    await Promise.all(g.cells.map((c) => c.kill('SIGKILL')));
    g.down.add(1);
    g.down.add(2);
    g.down.add(0);
    await g.restart(0);
    const to = Date.now();
    // The seconds missed while the group was down (~10 s on a loaded machine) fire one after the other once
    // the cell is back, as after a store outage (pg-stop.test.ts).
    return { fault: { from, to }, driverLost: true, recoveryBoundMs: 20_000, extra: { restart_ms: to - from } };
  });
});
