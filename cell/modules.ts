/**
 * The cell's modules in start order. Migrations are applied in this order,
 * routes are mounted in this order, and modules stop in reverse.
 */
import type { CellModule } from './module.ts';
import { iamModule } from './iam/module.ts';
import { oauthModule } from './oauth/module.ts';
import { runsModule } from './runs/module.ts';
import { teamsModule } from './teams/module.ts';
import { jobsModule } from './jobs/module.ts';
import { edgeModule } from './edge/module.ts';
import { consoleModule } from './console/module.ts';
import { discoveryModule } from './discovery/module.ts';

export const MODULES: readonly CellModule[] = [
  iamModule,
  oauthModule,
  runsModule,
  teamsModule,
  jobsModule,
  edgeModule,
  consoleModule,
  discoveryModule,
];
