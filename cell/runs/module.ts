/**
 * The shared run infrastructure (crew runs and job runs): the `runs` and
 * `journal` tables, the event bus, run control (cancel) and the journal / SSE
 * routes under /api/public/v1/admin/jobs/runs/{run_id}/. Entry points for
 * other modules:
 * - runs.ts: createRunTx, getRun, listRuns, setRunState(Tx), setRunFlags, activeRuns
 * - journal.ts: appendJournal, finishRun, readJournal, putRunBlob/getBlob
 * - storage.ts: what runs keep in the store and its limits (run cap, workspace and cell quotas)
 * - events.ts: subscribe(cell, runId, afterSeq, onEvent) -> unsubscribe
 * - control.ts: registerDriver, requestCancel
 * - drive.ts: driveRun (core/engine runGraph with the journal port bound here)
 * - routes-values.ts: a step's input or output by the hash its journal record names
 */
import type { CellModule } from '../module.ts';
import { abortAllDrivers } from './control.ts';
import { mountRunEventRoutes } from './routes.ts';
import { mountRunValueRoutes } from './routes-values.ts';
import { RUNS_MIGRATIONS } from './runs.ts';
import { STORAGE_MIGRATIONS } from './storage.ts';

export const runsModule: CellModule = {
  name: 'runs',
  migrations: [...RUNS_MIGRATIONS, ...STORAGE_MIGRATIONS],
  routes(app, cell) {
    mountRunEventRoutes(app, cell);
    mountRunValueRoutes(app, cell);
  },
  async stop(cell) {
    await abortAllDrivers(cell);
  },
};
