/** The edge module's instance: the core and the APIs it issues bundles from. */
import type { CellCore } from '../context.ts';
import type { Iam } from '../iam/api.ts';
import type { OAuthApi } from '../oauth/api.ts';
import type { Teams } from '../teams/api.ts';
import type { Tools } from '../tools/api.ts';
import type { Devices } from './devices.ts';
import type { RunLog } from '../receipts/api.ts';

export interface EdgeContext {
  core: CellCore;
  iam: Iam;
  teams: Teams;
  /** The catalog: a crew bundle carries the entries and pins of the imported tools its crew can call. */
  tools: Tools;
  oauth: OAuthApi;
  devices: Devices;
  /** The run log an imported device run joins. */
  runLog: RunLog;
}
