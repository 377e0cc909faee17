/**
 * Schedules across a group of cells: three real cell processes on one
 * PostgreSQL database fire a definition whose cron has a seconds field (every
 * 2 s, with `--schedule-min-interval 1`). Every scheduled time in the window
 * is fired exactly once (one `job_fires` row, one job run), whichever cells are
 * up: one cell (the one that fired last, so it holds the definition's lease)
 * is SIGKILLed halfway, and the two left go on without a gap.
 *
 * Needs `node scripts/build.mjs` first, and PostgreSQL 15 (test/helpers/postgres.ts).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { adminQuery, pgUnavailable } from '../helpers/postgres.ts';
import { ok, startGroup, type Group } from '../helpers/group.ts';

const skip = pgUnavailable() ?? false;
const DEFS = '/api/public/v1/admin/jobs/definitions';
const PERIOD_MS = 2000;

interface FireRow {
  fire_at: number;
  cell_id: string;
  run_id: string | null;
  state: string;
}

describe('a definition fired by a group of three cells', { skip, timeout: 180_000 }, () => {
  let g: Group;
  before(async () => {
    g = await startGroup(3, { args: () => ['--schedule-min-interval', '1'] });
  });
  after(async () => {
    await g?.stop();
  });

  async function fires(id: string): Promise<FireRow[]> {
    const r = await adminQuery(
      g.db.url,
      `SELECT fire_at, cell_id, run_id, state FROM job_fires WHERE schedule_id = '${id}' ORDER BY fire_at`,
    );
    return r.rows.map((x: Record<string, unknown>) => ({
      fire_at: Number(x.fire_at),
      cell_id: String(x.cell_id),
      run_id: x.run_id === null ? null : String(x.run_id),
      state: String(x.state),
    }));
  }

  async function until(what: string, probe: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
    const t0 = Date.now();
    while (!(await probe())) {
      if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  test('each scheduled time fires exactly once, also after the cell holding the lease is killed', async () => {
    const cells = g.cells.map((c) => c.url);
    const def = await ok(cells[1]!, 'POST', DEFS, {
      token: g.adminKey,
      body: { name: 'every-2s', job_type: 'compute', spec: { code: 'return 1' }, cron: `*/${PERIOD_MS / 1000} * * * * *` },
    });
    const id = def.schedule_id as string;
    const TICKS = 5;
    // Three cells up for TICKS scheduled times.
    await until(`${TICKS} fires`, async () => (await fires(id)).length >= TICKS);
    // Kill the cell that fired last: it holds the definition's lease.
    const last = (await fires(id)).at(-1)!;
    const victim = g.cells.find((c) => c.output().includes(`cell ${last.cell_id} listening on`));
    assert.ok(victim, `the cell ${last.cell_id} that fired last is one of the group`);
    await victim!.kill('SIGKILL');
    const killedAt = Date.now();
    // Two cells go on for TICKS more scheduled times after the kill.
    await until(`${TICKS} fires after the kill`, async () => (await fires(id)).filter((f) => f.fire_at > killedAt).length >= TICKS);
    const live = g.cells.filter((c) => c !== victim);
    await ok(live[0]!.url, 'POST', `${DEFS}/${id}/disable`, { token: g.adminKey });
    // A fire in flight when it was disabled commits or not; what the store holds then is final.
    await new Promise((r) => setTimeout(r, 500));

    const rows = await fires(id);
    const times = rows.map((f) => f.fire_at);
    // Exactly once: every scheduled time from the first fire to the last is there, once, none other.
    assert.equal(times[0]! % PERIOD_MS, 0, 'fires are at the cron times');
    const expected = Array.from({ length: (times.at(-1)! - times[0]!) / PERIOD_MS + 1 }, (_, i) => times[0]! + i * PERIOD_MS);
    assert.deepEqual(times, expected, 'every scheduled time fired exactly once, none skipped');
    assert.ok(rows.length >= 2 * TICKS, `${rows.length} fires`);
    // Each fire made one job run, and no run was made outside a fire.
    for (const f of rows) assert.ok(f.run_id, `the fire at ${f.fire_at} made a run (${f.state})`);
    assert.equal(new Set(rows.map((f) => f.run_id)).size, rows.length, 'one run per fire');
    const runs = await adminQuery(g.db.url, `SELECT count(*)::int AS n FROM runs WHERE source = 'schedule:${id}'`);
    assert.equal(Number(runs.rows[0].n), rows.length, 'one job run per fire, none twice');
    // The killed cell fired nothing after it died; the definition counts every fire.
    const firers = new Set(rows.filter((f) => f.fire_at > killedAt + PERIOD_MS).map((f) => f.cell_id));
    assert.ok(!firers.has(last.cell_id), 'the killed cell fired nothing after');
    const rec = await ok(live[1]!.url, 'GET', `${DEFS}/${id}`, { token: g.adminKey });
    assert.equal(rec.fire_count, rows.length);
    console.log(
      `# fires by cell: ${JSON.stringify(Object.fromEntries([...new Set(rows.map((f) => f.cell_id))].map((c) => [c, rows.filter((f) => f.cell_id === c).length])))}`,
    );
  });
});
