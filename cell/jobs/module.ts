/**
 * The Jobs API (spec: Jobs runs, Jobs definitions; DESIGN: jobs/endpoints):
 * job runs of every type on the orchestration engine (runner.ts), the sandbox
 * pool (sandbox/), durable cron definitions and their scheduler, published
 * endpoints. Shared run infrastructure (run table, journal, events, SSE,
 * cancel) lives in cell/runs.
 */
import { statSync } from 'node:fs';
import type { Cell } from '../context.ts';
import type { CellModule } from '../module.ts';
import { onPrincipalDeactivated } from '../iam/lifecycle.ts';
import { abortAllDrivers } from '../runs/control.ts';
import { registerWorkspaceFiles } from '../runs/storage.ts';
import { activeRuns } from '../runs/runs.ts';
import { disableAuthoredTx } from './_definitions-store.ts';
import { DEFINITIONS_MIGRATIONS } from './definitions.ts';
import { ENDPOINTS_MIGRATIONS } from './endpoints.ts';
import { mountDefinitionRoutes } from './routes-definitions.ts';
import { mountEndpointRoutes } from './routes-endpoints.ts';
import { mountRunRoutes } from './routes-runs.ts';
import { Scheduler } from './scheduler.ts';
import { resumeJobRun, startJobDrive, jobsService, type JobsService } from './runner.ts';
import { SandboxPool } from './sandbox/pool.ts';
import { workspaceDbPath } from './steps.ts';

export const jobsModule: CellModule = {
  name: 'jobs',
  migrations: [...DEFINITIONS_MIGRATIONS, ...ENDPOINTS_MIGRATIONS],
  init(cell) {
    const svc: JobsService = { pool: new SandboxPool(), inflight: new Set() };
    cell.services.set('jobs', svc);
    cell.services.set('jobs.scheduler', new Scheduler(cell));
    // A workspace's storage quota counts its SQL database file too.
    registerWorkspaceFiles(cell, (ws) => statSync(workspaceDbPath(cell, ws), { throwIfNoEntry: false })?.size ?? 0);
    // A definition acts as its author: deactivating the author disables what it authored.
    onPrincipalDeactivated(cell, (tx, principalId, action, actor, at) => {
      disableAuthoredTx(tx, principalId, `author_${action === 'archive' ? 'archived' : action === 'delete' ? 'deleted' : 'purged'}`, actor, at);
    });
  },
  routes(app, cell) {
    mountRunRoutes(app, cell);
    mountDefinitionRoutes(app, cell, () => schedulerOf(cell));
    mountEndpointRoutes(app, cell);
  },
  async start(cell) {
    // Recovery: job runs left queued or running by a previous process are driven
    // again; completed steps are reused from the journal, not re-executed.
    for (const run of activeRuns(cell, 'job')) {
      if (run.state === 'waiting') {
        // An agent run waiting on an approval or a timer is looked at again, so a timeout
        // that passed while the cell was down fails closed now.
        if (run.job_type === 'agent') void resumeJobRun(cell, run.run_id);
        continue;
      }
      cell.log.info('recovering job run', { run_id: run.run_id, state: run.state });
      void startJobDrive(cell, run);
    }
    await schedulerOf(cell).start();
  },
  async stop(cell) {
    schedulerOf(cell).stop();
    const svc = jobsService(cell);
    // Leave in-flight runs non-terminal (they are recovered on the next start).
    await abortAllDrivers(cell);
    await Promise.allSettled([...svc.inflight]);
    await svc.pool.close();
  },
};

/** The cell's job scheduler (tests call `tick()` after moving a manual clock). */
export function schedulerOf(cell: Cell): Scheduler {
  const s = cell.services.get('jobs.scheduler') as Scheduler | undefined;
  if (!s) throw new TypeError('jobs module not initialised');
  return s;
}
