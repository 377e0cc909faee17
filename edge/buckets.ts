/**
 * Token buckets for the edge gateway: per client IP (first gate) and per key
 * requests-per-minute. Same arithmetic and headers as the cell's gateway.
 */
import { ServiceError } from '../core/errors.ts';
import type { EdgeClock } from './clock.ts';

interface Bucket { tokens: number; at: number }

export interface TakeResult { allowed: boolean; limit: number; remaining: number; resetSeconds: number; retryAfterSeconds: number }

export class TokenBuckets {
  readonly #b = new Map<string, Bucket>();
  readonly #perMs: number;
  constructor(readonly capacity: number, refillPerSecond: number, private readonly clock: EdgeClock) {
    if (!(capacity > 0) || !(refillPerSecond > 0)) throw new TypeError('capacity and refill must be positive');
    this.#perMs = refillPerSecond / 1000;
  }

  take(key: string): TakeResult {
    const now = this.clock.now();
    let b = this.#b.get(key);
    if (!b) {
      if (this.#b.size >= 100_000) this.#b.clear();
      b = { tokens: this.capacity, at: now };
      this.#b.set(key, b);
    } else {
      b.tokens = Math.min(this.capacity, b.tokens + Math.max(0, now - b.at) * this.#perMs);
      b.at = now;
    }
    const allowed = b.tokens >= 1;
    if (allowed) b.tokens -= 1;
    return {
      allowed, limit: this.capacity, remaining: Math.floor(b.tokens),
      resetSeconds: Math.ceil((this.capacity - b.tokens) / this.#perMs / 1000),
      retryAfterSeconds: allowed ? 0 : Math.max(1, Math.ceil((1 - b.tokens) / this.#perMs / 1000)),
    };
  }
}

export function rateHeaders(r: TakeResult, policy: string, windowSeconds: number): Record<string, string> {
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
