/** The edge module's instance: the core and the APIs it issues bundles from. */
import type { CellCore } from '../context.ts';
import type { Iam } from '../iam/iam.ts';
import type { OAuthApi } from '../oauth/module.ts';
import type { Teams } from '../teams/teams.ts';
import type { Devices } from './devices.ts';

export interface EdgeContext {
  core: CellCore;
  iam: Iam;
  teams: Teams;
  oauth: OAuthApi;
  devices: Devices;
}
