/** The oauth module (to be filled in). */
import type { CellModule } from '../module.ts';

export const oauthModule: CellModule = {
  name: 'oauth',
  migrations: [],
};
