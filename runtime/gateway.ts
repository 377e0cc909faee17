/**
 * The gateway both programs put in front of every request, one implementation
 * of each gate, in the spec's order:
 *
 *   1. the rate budget per client IP (429, `Retry-After`); the IETF and
 *      X-RateLimit headers go on every response, errors included;
 *   2. authentication (401): the `Authorization` header read once
 *      (core/tokens/request.ts) and handed to the host's authenticator;
 *   3. authorization (403): the operation's permission in the credential's
 *      effective authority;
 *   4. the credential's own requests-per-minute ceiling (429), counted
 *      against its root credential (a token derived from a key spends the
 *      key's budget), one limiter (`CredentialLimits`);
 *   5. the error envelope for whatever any gate or handler throws.
 *
 * The cell (cell/app.ts, cell/http/) and the edge (edge/gateway.ts) build
 * their apps from these; what differs (which credentials they accept, the
 * edge's clock check, the cell's public discovery paths) is the host's.
 */
import type { Context, Env, ErrorHandler, MiddlewareHandler } from 'hono';
import { ServiceError, isServiceError, toEnvelope, unauthorized, forbidden } from '../core/errors.ts';
import { grants } from '../core/authority/scopes.ts';
import { TokenBuckets, rateLimitHeaders, rateLimited, type RateClock, type TakeResult } from '../core/ratelimit.ts';
import { parseAuthorization } from '../core/tokens/request.ts';

/** What the gates need of an authenticated request's authority. */
export interface GatewayAuth {
  /** The permission selectors this request may exercise. */
  effective: readonly string[];
  credential: {
    /** The credential everything derives from; the rpm bucket is its. */
    root: string;
  };
}

/** The variables the gates set on a request. */
export type GatewayEnv<A extends GatewayAuth> = Env & { Variables: { auth: A; requestId: string } };

/**
 * Where hosts that serve one service together keep the buckets they share
 * (the cell's store, for a group of cells): one take, atomic for the whole
 * group, applying core's `takeToken` to the stored bucket.
 */
export interface SharedBuckets {
  take(key: string, capacity: number, refillPerMs: number, now: number): Promise<TakeResult>;
}

/**
 * Requests-per-minute buckets: one per root credential (or other budget
 * holder, such as a published endpoint), sized by its rpm. In memory, or in
 * `shared` buckets when the host serves with others (a group of cells: the
 * ceiling holds for the group, not for each cell). One limiter either way:
 * the bucket rule is core's `takeToken`.
 */
export class CredentialLimits {
  readonly #byRpm = new Map<number, TokenBuckets>();
  constructor(
    private readonly clock: RateClock,
    private readonly shared?: SharedBuckets,
  ) {}

  /** Takes one request from `root`'s bucket of `rpm` per minute. */
  take(root: string, rpm: number): TakeResult | Promise<TakeResult> {
    // Buckets are per rpm, as in memory: a ceiling changed starts a fresh bucket.
    if (this.shared) return this.shared.take(`${rpm}:${root}`, rpm, rpm / 60_000, this.clock.now());
    let b = this.#byRpm.get(rpm);
    if (!b) {
      b = new TokenBuckets(rpm, rpm / 60, this.clock);
      this.#byRpm.set(rpm, b);
    }
    return b.take(root);
  }
}

/** Gives each request an id (echoed as X-Request-Id), the correlation id of its errors. */
export function requestContext<E extends GatewayEnv<GatewayAuth>>(): MiddlewareHandler<E> {
  return async function requestContext(c, next) {
    c.set('requestId', crypto.randomUUID());
    await next();
    c.res.headers.set('X-Request-Id', c.get('requestId'));
  };
}

