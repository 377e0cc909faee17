/**
 * The edge module: devices, signed key and crew bundles issued for them, and
 * journals carried back from them (see docs/edge.md).
 */
import type { CellModule } from '../module.ts';
import { edgeRoutes } from './routes.ts';
import { EDGE_MIGRATIONS } from './schema.ts';

export const edgeModule: CellModule = {
  name: 'edge',
  migrations: EDGE_MIGRATIONS,
  routes(app, cell) {
    edgeRoutes(app, cell);
  },
};
