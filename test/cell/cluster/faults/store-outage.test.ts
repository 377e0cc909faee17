/**
 * Every background loop survives the store going away: PostgreSQL is stopped
 * (`pg_ctl stop -m immediate`) for 8 s under three cells with a definition
 * due every second. Meanwhile every cell answers, with 503 envelopes (never a
 * 500, never a hang), /readyz says not-ready, and each loop logs the outage
 * once, not once per attempt. Once the server is back every cell is alive,
 * ready again by itself, and the seconds the outage held up are fired, each
 * once, within the bound after recovery.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call } from '../../../helpers/group.ts';
import { adminQuery } from '../../../helpers/postgres.ts';
import { SKIP, logs, sleep, startFaultGroup, until } from './_group.ts';

const OUTAGE_MS = 8000;

test('PostgreSQL away for 8 s: every cell keeps answering 503 envelopes, reports not-ready, logs once, resumes by itself', {
  skip: SKIP,
  timeout: 150_000,
}, async () => {
  const g = await startFaultGroup({ heartbeatMs: 250, leaseMs: 1000, ownServer: true });
  try {
    await sleep(2500); // a few fires before
    await g.server!.stopImmediate();
    const from = Date.now();
    const answers: { cell: number; status: number; error?: string; ms: number }[] = [];
    const readiness: number[] = [];
    while (Date.now() - from < OUTAGE_MS) {
      for (const [i, c] of g.cells.entries()) {
        const t0 = Date.now();
        const r = await call(c.url, 'POST', '/api/public/v1/admin/jobs/runs', {
          token: g.token,
          body: { job_type: 'compute', workspace_id: 'w', spec: { code: 'return 1' } },
        });
        answers.push({ cell: i, status: r.status, error: r.body?.error, ms: Date.now() - t0 });
        readiness.push((await call(c.url, 'GET', '/readyz')).status);
      }
      await sleep(500);
    }
    await g.server!.startAgain();
    const to = Date.now();
    const bad = answers.filter((a) => !(a.status === 503 && a.error === 'service_unavailable') && !(a.status === 202 || a.status === 201));
    assert.deepEqual(bad, [], 'every refusal during the outage is a 503 envelope');
    assert.ok(answers.filter((a) => a.status === 503).length >= 3, 'the outage was seen');
    assert.ok(
      Math.max(...answers.map((a) => a.ms)) < 10_000,
      `every answer within 10 s (slowest ${Math.max(...answers.map((a) => a.ms))} ms)`,
    );
    assert.ok(readiness.includes(503), '/readyz says not-ready during the outage');

    // Every cell alive, ready again by itself.
    for (const [i, c] of g.cells.entries()) {
      assert.ok(c.proc.exitCode === null && c.proc.signalCode === null, `cell ${i} is alive\n${logs(g)}`);
      await until(`cell ${i} ready again`, async () => (await call(c.url, 'GET', '/readyz')).status === 200, 20_000);
    }
    const readyMs = Date.now() - to;

    // The outage logged once per loop and cell, not once per attempt.
    for (const c of g.cells) {
      const out = c.output();
      const counts = new Map<string, number>();
      for (const l of out.split('\n')) {
        const o = l.startsWith('{') ? (JSON.parse(l) as { level?: number; msg?: string }) : null;
        const msg = o && (o.level ?? 0) >= 40 ? o.msg?.slice(0, 80) : undefined;
        if (msg) counts.set(msg, (counts.get(msg) ?? 0) + 1);
      }
      console.log(`# ${[...counts].map(([k, v]) => `${v}x ${k}`).join(' | ')}`);
      const beats = out.split('\n').filter((l) => l.includes('heartbeat failed')).length;
      assert.ok(beats <= 2, `heartbeat failures logged once per outage (${beats})`);
      const sched = out.split('\n').filter((l) => /scheduler: .*retrying/.test(l)).length;
      assert.ok(sched <= 2, `scheduler failures logged once per outage (${sched})`);
      const sweeps = out.split('\n').filter((l) => l.includes('cluster sweep failed')).length;
      assert.ok(sweeps <= 2, `takeover sweep failures logged once per outage (${sweeps})`);
    }

    // The seconds held up by the outage are fired, each once, then firing is back on time.
    const firesNow = async () =>
      (
        await adminQuery(g.db.url, `SELECT fire_at, created_at FROM job_fires WHERE schedule_id = '${g.scheduleId}' ORDER BY fire_at`)
      ).rows.map((r) => ({ fire_at: Number(r.fire_at), created_at: Number(r.created_at) }));
    const fires = await until(
      'firing to catch up after the outage',
      async () => {
        const f = await firesNow();
        return f.length > 0 && f.at(-1)!.fire_at > to ? f : null;
      },
      30_000,
    );
    const caughtUpMs = fires.find((f) => f.fire_at > to)!.created_at - to;
    for (let i = 1; i < fires.length; i++) assert.equal(fires[i]!.fire_at - fires[i - 1]!.fire_at, 1000, 'no second missed or fired twice');
    assert.ok(
      fires.some((f) => f.fire_at > from && f.fire_at < to),
      'the seconds of the outage were fired',
    );
    const firstHeld = fires.find((f) => f.fire_at > from && f.fire_at < to)!;
    console.log(
      `# store outage ${OUTAGE_MS} ms: ready again ${readyMs} ms after the server; first held-up second fired ${firstHeld.created_at - to} ms after it; on time again after ${caughtUpMs} ms`,
    );
  } finally {
    await g.stop();
  }
});
