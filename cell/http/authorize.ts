/**
 * Third and fourth gates of a protected operation: authorization (403) and
 * the credential's own requests-per-minute ceiling (429), counted against its
 * root credential: runtime/gateway.ts `permissionGate`, with the cell's
 * limiter (one per cell, on the request context).
 */
import type { MiddlewareHandler } from 'hono';
import { permissionGate } from '../../runtime/gateway.ts';
import type { AppEnv, AuthContext } from '../context.ts';

/** Requires `permission` of the authenticated caller (null: none, any authenticated caller), then applies its per-credential rpm. */
export function requires(permission: string | null): MiddlewareHandler<AppEnv> {
  return permissionGate<AuthContext, AppEnv>(
    permission,
    (c) => c.get('credentialLimits'),
    (a) => a.credential.rateLimitRpm,
  );
}
