// The scheduler's re-arm reads the earliest next fire asynchronously; on
// PostgreSQL two reads may complete out of order (a pool of connections). Only
// the latest re-arm may arm the timer: a stale read that completes last must
// not replace a newer time (a fire would then be late, or a deleted
// definition's time kept).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { JobsContext } from '../../../cell/jobs/context.ts';
import { CellMetrics } from '../../../cell/ops/metrics.ts';
import { SandboxPool } from '../../../cell/jobs/sandbox/pool.ts';
import { Scheduler } from '../../../cell/jobs/scheduler.ts';
import type { Row, SqlValue, Store } from '../../../cell/store/types.ts';
import { inProcessCell } from '../../helpers/inproc.ts';

const DEFS = '/api/public/v1/admin/jobs/definitions';
const T0 = Date.UTC(2026, 0, 1);

test('re-arm: a read that completes after a newer one does not arm the timer', async () => {
  const t = await inProcessCell();
  const real = t.core.store;
  // The real store, except that the first read's answer (taken at once) is held until released.
  let release!: () => void;
  const released = new Promise<void>((r) => {
    release = r;
  });
  let reads = 0;
  const store: Store = {
    engine: real.engine,
    async get(sql: string, params?: readonly SqlValue[]): Promise<Row | undefined> {
      const answer = await real.get(sql, params);
      if (++reads === 1) await released;
      return answer;
    },
    all: (sql, params) => real.all(sql, params),
    write: (fn) => real.write(fn),
    onChange: (l) => real.onChange(l),
    health: () => real.health(),
    close: () => real.close(),
  };
  const ctx: JobsContext = {
    core: { ...t.core, store },
    iam: t.modules.iam.iam,
    runs: t.modules.runs.runs,
    teams: t.modules.teams.teams,
    tools: t.modules.tools.tools,
    pool: new SandboxPool(),
    inflight: new Set(),
    workspaceQueues: new Map(),
    workspaceFileSizes: new Map(),
    wakeTimers: new Set(),
    custody: t.modules.custody.custody,
    stopped: false,
    metrics: new CellMetrics(),
    groupClock: { now: () => t.clock.now(), trusted: () => true },
  };
  const s = new Scheduler(ctx);
  try {
    const d = await t.request('POST', DEFS, {
      token: t.adminKey,
      body: { name: 'd', job_type: 'compute', spec: { code: 'return 1' }, cron: '*/5 * * * *' },
    });
    assert.equal(d.status, 201, d.text);
    const stale = s.rearm(); // reads T0 + 5 min; its answer is held
    assert.equal((await t.request('DELETE', `${DEFS}/${d.body.schedule_id}`, { token: t.adminKey })).status, 200);
    await s.rearm(); // reads: nothing to fire
    assert.equal(s.armedFor, null);
    release();
    await stale;
    assert.equal(reads, 4, 'two re-arms, each reading the earliest fire and the oldest pending fire');
    assert.equal(s.armedFor, null, "the stale read (a deleted definition's time) does not re-arm the timer");

    // The latest re-arm does arm the timer (the nulls above are not a scheduler that never arms).
    const e = await t.request('POST', DEFS, {
      token: t.adminKey,
      body: { name: 'e', job_type: 'compute', spec: { code: 'return 1' }, cron: '*/5 * * * *' },
    });
    assert.equal(e.status, 201, e.text);
    await s.rearm();
    assert.equal(s.armedFor, T0 + 5 * 60_000);
    await s.rearmed();
    assert.equal(s.armedFor, T0 + 5 * 60_000, 'rearmed() resolves with the latest re-arm done');
  } finally {
    s.stop();
    await ctx.pool.close();
    await t.close();
  }
});
