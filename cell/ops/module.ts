/**
 * Operations: health (`/healthz`, `/readyz`) and metrics (`--metrics-port`).
 * Mounted last (cell/server.ts), so its start runs once every other module
 * started (then the cell is ready) and its stop runs first (then `/readyz`
 * says `stopping` while the rest shuts down).
 */
import type { CellCore } from '../context.ts';
import type { CellModule } from '../module.ts';
import { mountHealth } from './health.ts';
import type { CellMetrics, Ops } from './api.ts';
import { serveMetrics, type MetricsServer } from './metrics-server.ts';

export function createOpsModule(core: CellCore, deps: { metrics: CellMetrics; member?: () => string }): CellModule & { ops: Ops } {
  let phase: 'starting' | 'ok' | 'stopping' = 'starting';
  let server: MetricsServer | null = null;
  return {
    name: 'ops',
    ops: { metricsUrl: () => server?.url ?? null, exposition: () => deps.metrics.expose() },
    routes(app) {
      mountHealth(app, {
        store: core.store,
        modules: () => phase,
        ...(deps.member ? { member: deps.member } : {}),
        observed: (ready) => deps.metrics.ready.set(ready ? 1 : 0),
      });
    },
    async start() {
      if (core.config.metricsPort !== null) {
        deps.metrics.collectProcessMetrics();
        server = await serveMetrics(deps.metrics, core.config.metricsPort);
      }
      phase = 'ok';
    },
    async stop() {
      phase = 'stopping';
      await server?.close();
      server = null;
    },
  };
}
