/**
 * The edge module: devices, signed key and crew bundles issued for them, and
 * journals carried back from them (see docs/edge.md).
 */
import type { CellModule } from '../module.ts';
import { edgeRoutes } from './routes.ts';
import { EDGE_MIGRATIONS } from './schema.ts';
import { LOCAL_RUNTIME_SERVICE } from '../ai/providers.ts';
import { localRuntime } from './local-runtime.ts';

export const edgeModule: CellModule = {
  name: 'edge',
  migrations: EDGE_MIGRATIONS,
  init(cell) {
    // The local-signed provider type runs on this runtime when node-llama-cpp is installed (edge-runtime/).
    const rt = localRuntime(cell);
    if (rt) cell.services.set(LOCAL_RUNTIME_SERVICE, rt);
  },
  async stop(cell) {
    const rt = cell.services.get(LOCAL_RUNTIME_SERVICE) as { dispose?: () => Promise<void> } | undefined;
    await rt?.dispose?.();
  },
  routes(app, cell) {
    edgeRoutes(app, cell);
  },
};
