/**
 * Token buckets and the rate-limit answer, shared by the cell's gateway and
 * the edge's so both throttle, and say so, identically: the per-client-IP
 * budget (first gate) and per-credential requests-per-minute ceilings.
 *
 * Headers: X-RateLimit-Limit / -Remaining / -Reset and the IETF `RateLimit`
 * and `RateLimit-Policy` fields (draft-ietf-httpapi-ratelimit-headers).
 */
import { ServiceError } from './errors.ts';

export interface RateClock {
  /** Milliseconds since the epoch. */
  now(): number;
}

/** A token bucket's state: whole and fractional tokens left, as of `at` (ms). */
export interface Bucket {
  tokens: number;
  at: number;
}

export interface TakeResult {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the bucket is full again. */
  resetSeconds: number;
  /** Seconds until one token is available (for Retry-After), 0 when allowed. */
  retryAfterSeconds: number;
}

/**
 * One take from a bucket (undefined: a full one) of `capacity` refilled at
 * `refillPerMs`: the bucket after it and the answer. The one rule every
 * limiter applies, whether it keeps its buckets in memory (TokenBuckets) or
 * in a store shared by a group of cells (runtime/gateway.ts SharedBuckets).
 */
export function takeToken(
  b: Bucket | undefined,
  capacity: number,
  refillPerMs: number,
  now: number,
): { bucket: Bucket; result: TakeResult } {
  // A clock stepping back refills nothing, and the bucket's time never moves back
  // (else the step back would be refilled twice once the clock recovers).
  let tokens = b ? Math.min(capacity, b.tokens + Math.max(0, now - b.at) * refillPerMs) : capacity;
  const at = b ? Math.max(b.at, now) : now;
  const allowed = tokens >= 1;
  if (allowed) tokens -= 1;
  return {
    bucket: { tokens, at },
    result: {
      allowed,
      limit: capacity,
      remaining: Math.floor(tokens),
      resetSeconds: Math.ceil((capacity - tokens) / refillPerMs / 1000),
      retryAfterSeconds: allowed ? 0 : Math.max(1, Math.ceil((1 - tokens) / refillPerMs / 1000)),
    },
  };
}

/** Most buckets kept before full ones (which carry no information) are forgotten. */
const MAX_BUCKETS = 100_000;

/** A set of token buckets with one capacity and refill rate. */
export class TokenBuckets {
  readonly #buckets = new Map<string, Bucket>();
  readonly capacity: number;
  readonly refillPerMs: number;
  readonly #clock: RateClock;

  constructor(capacity: number, refillPerSecond: number, clock: RateClock) {
    if (!(capacity > 0) || !(refillPerSecond > 0)) throw new TypeError('capacity and refill must be positive');
    this.capacity = capacity;
    this.refillPerMs = refillPerSecond / 1000;
    this.#clock = clock;
  }

  take(key: string): TakeResult {
    const now = this.#clock.now();
    const b = this.#buckets.get(key);
    if (!b && this.#buckets.size >= MAX_BUCKETS) this.#sweep(now);
    const { bucket, result } = takeToken(b, this.capacity, this.refillPerMs, now);
    this.#buckets.set(key, bucket);
    return result;
  }

  /** Forgets buckets that have refilled completely; if none has, forgets all. */
  #sweep(now: number): void {
    for (const [k, b] of this.#buckets) {
      if (b.tokens + Math.max(0, now - b.at) * this.refillPerMs >= this.capacity) this.#buckets.delete(k);
    }
    if (this.#buckets.size >= MAX_BUCKETS) this.#buckets.clear();
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

/** The 429 refusal: retryable, with Retry-After and the rate-limit headers. */
export function rateLimited(r: TakeResult, what: string, headers: Record<string, string>): ServiceError {
  return new ServiceError('rate_limited', `too many requests: ${what}`, {
    retryable: true,
    details: { retry_after_seconds: r.retryAfterSeconds },
    headers: { ...headers, 'Retry-After': String(r.retryAfterSeconds) },
  });
}
