import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { manualClock, type Clock } from '../../../cell/context.ts';
import { startCell, type RunningCell } from '../../../cell/server.ts';
import { testStore } from '../../helpers/inproc.ts';
import { isoTime } from '../../../core/iso-time.ts';

const quiet = { info() {}, warn() {}, error() {} };
const DEFS = '/api/public/v1/admin/jobs/definitions';
const T0 = Date.UTC(2026, 0, 1, 0, 0, 0);
const MIN = 60_000;

/** A data directory and, on PostgreSQL (CELL_TEST_STORE=postgres), its own database, kept across restarts. */
async function place(prefix: string): Promise<{ dir: string; storeUrl: string | null; remove(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const store = await testStore();
  return {
    dir,
    storeUrl: store.url,
    async remove() {
      await store.drop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function boot(p: { dir: string; storeUrl: string | null }, clock: Clock): Promise<RunningCell> {
  const origWrite = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((c: unknown, ...r: unknown[]) =>
    typeof c === 'string' && /bootstrap|svck_live_/.test(c) ? true : origWrite(c as string, ...(r as []))) as typeof process.stdout.write;
  try {
    return await startCell({
      config: { dataDir: p.dir, cellId: 'cell-sched', ...(p.storeUrl ? { storeUrl: p.storeUrl } : {}) },
      clock,
      listen: false,
      log: quiet,
    });
  } finally {
    process.stdout.write = origWrite;
  }
}

function client(r: () => RunningCell, key: string) {
  return async (method: string, path: string, body?: unknown) => {
    const res = await r().app.request(
      path,
      {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      },
      { incoming: { socket: { remoteAddress: '127.0.0.1' } } } as never,
    );
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
}

async function scheduledRuns(c: RunningCell, id: string): Promise<number> {
  return Number((await c.core.store.get('SELECT COUNT(*) AS n FROM runs WHERE source = ?', [`schedule:${id}`]))!['n']);
}

/** The bootstrap owner's key (a fresh store creates it on start). */
function ownerKey(c: RunningCell): string {
  if (!c.bootstrapSecret) throw new Error('the cell did not bootstrap an owner key');
  return c.bootstrapSecret;
}

test('definitions: cron, timezone and templates are validated at authoring', async () => {
  const home = await place('jobs-defs-');
  const clock = manualClock(T0);
  const c = await boot(home, clock);
  const key = ownerKey(c);
  const req = client(() => c, key);
  try {
    const base = { name: 'n', job_type: 'compute', spec: { code: 'return 1' }, cron: '*/5 * * * *' };
    for (const [body, reason] of [
      [{ ...base, cron: '61 * * * *' }, 'invalid_cron'],
      [{ ...base, cron: '* * * * * * *' }, 'invalid_cron'],
      [{ ...base, cron: 'every minute' }, 'invalid_cron'],
      [{ ...base, cron: '@reboot' }, 'invalid_cron'],
      [{ ...base, cron: '@every 5m' }, 'invalid_cron'],
      [{ ...base, cron: '@hourly 5' }, 'invalid_cron'],
      [{ ...base, timezone: 'Mars/Olympus' }, 'invalid_timezone'],
      [{ ...base, job_type: 'agent', spec: { formation_id: 'frm_1' } }, 'formation_id_not_allowed'],
      [{ ...base, job_type: 'agent', spec: { graph_id: 'sha256:' + '1'.repeat(64) } }, 'unknown_graph'],
      [{ ...base, job_type: 'team', spec: { formation_id: 'frm_1' } }, 'formation_id_without_crew'],
      [{ ...base, job_type: 'team', spec: { crew_id: 'crw_nope' } }, 'unknown_crew'],
    ] as const) {
      const r = await req('POST', DEFS, body);
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(r.body.error, 'invalid_request');
      assert.equal(r.body.details.reason, reason, JSON.stringify(r.body));
    }
    const badSpec = await req('POST', DEFS, { ...base, spec: { code: '' } });
    assert.equal(badSpec.status, 400);
    assert.equal(badSpec.body.details.issues[0].path, 'spec.code', 'the spec is checked against its job type');
    const wrongType = await req('POST', DEFS, { ...base, job_type: 'sql' });
    assert.equal(wrongType.status, 400, 'a compute spec is not a sql spec');
    const noCron = await req('POST', DEFS, { name: 'n', job_type: 'compute', spec: { code: 'return 1' } });
    assert.equal(noCron.status, 400, 'there is no unscheduled definition');
    const six = await req('POST', DEFS, { ...base, cron: '30 */5 * * * *', timezone: 'Europe/Paris' });
    assert.equal(six.status, 201);
    assert.equal(six.body.next_fire_at, isoTime(T0 + 30_000));
    // croner's macros, read in the definition's time zone and kept as written.
    for (const [cron, tz, next] of [
      ['@hourly', 'UTC', Date.UTC(2026, 0, 1, 1)],
      ['@daily', 'UTC', Date.UTC(2026, 0, 2)],
      ['@midnight', 'Europe/Paris', Date.UTC(2026, 0, 1, 23)],
      ['@monthly', 'UTC', Date.UTC(2026, 1, 1)],
      ['@yearly', 'UTC', Date.UTC(2027, 0, 1)],
    ] as const) {
      const m = await req('POST', DEFS, { ...base, cron, timezone: tz });
      assert.equal(m.status, 201, `${cron}: ${JSON.stringify(m.body)}`);
      assert.deepEqual([m.body.cron, m.body.next_fire_at], [cron, isoTime(next)], cron);
    }
  } finally {
    await c.stop();
    await home.remove();
  }
});

test('scheduler: fires on the cron with an injected clock, once per time, across a restart; disable/delete stop it', async () => {
  const home = await place('jobs-sched-');
  const clock = manualClock(T0);
  let c = await boot(home, clock);
  const key = ownerKey(c);
  const req = client(() => c, key);
  try {
    const r = await req('POST', DEFS, {
      name: 'every 5',
      job_type: 'compute',
      workspace_id: 'w',
      spec: { code: 'return 7' },
      cron: '*/5 * * * *',
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    const id = r.body.schedule_id as string;
    assert.match(id, /^sch_[0-9a-f]{20}$/);
    assert.equal(r.body.next_fire_at, isoTime(T0 + 5 * MIN));
    assert.deepEqual(
      r.body.next_fires,
      [5, 10, 15, 20, 25].map((m) => isoTime(T0 + m * MIN)),
      'the next five fires, next_fire_at first',
    );
    // The route re-arms the scheduler without waiting for it (the read is asynchronous).
    await c.modules.jobs.scheduler.rearmed();
    assert.equal(c.modules.jobs.scheduler.armedFor, T0 + 5 * MIN, 'one timer, armed for the earliest next fire');

    clock.set(T0 + 4 * MIN);
    assert.equal(await c.modules.jobs.scheduler.tick(), 0);
    clock.set(T0 + 5 * MIN);
    assert.equal(await c.modules.jobs.scheduler.tick(), 1);
    assert.equal(await c.modules.jobs.scheduler.tick(), 0, 'no double fire');
    assert.equal(await scheduledRuns(c, id), 1);
    const d1 = await req('GET', `${DEFS}/${id}`);
    assert.equal(d1.body.next_fire_at, isoTime(T0 + 10 * MIN));
    assert.equal(d1.body.fire_count, 1);
    assert.match(d1.body.last_run_id, /^run_/);
    const run = await req('GET', `/api/public/v1/admin/jobs/runs/${d1.body.last_run_id}`);
    assert.equal(run.body.source, `schedule:${id}`);

    // Restart between fires: nothing fires at start (the next time is in the future).
    await c.stop();
    clock.set(T0 + 7 * MIN);
    c = await boot(home, clock);
    assert.equal(await scheduledRuns(c, id), 1, 'no fire on restart');
    clock.set(T0 + 10 * MIN);
    assert.equal(await c.modules.jobs.scheduler.tick(), 1);
    assert.equal(await scheduledRuns(c, id), 2);

    // Disabled: never fires; enabling computes the next time from now.
    const off = await req('POST', `${DEFS}/${id}/disable`);
    assert.deepEqual([off.body.enabled, off.body.next_fires], [false, []], 'a disabled definition has no fires ahead');
    assert.equal((await req('POST', `${DEFS}/${id}/disable`)).status, 200, 'idempotent');
    clock.set(T0 + 16 * MIN);
    assert.equal(await c.modules.jobs.scheduler.tick(), 0);
    const en = await req('POST', `${DEFS}/${id}/enable`);
    assert.equal(en.body.next_fire_at, isoTime(T0 + 20 * MIN));
    // PATCH the cron.
    const p = await req('PATCH', `${DEFS}/${id}`, { cron: '0 * * * *' });
    assert.equal(p.status, 200);
    assert.equal(p.body.next_fire_at, isoTime(T0 + 60 * MIN));
    assert.equal((await req('PATCH', `${DEFS}/${id}`, { cron: 'bad' })).status, 400);
    // Soft delete: never fires, listed only when asked.
    const del = await req('DELETE', `${DEFS}/${id}`);
    assert.equal(del.body.deleted, true);
    assert.deepEqual(del.body.next_fires, [], 'a deleted definition has no fires ahead');
    clock.set(T0 + 61 * MIN);
    assert.equal(await c.modules.jobs.scheduler.tick(), 0);
    assert.equal(await scheduledRuns(c, id), 2);
    assert.equal((await req('GET', DEFS)).body.items.length, 0);
    assert.equal((await req('GET', `${DEFS}?include_deleted=true`)).body.items.length, 1);
    assert.equal((await req('PATCH', `${DEFS}/${id}`, { name: 'x' })).status, 409);
    await c.modules.jobs.scheduler.rearmed();
    assert.equal(c.modules.jobs.scheduler.armedFor, null, 'nothing to fire: no timer');
  } finally {
    await c.stop();
    await home.remove();
  }
});

test('scheduler: fires missed while down run once (catch_up once) or are skipped (catch_up skip)', async () => {
  const home = await place('jobs-missed-');
  const clock = manualClock(T0);
  let c = await boot(home, clock);
  const key = ownerKey(c);
  const req = client(() => c, key);
  try {
    const once = (
      await req('POST', DEFS, { name: 'once', job_type: 'sql', spec: { sql: 'SELECT 1' }, cron: '* * * * *', catch_up: 'once' })
    ).body.schedule_id as string;
    const skip = (
      await req('POST', DEFS, { name: 'skip', job_type: 'sql', spec: { sql: 'SELECT 1' }, cron: '* * * * *', catch_up: 'skip' })
    ).body.schedule_id as string;
    await c.stop();
    clock.set(T0 + 60 * MIN + 30_000); // an hour of missed fires
    c = await boot(home, clock);
    assert.equal(await scheduledRuns(c, once), 1, 'catch_up once: one run for all the missed fires');
    assert.equal(await scheduledRuns(c, skip), 0, 'catch_up skip: none');
    for (const id of [once, skip]) {
      const d = (await req('GET', `${DEFS}/${id}`)).body;
      assert.equal(d.next_fire_at, isoTime(T0 + 61 * MIN));
    }
  } finally {
    await c.stop();
    await home.remove();
  }
});

test('scheduler: a time fired late within the misfire grace fires as scheduled; later than it, catch_up applies; the lease ends at the next time', async () => {
  const home = await place('jobs-grace-');
  const clock = manualClock(T0);
  const c = await boot(home, clock);
  const key = ownerKey(c);
  const req = client(() => c, key);
  try {
    const id = (await req('POST', DEFS, { name: 'g', job_type: 'sql', spec: { sql: 'SELECT 1' }, cron: '* * * * *', catch_up: 'skip' }))
      .body.schedule_id as string;
    // 50 s late (a busy or paused process, a cell taking over from one that died): fired, not skipped.
    clock.set(T0 + MIN + 50_000);
    assert.equal(await c.modules.jobs.scheduler.tick(), 1);
    assert.equal(await scheduledRuns(c, id), 1, 'fired although catch_up is skip');
    assert.equal((await req('GET', `${DEFS}/${id}`)).body.next_fire_at, isoTime(T0 + 2 * MIN), 'the next scheduled time follows');
    // The lease never outlives the next scheduled time: another cell may fire it if this one dies.
    const lease = (await c.core.store.get('SELECT lease_until FROM job_definitions WHERE schedule_id = ?', [id]))!;
    assert.equal(Number(lease['lease_until']), T0 + 2 * MIN);
    // Late by more than the grace: missed (no cell ran), so catch_up skip runs nothing and moves past now.
    clock.set(T0 + 3 * MIN + 30_000);
    assert.equal(await c.modules.jobs.scheduler.tick(), 0);
    assert.equal(await scheduledRuns(c, id), 1);
    assert.equal((await req('GET', `${DEFS}/${id}`)).body.next_fire_at, isoTime(T0 + 4 * MIN));
  } finally {
    await c.stop();
    await home.remove();
  }
});

test('scheduler: a tick asked while another is under way resolves once what was due when asked is done', async () => {
  const home = await place('jobs-tick-');
  const clock = manualClock(T0);
  const c = await boot(home, clock);
  const req = client(() => c, ownerKey(c));
  try {
    const id = (await req('POST', DEFS, { name: 't', job_type: 'sql', spec: { sql: 'SELECT 1' }, cron: '* * * * *', catch_up: 'skip' }))
      .body.schedule_id as string;
    await c.modules.jobs.scheduler.rearmed();
    // A tick under way (its timer's, say) that has not read the clock yet; then the clock moves past the
    // grace and a tick is asked for: it waits for that one, which reads the moved clock.
    const underWay = c.modules.jobs.scheduler.tick();
    clock.set(T0 + 3 * MIN + 30_000);
    assert.equal(await c.modules.jobs.scheduler.tick(), 0, 'missed: catch_up skip runs nothing');
    assert.equal((await req('GET', `${DEFS}/${id}`)).body.next_fire_at, isoTime(T0 + 4 * MIN), 'moved past now when the tick resolved');
    assert.equal(await underWay, 0);
    assert.equal(await scheduledRuns(c, id), 0);
  } finally {
    await c.stop();
    await home.remove();
  }
});

test('scheduler: a live lease held by another cell blocks the fire until it expires', async () => {
  const home = await place('jobs-lease-');
  const clock = manualClock(T0);
  const c = await boot(home, clock);
  const key = ownerKey(c);
  const req = client(() => c, key);
  try {
    const id = (await req('POST', DEFS, { name: 'l', job_type: 'sql', spec: { sql: 'SELECT 1' }, cron: '*/5 * * * *' })).body
      .schedule_id as string;
    await c.core.store.write((tx) =>
      tx.run('UPDATE job_definitions SET lease_owner = ?, lease_until = ? WHERE schedule_id = ?', ['cell-other', T0 + 7 * MIN, id]),
    );
    clock.set(T0 + 5 * MIN);
    assert.equal(await c.modules.jobs.scheduler.tick(), 0, 'another cell holds the lease');
    assert.equal(await scheduledRuns(c, id), 0);
    clock.set(T0 + 7 * MIN);
    assert.equal(await c.modules.jobs.scheduler.tick(), 1, 'the lease expired: this cell fires the missed time once');
    const d = (await req('GET', `${DEFS}/${id}`)).body;
    assert.equal(d.next_fire_at, isoTime(T0 + 10 * MIN));
    const lease = (await c.core.store.get('SELECT lease_owner, lease_until FROM job_definitions WHERE schedule_id = ?', [id]))!;
    assert.equal(lease['lease_owner'], 'cell-sched');
    assert.equal(Number(lease['lease_until']), T0 + 7 * MIN + 60_000);
  } finally {
    await c.stop();
    await home.remove();
  }
});
