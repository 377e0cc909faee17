/**
 * Offline crews at the edge: the crew bundle, the signed local model, and the
 * run routes. (Filled in step by step; without a crew bundle the device only
 * checks keys.)
 */
import type { Hono, MiddlewareHandler } from 'hono';
import type { DeviceState } from '../bundles/accept.ts';
import type { EdgeClock } from './clock.ts';
import type { DeviceFile, TrustFile } from './files.ts';
import type { EdgeEnv, EdgeRuntime } from './gateway.ts';

export interface OfflineSetup {
  state: DeviceState;
  info: Record<string, unknown>;
}

export async function prepareOffline(opts: {
  dir: string; device: DeviceFile; trust: TrustFile; state: DeviceState; clock: EdgeClock;
  crewBundle: string | undefined; model: string | undefined; modelManifest: string | undefined;
}): Promise<OfflineSetup> {
  return { state: opts.state, info: { crew: null, model: null } };
}

export function mountOffline(_app: Hono<EdgeEnv>, _guard: (p: string) => MiddlewareHandler<EdgeEnv>, _rt: EdgeRuntime, _setup: OfflineSetup): void {
  // crew run routes are mounted here once a crew bundle is loaded
}
