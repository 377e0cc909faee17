/**
 * The cluster module: membership of the group of cells on one store
 * (cluster.ts), its heartbeat and the sweeps that run after each beat
 * (takeover of runs whose owner died: the teams and jobs modules register
 * them through `onTick`), and `GET /api/public/v1/admin/cells`. The cell
 * joins when the module is built (a posture refusal stops the start before
 * anything listens), beats once it listens, and marks itself stopped on stop
 * (after the runs module aborted its drives), so peers take its runs at once.
 */
import type { CellCore } from '../context.ts';
import type { CellModule } from '../module.ts';
import type { CellMetrics } from '../ops/api.ts';
import { Cluster } from './cluster.ts';
import { mountCellRoutes, type IdentityKeys } from './routes.ts';

export interface ClusterModule extends CellModule {
  cluster: Cluster;
}

export async function createClusterModule(
  core: CellCore,
  deps: { identityKeys: IdentityKeys; metrics: CellMetrics },
): Promise<ClusterModule> {
  const cluster = new Cluster(core);
  cluster.onOffset = (ms) => deps.metrics.clockOffset.set(ms / 1000);
  const member = core.config.joinGroup;
  if (member) await cluster.join();
  return {
    name: 'cluster',
    cluster,
    routes(app) {
      mountCellRoutes(app, cluster, deps.identityKeys);
    },
    async start() {
      if (member) cluster.start();
    },
    async stop() {
      if (member) await cluster.stop();
    },
  };
}
