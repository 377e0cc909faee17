/** Principals, roles, API keys, audit trail and the bootstrap owner (being built). */
import type { CellModule } from '../module.ts';

export const iamModule: CellModule = {
  name: 'iam',
  migrations: [],
};
