/** The teams module (to be filled in). */
import type { CellModule } from '../module.ts';

export const teamsModule: CellModule = {
  name: 'teams',
  migrations: [],
};
