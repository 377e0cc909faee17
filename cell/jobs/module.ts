/**
 * The Jobs API (spec: Jobs runs, Jobs definitions; DESIGN: jobs/endpoints):
 * job runs of every type on the orchestration engine (runner.ts), the sandbox
 * pool (sandbox/), durable cron definitions and their scheduler, published
 * endpoints. Shared run infrastructure (run table, journal, events, SSE,
 * cancel) is the runs module's.
 */
import { statSync } from 'node:fs';
import type { CellCore } from '../context.ts';
import type { GroupClock } from '../cluster/api.ts';
import type { CellMetrics } from '../ops/api.ts';
import type { Custody } from '../custody/api.ts';
import type { Iam, Lifecycle } from '../iam/api.ts';
import type { CellModule } from '../module.ts';
import type { Runs } from '../runs/api.ts';
import type { Teams } from '../teams/api.ts';
import type { Tools } from '../tools/api.ts';
import { JobEndpoints } from './api.ts';
import type { JobsContext } from './context.ts';
import { authorityLapse, disableAuthoredTx, type AuthorityLapse } from './definition-authority.ts';
import { mountDefinitionRoutes } from './routes-definitions.ts';
import { mountEndpointRoutes } from './routes-endpoints.ts';
import { mountRunRoutes } from './routes-runs.ts';
import { mountOutcomeRoutes } from './outcomes.ts';
import { definitionsUsingCrew } from './repository.ts';
import { resumeJobRun, startJobDrive } from './runner.ts';
import { PgWorkspaces } from './sandbox/pg-workspace.ts';
import { SandboxPool } from './sandbox/pool.ts';
import { Scheduler } from './scheduler.ts';
import type { DefinitionJobType } from './shapes.ts';
import { workspaceDbPath } from './steps.ts';
import { migrateLegacyWorkspaces } from './legacy-workspaces.ts';
import { sealClearWorkspaceSecrets } from './workspace-secrets.ts';

export interface JobsModule extends CellModule {
  /** Published endpoints, for the MCP endpoint's tools (the face, api.ts). */
  endpoints: JobEndpoints;
  /** The cron scheduler (tests call `tick()` after moving a manual clock). */
  scheduler: Scheduler;
  /** Whether a definition's author may still act through it: null when yes, else why (the check each fire makes). */
  authorityLapse(d: {
    job_type: DefinitionJobType;
    author_id: string;
    author_authority: string | null;
    author_root?: string | null;
    spec?: unknown;
  }): Promise<AuthorityLapse | null>;
}

