/**
 * The edge module: devices, signed key and crew bundles issued for them, and
 * journals carried back from them (see docs/edge.md). The device registry
 * (`Devices`) is built before the OAuth module, which needs to know which
 * devices exist to issue tokens addressed to one.
 */
import type { CellCore } from '../context.ts';
import type { Iam } from '../iam/api.ts';
import type { CellModule } from '../module.ts';
import type { OAuthApi } from '../oauth/api.ts';
import type { Teams } from '../teams/api.ts';
import type { Tools } from '../tools/api.ts';
import type { EdgeContext } from './context.ts';
import type { Devices } from './devices.ts';
import type { RunLog } from '../receipts/api.ts';
import { issueKeyBundle, trustAnchor, type IssuedBundle } from './export.ts';
import { edgeRoutes } from './routes.ts';

export interface EdgeModule extends CellModule {
  /** Issues a signed key bundle for a registered device (`bundle keys` on the command line: every key, as the operator holds them). */
  issueKeyBundle(deviceId: string, ttlSeconds?: number): Promise<IssuedBundle>;
  /** The trust anchor a device pins. */
  trustAnchor(): Promise<{ cell_id: string; keys: { kid: string; jwk: JsonWebKey }[] }>;
}

export function createEdgeModule(
  core: CellCore,
  deps: { iam: Iam; teams: Teams; tools: Tools; oauth: OAuthApi; devices: Devices; runLog: RunLog },
): EdgeModule {
  const ctx: EdgeContext = { core, ...deps };
  return {
    name: 'edge',
    issueKeyBundle: (deviceId, ttl) => issueKeyBundle(ctx, deviceId, { ttlSeconds: ttl }),
    trustAnchor: () => trustAnchor(ctx),
    routes(app) {
      edgeRoutes(app, ctx);
    },
  };
}
