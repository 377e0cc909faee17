/** The discovery module (to be filled in). */
import type { CellModule } from '../module.ts';

export const discoveryModule: CellModule = {
  name: 'discovery',
  migrations: [],
};
