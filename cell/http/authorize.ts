/**
 * Third and fourth gates of a protected operation: authorization (403) and
 * the credential's own requests-per-minute ceiling (429), counted against
 * its root credential (cell/http/credential-limits.ts).
 */
import type { MiddlewareHandler } from 'hono';
import { forbidden } from '../../core/errors.ts';
import { grants } from '../../core/authority/scopes.ts';
import { rateLimitHeaders, rateLimited } from '../../core/ratelimit.ts';
import type { AppEnv } from '../context.ts';

/** Requires `permission` of the authenticated caller, then applies its per-credential rpm. */
export function requires(permission: string): MiddlewareHandler<AppEnv> {
  return async function requiresPermission(c, next) {
    const auth = c.get('auth');
    if (!grants(auth.effective, permission)) {
      throw forbidden(`the credential lacks the permission ${permission}`, { required_permission: permission });
    }
    const rpm = auth.credential.rateLimitRpm;
    if (rpm !== undefined && rpm > 0) {
      const r = c.get('credentialLimits').take(auth.credential.root, rpm);
      if (!r.allowed) throw rateLimited(r, 'requests-per-minute ceiling of this credential', rateLimitHeaders(r, 'credential', 60));
    }
    await next();
  };
}
