/**
 * Token buckets: the gateway's per-client-IP budget (first gate, 429) and the
 * per-credential requests-per-minute ceiling (after authorization).
 *
 * Every response carries X-RateLimit-Limit / -Remaining / -Reset and the IETF
 * `RateLimit` / `RateLimit-Policy` fields (draft-ietf-httpapi-ratelimit-headers).
 */
import type { MiddlewareHandler } from 'hono';
import { ServiceError } from '../../core/errors.ts';
import type { AppEnv, Clock } from '../context.ts';
import { clientIp } from './client-ip.ts';

interface Bucket { tokens: number; at: number }

export interface TakeResult {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the bucket is full again. */
  resetSeconds: number;
  /** Seconds until one token is available (for Retry-After), 0 when allowed. */
  retryAfterSeconds: number;
}

/** A set of token buckets with one capacity and refill rate. */
export class TokenBuckets {
  readonly #buckets = new Map<string, Bucket>();
  readonly capacity: number;
  readonly refillPerMs: number;
  readonly #clock: Clock;

  constructor(capacity: number, refillPerSecond: number, clock: Clock) {
    if (!(capacity > 0) || !(refillPerSecond > 0)) throw new TypeError('capacity and refill must be positive');
    this.capacity = capacity;
    this.refillPerMs = refillPerSecond / 1000;
    this.#clock = clock;
  }

  take(key: string): TakeResult {
    const now = this.#clock.now();
    let b = this.#buckets.get(key);
    if (!b) {
      if (this.#buckets.size >= 100_000) this.#sweep(now);
      b = { tokens: this.capacity, at: now };
      this.#buckets.set(key, b);
    } else {
      b.tokens = Math.min(this.capacity, b.tokens + (now - b.at) * this.refillPerMs);
      b.at = now;
    }
    const allowed = b.tokens >= 1;
    if (allowed) b.tokens -= 1;
    const missing = this.capacity - b.tokens;
    return {
      allowed,
      limit: this.capacity,
      remaining: Math.floor(b.tokens),
      resetSeconds: Math.ceil(missing / this.refillPerMs / 1000),
      retryAfterSeconds: allowed ? 0 : Math.max(1, Math.ceil((1 - b.tokens) / this.refillPerMs / 1000)),
    };
  }

  /** Forgets buckets that have refilled completely: they hold no information. */
  #sweep(now: number): void {
    for (const [k, b] of this.#buckets) {
      if (b.tokens + (now - b.at) * this.refillPerMs >= this.capacity) this.#buckets.delete(k);
    }
  }
}

export function rateLimitHeaders(r: TakeResult, policy: string, windowSeconds: number): Record<string, string> {
  return {
    'X-RateLimit-Limit': String(r.limit),
    'X-RateLimit-Remaining': String(r.remaining),
    'X-RateLimit-Reset': String(r.resetSeconds),
    'RateLimit-Policy': `"${policy}";q=${r.limit};w=${windowSeconds}`,
    RateLimit: `"${policy}";r=${r.remaining};t=${r.resetSeconds}`,
  };
}

export function rateLimited(r: TakeResult, what: string, headers: Record<string, string>): ServiceError {
  return new ServiceError('rate_limited', `too many requests: ${what}`, {
    retryable: true,
    details: { retry_after_seconds: r.retryAfterSeconds },
    headers: { ...headers, 'Retry-After': String(r.retryAfterSeconds) },
  });
}

/** The gateway's first gate: per-client-IP bucket; headers on every response. */
export function gatewayRateLimit(opts: {
  capacity: number; refillPerSecond: number; clock: Clock; trustedProxies: readonly string[];
}): MiddlewareHandler<AppEnv> {
  const buckets = new TokenBuckets(opts.capacity, opts.refillPerSecond, opts.clock);
  const windowSeconds = Math.ceil(opts.capacity / opts.refillPerSecond);
  return async function gatewayRateLimit(c, next) {
    const ip = clientIp(c, opts.trustedProxies) ?? 'unknown';
    const r = buckets.take(ip);
    const headers = rateLimitHeaders(r, 'gateway', windowSeconds);
    if (!r.allowed) throw rateLimited(r, 'gateway budget for this client', headers);
    await next();
    for (const [k, v] of Object.entries(headers)) if (!c.res.headers.has(k)) c.res.headers.set(k, v);
  };
}
