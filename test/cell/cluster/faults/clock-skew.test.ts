/**
 * One clock for the group (the database's): one cell runs 30 s ahead and one
 * 30 s behind (libfaketime). Each measures its offset at every heartbeat,
 * stands down (no takeovers, no fires), answers /readyz 503 with
 * `checks.member: clock_skew`, logs what to fix, and shows its offset in
 * /admin/cells and `cell_clock_offset_seconds`. Heartbeats are stamped with
 * the database's clock: the cell ahead is not "age 0", it is live like the
 * others. The definition firing every second is fired by the cell whose clock
 * agrees, never early.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call } from '../../../helpers/group.ts';
import { adminQuery } from '../../../helpers/postgres.ts';
import { NO_FAKETIME, SKIP, faketime, sleep, startFaultGroup, until } from './_group.ts';

const skip = SKIP || NO_FAKETIME;

test('a cell 30 s ahead and one 30 s behind stand down and say so; the group judges on the database clock', {
  skip,
  timeout: 120_000,
}, async () => {
  const g = await startFaultGroup({
    env: (i) => (i === 1 ? faketime('+30s') : i === 2 ? faketime('-30s') : {}),
    args: (i) => (i === 1 ? ['--metrics-port', '0'] : []),
  });
  try {
    const [a, b, c] = g.cells as [(typeof g.cells)[0], (typeof g.cells)[0], (typeof g.cells)[0]];
    for (const [cell, off] of [
      [b, 'ahead of'],
      [c, 'behind'],
    ] as const) {
      const r = await until(
        'the skewed cell to report not-ready',
        async () => {
          const x = await call(cell.url, 'GET', '/readyz');
          return x.status === 503 ? x : null;
        },
        10_000,
      );
      assert.equal(r.body.error, 'service_unavailable');
      assert.equal(r.body.details.checks.member, 'clock_skew');
      assert.match(cell.output(), new RegExp(`clock skew: this cell's clock is \\d+ ms ${off} the database's`));
      assert.match(cell.output(), /Fix the time of this host/);
    }
    assert.equal((await call(a.url, 'GET', '/readyz')).status, 200, 'the cell whose clock agrees is ready');

    const list = await call(a.url, 'GET', '/api/public/v1/admin/cells', { token: g.token });
    assert.equal(list.status, 200, list.text);
    const m = new Map<string, any>(list.body.items.map((x: any) => [x.cell_id, x]));
    assert.ok(Math.abs(m.get('cell-a').clock_offset_ms) < 1000, `cell-a offset ${m.get('cell-a').clock_offset_ms}`);
    assert.ok(Math.abs(m.get('cell-b').clock_offset_ms - 30_000) < 2000, `cell-b offset ${m.get('cell-b').clock_offset_ms}`);
    assert.ok(Math.abs(m.get('cell-c').clock_offset_ms + 30_000) < 2000, `cell-c offset ${m.get('cell-c').clock_offset_ms}`);
    for (const id of ['cell-a', 'cell-b', 'cell-c']) {
      // Judged on its own clock, cell-c's beats would be 30 s old (dead) and cell-b's from the future; on the
      // database's they are a heartbeat or two old: live, or suspect when a loaded machine delays one.
      assert.ok(['live', 'suspect'].includes(m.get(id).state), `${id} beats on the database clock (${m.get(id).state})`);
      assert.ok(m.get(id).heartbeat_age_ms < 1500, `${id}: heartbeat age ${m.get(id).heartbeat_age_ms} ms`);
    }

    // The metric of the cell ahead.
    const metricsUrl = /metrics on (http:\/\/[^\s"]+)/.exec(b.output())?.[1];
    assert.ok(metricsUrl, 'cell-b serves metrics');
    const text = await (await fetch(metricsUrl)).text();
    const v = Number(/^cell_clock_offset_seconds (\S+)$/m.exec(text)?.[1]);
    assert.ok(Math.abs(v - 30) < 2, `cell_clock_offset_seconds ${v}`);

    // Fires: by the cell whose clock agrees, each second once, none early.
    await sleep(4000);
    const fires = (await adminQuery(g.db.url, `SELECT fire_at, created_at, cell_id FROM job_fires WHERE schedule_id = '${g.scheduleId}'`))
      .rows;
    assert.ok(fires.length >= 3, `fired ${fires.length} times`);
    for (const f of fires) {
      assert.equal(f.cell_id, 'cell-a', 'a skewed cell fires nothing');
      assert.ok(Number(f.created_at) >= Number(f.fire_at) - 50, `fired ${Number(f.fire_at) - Number(f.created_at)} ms early`);
    }
  } finally {
    await g.stop();
  }
});
