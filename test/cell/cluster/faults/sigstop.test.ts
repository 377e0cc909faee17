/**
 * Fault suite: SIGSTOP the busiest driver for twice its lease, then SIGCONT.
 * Peers take its runs over meanwhile; once it wakes, its late writes are
 * fenced off (it logs the lost lease) and the outcome of each run is the
 * new driver's. Requests sent to the paused cell get no answer until it
 * wakes: the only silence the checker allows.
 */
import { test } from 'node:test';
import { SKIP, busiestDriver, faultScenario, recovered, sleep } from './_group.ts';

test('SIGSTOP a driver for 2× the lease, then SIGCONT: fenced off, nothing lost or applied twice', {
  skip: SKIP,
  timeout: 180_000,
}, async () => {
  await faultScenario('sigstop', {}, async (g, w) => {
    const victim = await busiestDriver(g);
    g.cells[victim]!.proc.kill('SIGSTOP');
    const from = Date.now();
    await sleep(2 * g.leaseMs);
    g.cells[victim]!.proc.kill('SIGCONT');
    const to = Date.now();
    await recovered(w);
    return { fault: { from, to }, driverLost: true, silent: [`cell-${'abc'[victim]}`] };
  });
});
