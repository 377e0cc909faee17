/** The edge module (to be filled in). */
import type { CellModule } from '../module.ts';

export const edgeModule: CellModule = {
  name: 'edge',
  migrations: [],
};
