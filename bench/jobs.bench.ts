/**
 * Jobs benchmarks (`make bench`):
 * 1. SSE fan-out: 500 concurrent EventSource subscribers (eventsource@4, over
 *    real HTTP to an in-process cell on port 0) on one run; 40 journal events;
 *    delivery latency = receive time - the time appendJournal was called (so it
 *    includes sealing, the durable write and fsync), p50 / p99, against the same measure with 1 subscriber (ratio).
 * 2. Scheduler idle cost: 10,000 enabled definitions (next fire a year away);
 *    CPU used by the whole process over an idle window, scaled to one minute,
 *    against the same window with no definitions; the timer must not tick.
 * The client shares the 2 cores with the cell: latencies include that.
 */
import { rmSync } from 'node:fs';
import { EventSource } from 'eventsource';
import type { RunningCell } from '../cell/server.ts';
import { nextFireAfter } from '../cell/jobs/definitions.ts';
import { bootInProcessCell } from './_inproc.ts';
import { fmt, pct } from './_util.ts';

const boot = () => bootInProcessCell('bench-jobs', { port: 0, rate: { capacity: 100_000, refillPerSecond: 100_000 } });

async function fanOut(
  c: RunningCell,
  key: string,
  subscribers: number,
  events: number,
): Promise<{ p50: number; p99: number; delivered: number; appendP50: number; appendP99: number }> {
  const runs = c.modules.runs.runs;
  const runId = await c.core.store.write((tx) =>
    runs.createRunTx(tx, { kind: 'job', job_type: 'compute', requester: 'bench', spec: {}, state: 'running', at: c.core.clock.now() }),
  );
  const url = `${c.url}/api/public/v1/admin/jobs/runs/${runId}/events/sse`;
  const lat: number[] = [];
  let delivered = 0;
  const clients: EventSource[] = [];
  let opened = 0;
  const allOpen = new Promise<void>((resolve) => {
    for (let i = 0; i < subscribers; i++) {
      const es = new EventSource(url, {
        fetch: (u, init) => fetch(u, { ...init, headers: { ...(init?.headers ?? {}), authorization: `Bearer ${key}` } }),
      });
      es.onopen = () => {
        if (++opened === subscribers) resolve();
      };
      es.addEventListener('step', (e) => {
        const t = (JSON.parse(e.data) as { data: { t: number } }).data.t;
        lat.push(performance.timeOrigin + performance.now() - t);
        delivered++;
      });
      es.addEventListener('run_finished', () => es.close());
      clients.push(es);
    }
  });
  await allOpen;
  const appends: number[] = [];
  for (let i = 0; i < events; i++) {
    const t0 = performance.now();
    await runs.appendJournal(runId, { step_id: `s${i}`, kind: 'step', data: { t: performance.timeOrigin + t0 } });
    appends.push(performance.now() - t0);
    await new Promise((r) => setTimeout(r, 20));
  }
  const until = Date.now() + 10_000;
  while (delivered < subscribers * events && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
  await runs.finishRun(runId, 'completed');
  await new Promise((r) => setTimeout(r, 100));
  for (const es of clients) es.close();
  return { p50: pct(lat, 50), p99: pct(lat, 99), delivered, appendP50: pct(appends, 50), appendP99: pct(appends, 99) };
}

async function idleCpu(c: RunningCell, windowMs: number): Promise<{ cpuMsPerMin: number; ticks: number }> {
  const s = c.modules.jobs.scheduler;
  const ticks0 = s.ticks;
  await new Promise((r) => setTimeout(r, 200));
  const u0 = process.cpuUsage();
  await new Promise((r) => setTimeout(r, windowMs));
  const u = process.cpuUsage(u0);
  return { cpuMsPerMin: ((u.user + u.system) / 1000) * (60_000 / windowMs), ticks: s.ticks - ticks0 };
}

export default async function run(): Promise<void> {
  const { c, key, dir } = await boot();
  try {
    const WINDOW = 5_000;
    await new Promise((r) => setTimeout(r, 1_000)); // let start-up work settle
    const empty = await idleCpu(c, WINDOW);
    const now = c.core.clock.now();
    const cron = '0 0 1 1 *';
    const next = nextFireAfter(cron, 'UTC', now)!;
    const t0 = performance.now();
    await c.core.store.write(async (tx) => {
      for (let i = 0; i < 10_000; i++) {
        await tx.run(
          `INSERT INTO job_definitions (schedule_id, name, job_type, workspace_id, spec, cron, timezone, catch_up, enabled, deleted_at, next_fire_at,
                  last_fire_at, last_run_id, fire_count, skip_count, lease_owner, lease_until, created_by, created_at, updated_at)
                VALUES (?, ?, 'compute', 'bench', '{"code":"return 1"}', ?, 'UTC', 'once', 1, NULL, ?, NULL, NULL, 0, 0, NULL, NULL, 'bench', ?, ?)`,
          [`sch_bench${String(i).padStart(11, '0')}`, `def ${i}`, cron, next + (i % 1000) * 1000, now, now],
        );
      }
    });
    const insertMs = performance.now() - t0;
    const r0 = performance.now();
    await c.modules.jobs.scheduler.rearm();
    const rearmMs = performance.now() - r0;
    const loaded = await idleCpu(c, WINDOW);
    console.log(
      `  scheduler: 10,000 enabled definitions inserted in ${fmt(insertMs)} ms; re-arm (earliest next fire) ${fmt(rearmMs, 2)} ms; timer armed for ${new Date(c.modules.jobs.scheduler.armedFor ?? 0).toISOString()}`,
    );
    console.log(
      `  scheduler idle CPU: ${fmt(loaded.cpuMsPerMin, 1)} ms per minute with 10,000 definitions vs ${fmt(empty.cpuMsPerMin, 1)} ms with none (measured over ${WINDOW / 1000} s, scaled); ticks while idle: ${loaded.ticks}`,
    );
    const one = await fanOut(c, key, 1, 40);
    const many = await fanOut(c, key, 500, 40);
    console.log(
      `  SSE fan-out, 40 events: 1 subscriber p50 ${fmt(one.p50, 1)} ms p99 ${fmt(one.p99, 1)} ms (the durable append alone, sealed, signed and fsync'd: p50 ${fmt(one.appendP50, 1)} ms p99 ${fmt(one.appendP99, 1)} ms)`,
    );
    console.log(
      `  SSE fan-out, 40 events: 500 subscribers p50 ${fmt(many.p50, 1)} ms p99 ${fmt(many.p99, 1)} ms (${fmt(many.delivered)}/${fmt(500 * 40)} delivered; p99 ratio ${fmt(many.p99 / Math.max(one.p99, 0.001), 1)}x; the durable append alone: p50 ${fmt(many.appendP50, 1)} ms p99 ${fmt(many.appendP99, 1)} ms)`,
    );
  } finally {
    await c.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run();
