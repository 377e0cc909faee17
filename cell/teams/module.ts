/**
 * The Agent Teams module: its tables (AI providers and secrets, the tool
 * catalog's workspace storage, and the teams resources) and its routes.
 */
import type { CellModule } from '../module.ts';
import { AI_MIGRATIONS } from '../ai/providers.ts';
import { aiRoutes } from '../ai/routes.ts';
import { TOOLS_MIGRATIONS } from '../tools/catalog.ts';
import { formationRoutes } from './routes-formations.ts';
import { resourceRoutes } from './routes-resources.ts';
import { runRoutes } from './routes-runs.ts';
import { startSweep, stopSweep } from './runs.ts';
import { TEAMS_MIGRATIONS } from './schema.ts';

export const teamsModule: CellModule = {
  name: 'teams',
  migrations: [...AI_MIGRATIONS, ...TOOLS_MIGRATIONS, ...TEAMS_MIGRATIONS],
  routes(app, cell) {
    aiRoutes(app, cell);
    resourceRoutes(app, cell);
    formationRoutes(app, cell);
    runRoutes(app, cell);
  },
  start(cell) {
    startSweep(cell);
  },
  async stop(cell) {
    await stopSweep(cell);
  },
};
