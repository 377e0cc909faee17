/**
 * Third and fourth gates of a protected operation: authorization (403) and
 * the credential's own requests-per-minute ceiling (429).
 */
import type { MiddlewareHandler } from 'hono';
import { forbidden } from '../../core/errors.ts';
import { grants } from '../../core/authority/scopes.ts';
import type { AppEnv, Clock } from '../context.ts';
import { TokenBuckets, rateLimitHeaders, rateLimited } from '../../core/ratelimit.ts';

/** Per-credential rpm buckets, one set per distinct rpm value. */
class CredentialLimits {
  readonly #byRpm = new Map<number, TokenBuckets>();
  constructor(private readonly clock: Clock) {}
  take(credentialId: string, rpm: number) {
    let b = this.#byRpm.get(rpm);
    if (!b) { b = new TokenBuckets(rpm, rpm / 60, this.clock); this.#byRpm.set(rpm, b); }
    return b.take(credentialId);
  }
}

const limitsByClock = new WeakMap<Clock, CredentialLimits>();

/** Requires `permission` of the authenticated caller, then applies its per-key rpm. */
export function requires(permission: string): MiddlewareHandler<AppEnv> {
  return async function requiresPermission(c, next) {
    const auth = c.get('auth');
    if (!grants(auth.effective, permission)) {
      throw forbidden(`the credential lacks the permission ${permission}`, { required_permission: permission });
    }
    const rpm = auth.credential.rateLimitRpm;
    if (rpm !== undefined && rpm > 0) {
      const clock = c.get('cell').clock;
      let limits = limitsByClock.get(clock);
      if (!limits) { limits = new CredentialLimits(clock); limitsByClock.set(clock, limits); }
      // One bucket per root credential: a token or SAT derived from a key spends the key's budget.
      const r = limits.take(auth.credential.root, rpm);
      if (!r.allowed) throw rateLimited(r, 'requests-per-minute ceiling of this credential', rateLimitHeaders(r, 'credential', 60));
    }
    await next();
  };
}