export function createJobsModule(
  core: CellCore,
  deps: {
    iam: Iam;
    lifecycle: Lifecycle;
    runs: Runs;
    teams: Teams;
    tools: Tools;
    custody: Custody;
    metrics: CellMetrics;
    groupClock?: GroupClock;
  },
): JobsModule {
  const ctx: JobsContext = {
    core,
    iam: deps.iam,
    runs: deps.runs,
    teams: deps.teams,
    tools: deps.tools,
    pool: new SandboxPool(),
    inflight: new Set(),
    workspaceQueues: new Map(),
    workspaceFileSizes: new Map(),
    wakeTimers: new Set(),
    stopped: false,
    metrics: deps.metrics,
    groupClock: deps.groupClock ?? { now: () => core.clock.now(), trusted: () => true },
    // On the PostgreSQL engine a workspace's SQL database is a database of its own on the store's server, one for the whole group.
    ...(core.store.engine === 'postgres' && core.config.storeUrl
      ? { pgWorkspaces: new PgWorkspaces(core.config.storeUrl, { log: core.log, pgBinDir: core.config.pgBinDir }) }
      : {}),
    custody: deps.custody,
  };
  const scheduler = new Scheduler(ctx);
  let unfollow: (() => void) | undefined;
  // A workspace's storage quota counts its SQL database too: its file, measured once and again after each
  // SQL step on it (the only writer of the file: steps.ts), not at every append; on PostgreSQL its database
  // as last measured here.
  deps.runs.registerWorkspaceFiles((ws) => {
    if (ctx.pgWorkspaces) return ctx.pgWorkspaces.sizes.get(ws) ?? 0;
    let size = ctx.workspaceFileSizes.get(ws);
    if (size === undefined) {
      size = statSync(workspaceDbPath(core.config.dataDir, ws), { throwIfNoEntry: false })?.size ?? 0;
      if (ctx.workspaceFileSizes.size >= 10_000) ctx.workspaceFileSizes.clear();
      ctx.workspaceFileSizes.set(ws, size);
    }
    return size;
  });
  // A crew a live definition names (or whose graph it pins) is not deleted or changed under it.
  deps.teams.onCrewUsers((crew, db) => definitionsUsingCrew(db, crew.crew_id, crew.graph_hash));
  // A definition acts as its author: deactivating the author disables what it authored, in the same transaction.
  deps.lifecycle.onDeactivate(async (tx, principalId, action, actor, at) => {
    await disableAuthoredTx(
      ctx,
      tx,
      principalId,
      `author_${action === 'archive' ? 'archived' : action === 'delete' ? 'deleted' : 'purged'}`,
      actor,
      at,
    );
  });
  return {
    name: 'jobs',
    scheduler,
    endpoints: new JobEndpoints(ctx),
    authorityLapse: (d) => authorityLapse(ctx, d),
    routes(app) {
      mountRunRoutes(app, ctx);
      mountOutcomeRoutes(app, ctx);
      mountDefinitionRoutes(app, ctx, () => scheduler);
      mountEndpointRoutes(app, ctx);
    },
    async start() {
      // SQL workspace secrets of an earlier version, in the clear: sealed before anything uses them.
      const sealed = await sealClearWorkspaceSecrets(ctx);
      if (sealed > 0) core.log.info('sealed the secrets of SQL workspaces kept in the clear', { workspaces: sealed });
      // Workspaces of an earlier version (a schema in the cells' database) move into databases of their own.
      if (ctx.pgWorkspaces) void migrateLegacyWorkspaces(ctx);
      // Recovery: job runs left queued or running by a previous process are driven
      // again; completed steps are reused from the journal, not re-executed.
      for (const run of await ctx.runs.activeRuns('job')) {
        // A run waiting on an operator (a lost outcome) has nothing due: only a resolution, a cancel or a recover moves it.
        if (run.state === 'outcome_unknown') continue;
        if (run.state === 'waiting') {
          // An agent run waiting on an approval or a timer is looked at again, so a timeout
          // that passed while the cell was down fails closed now; any other job run waits only
          // to be driven again after an operator resolved a lost outcome (its wake was lost with the cell).
          void resumeJobRun(ctx, run.run_id);
          continue;
        }
        core.log.info('recovering job run', { run_id: run.run_id, state: run.state });
        void startJobDrive(ctx, run);
      }
      // Takeover: job runs whose lease holder died are driven here (the drive's claim decides
      // between peers sweeping at once; completed steps are reused from the journal).
      ctx.runs.onHeartbeat(async () => {
        if (ctx.stopped) return;
        for (const run of await ctx.runs.orphanedRuns('job')) {
          if (ctx.stopped || ctx.runs.isDriven(run.run_id)) continue;
          core.log.info('taking over job run', { run_id: run.run_id, previous_owner: run.lease_owner });
          void startJobDrive(ctx, run);
        }
        // Waiting job runs whose last driver died: an agent run's wake-up timer is armed here now; any
        // other waits to be driven after a resolved lost outcome.
        for (const run of await ctx.runs.orphanedWaitingRuns('job')) {
          if (ctx.stopped || ctx.runs.isDriven(run.run_id)) continue;
          core.log.info('taking over waiting job run', { run_id: run.run_id, previous_coordinator: run.coordinator });
          void resumeJobRun(ctx, run.run_id);
        }
      });
      // Another cell of the group created, changed or fired a definition: re-arm for the earliest next fire.
      // (This cell's own changes re-arm through the routes and the ticks.)
      unfollow = core.store.onChange((c) => {
        if (c.remote && (c.tables.has('job_definitions') || c.tables.has('job_fires'))) void scheduler.rearm();
        // The store is back after an outage: fire what it held up now rather than at the next back-off.
        if (c.gap === 'resumed') void core.traces.detached(() => scheduler.tick());
      });
      await scheduler.start();
    },
    async stop() {
      ctx.stopped = true;
      unfollow?.();
      scheduler.stop();
      for (const t of ctx.wakeTimers) clearTimeout(t);
      ctx.wakeTimers.clear();
      // Leave in-flight runs non-terminal (they are recovered on the next start).
      await ctx.runs.abortAllDrivers();
      await Promise.allSettled([...ctx.inflight]);
      await ctx.pool.close();
      await ctx.pgWorkspaces?.close();
    },
  };
}