/** Gate 1: the per-client-IP token bucket, with the rate-limit headers on every response. */
export function rateGate<E extends Env>(o: {
  capacity: number;
  refillPerSecond: number;
  clock: RateClock;
  clientIp: (c: Context<E>) => string | null;
}): MiddlewareHandler<E> {
  const buckets = new TokenBuckets(o.capacity, o.refillPerSecond, o.clock);
  const windowSeconds = Math.ceil(o.capacity / o.refillPerSecond);
  return async function rateGate(c, next) {
    const r = buckets.take(o.clientIp(c) ?? 'unknown');
    const headers = rateLimitHeaders(r, 'gateway', windowSeconds);
    if (!r.allowed) throw rateLimited(r, 'gateway budget for this client', headers);
    await next();
    for (const [k, v] of Object.entries(headers)) if (!c.res.headers.has(k)) c.res.headers.set(k, v);
  };
}

/**
 * Gate 2: authentication. Reads `Authorization: Bearer|DPoP <token>` and
 * asks the host's `authenticate` (which refuses with a ServiceError, or
 * returns null for a credential it does not recognise: 401).
 */
export function authGate<A extends GatewayAuth, E extends GatewayEnv<A>>(
  authenticate: (cred: { scheme: 'bearer' | 'dpop'; token: string }, c: Context<E>) => Promise<A | null>,
): MiddlewareHandler<E> {
  return async function authGate(c, next) {
    const header = c.req.header('authorization');
    if (!header) throw unauthorized('missing bearer credential');
    const cred = parseAuthorization(header);
    if (!cred) throw unauthorized('malformed Authorization header');
    const auth = await authenticate(cred, c);
    if (!auth) throw unauthorized('credential not recognised');
    c.set('auth', auth);
    await next();
  };
}

/**
 * Gates 3 and 4: the permission (403), then the credential's own rpm ceiling
 * (429) when `rpmOf` gives one, counted against its root credential. A null
 * permission is an operation any authenticated caller may call (who am I):
 * only the rpm ceiling applies.
 */
export function permissionGate<A extends GatewayAuth, E extends GatewayEnv<A>>(
  permission: string | null,
  limits: (c: Context<E>) => CredentialLimits,
  rpmOf: (auth: A) => number | null | undefined,
): MiddlewareHandler<E> {
  return async function permissionGate(c, next) {
    const auth = c.get('auth');
    if (permission !== null && !grants(auth.effective, permission)) {
      throw forbidden(`the credential lacks the permission ${permission}`, { required_permission: permission });
    }
    const rpm = rpmOf(auth);
    if (rpm !== null && rpm !== undefined && rpm > 0) {
      const r = await limits(c).take(auth.credential.root, rpm);
      if (!r.allowed) throw rateLimited(r, 'requests-per-minute ceiling of this credential', rateLimitHeaders(r, 'credential', 60));
    }
    await next();
  };
}

/**
 * Gate 5: every error leaves as the spec's envelope. `toServiceError` maps
 * framework errors (malformed bodies, HTTP exceptions) first; anything else
 * is internal_error with the request id as correlation id, its cause given to
 * `logCause` only. A 401 carries `challenge` as WWW-Authenticate unless the
 * refusal set its own.
 */
export function envelopeErrors<E extends GatewayEnv<GatewayAuth>>(o: {
  toServiceError?: (err: unknown) => unknown;
  logCause: (correlationId: string, err: unknown, c: Context<E>) => void;
  challenge: string;
}): ErrorHandler<E> {
  return (err, c) => {
    const e = o.toServiceError ? o.toServiceError(err) : err;
    const id = c.get('requestId') ?? crypto.randomUUID();
    const { status, body } = toEnvelope(e, id);
    if (status >= 500) o.logCause(id, err, c);
    const headers: Record<string, string> = {};
    if (isServiceError(e) && e.headers) Object.assign(headers, e.headers);
    if (status === 401 && !headers['WWW-Authenticate']) headers['WWW-Authenticate'] = o.challenge;
    return c.json(body, status, headers);
  };
}

/** A request body past `limitBytes`: the one refusal both hosts give (400 body_too_large). */
export function bodyTooLarge(limitBytes: number): ServiceError {
  return new ServiceError('invalid_request', 'request body too large', { details: { reason: 'body_too_large', limit_bytes: limitBytes } });
}
