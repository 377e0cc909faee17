/** The jobs module (to be filled in). */
import type { CellModule } from '../module.ts';

export const jobsModule: CellModule = {
  name: 'jobs',
  migrations: [],
};
