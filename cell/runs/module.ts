/**
 * The shared run infrastructure (crew runs and job runs): the `runs` and
 * `journal` tables, the event bus, run control (cancel), driving a graph on
 * the engine, the approvals shared by waiting runs, and the journal / SSE
 * routes under /api/public/v1/admin/jobs/runs/{run_id}/. Other modules use
 * its API (`runs`, cell/runs/api.ts). On stop it aborts the drives of this
 * process (the runs stay non-terminal and are recovered on the next start).
 */
import type { CellCore } from '../context.ts';
import type { Iam } from '../iam/api.ts';
import type { Cluster } from '../cluster/api.ts';
import type { CellModule } from '../module.ts';
import type { CellMetrics } from '../ops/api.ts';
import { runsApi, type Runs } from './api.ts';
import { abortAllDrivers, abortCancelledElsewhere } from './control.ts';
import { createRunsContext } from './context.ts';
import { catchUpRemote } from './events.ts';
import { mountRunEventRoutes } from './routes.ts';
import { mountRunValueRoutes } from './routes-values.ts';
import { backfillErrorReasons, countStalled, runCountsByKindAndState } from './repository.ts';
import { STALL_LEASES } from './runs.ts';
import { foldStorage } from './storage.ts';

/** How often the runs' storage shares are summed into the totals, ms. */
export const STORAGE_FOLD_MS = 5_000;

export interface RunsModule extends CellModule {
  runs: Runs;
}

export async function createRunsModule(core: CellCore, deps: { iam: Iam; cluster: Cluster; metrics: CellMetrics }): Promise<RunsModule> {
  const ctx = createRunsContext(core, deps.iam, deps.cluster, deps.metrics);
  deps.metrics.countRunsWith(() => runCountsByKindAndState(core.store));
  deps.metrics.countStalledWith(() => countStalled(core.store, core.clock.now() - STALL_LEASES * core.config.leaseMs));
  // The runs' storage shares are summed into the totals off their path (storage.ts foldStorage).
  let folding: Promise<unknown> | null = null;
  const foldTimer = setInterval(() => {
    // A member whose clock is beyond the bound stood down: it makes no background writes.
    if (folding || !deps.cluster.trusted()) return;
    folding = foldStorage(ctx)
      .catch((e: unknown) => core.log.warn('storage fold failed', { error: e }))
      .finally(() => {
        folding = null;
      });
  }, STORAGE_FOLD_MS);
  foldTimer.unref();
  // Records appended by other cells of the group reach this cell's event subscribers.
  // A cancel recorded on another cell stops this cell's drive of that run at once: one check at a time,
  // and one more after it when other cells appended meanwhile (a busy group notifies at every append).
  let cancelCheck: Promise<void> | null = null;
  let cancelAgain = false;
  const checkCancels = (): void => {
    if (cancelCheck) {
      cancelAgain = true;
      return;
    }
    cancelCheck = (async () => {
      do {
        cancelAgain = false;
        await abortCancelledElsewhere(ctx);
      } while (cancelAgain && ctx.drivers.size > 0);
    })()
      .catch((e: unknown) => core.log.warn('remote cancel check failed', { error: e }))
      .finally(() => {
        cancelCheck = null;
      });
  };
  // A change that names its runs (Change.subjects) costs reads only for the runs it names that are followed
  // or driven here: in a busy group, other cells' appends are to the runs they drive.
  const unlisten = core.store.onChange((c) => {
    if (!c.remote || !c.tables.has('journal')) return;
    const named = c.subjects;
    if (ctx.bus.size > 0) void catchUpRemote(ctx, named).catch((e: unknown) => core.log.warn('run events catch-up failed', { error: e }));
    if (ctx.drivers.size > 0 && (named === undefined || [...named].some((id) => ctx.drivers.has(id)))) checkCancels();
  });
  return {
    name: 'runs',
    runs: runsApi(ctx),
    routes(app) {
      mountRunEventRoutes(app, ctx);
      mountRunValueRoutes(app, ctx);
    },
    async start() {
      // Runs that ended before their reason had a column (migration runs-007) get it, a batch at a time.
      for (let filled = 500; filled === 500; ) filled = await backfillErrorReasons(core.store, 500);
    },
    async stop() {
      clearInterval(foldTimer);
      await folding;
      ctx.stopping = true;
      unlisten();
      await abortAllDrivers(ctx);
    },
  };
}
