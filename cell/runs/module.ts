/** The runs module (to be filled in). */
import type { CellModule } from '../module.ts';

export const runsModule: CellModule = {
  name: 'runs',
  migrations: [],
};
