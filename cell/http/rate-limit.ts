/**
 * The gateway's first gate: a per-client-IP token bucket (429), with the
 * rate-limit headers on every response. The arithmetic is core's
 * (core/ratelimit.ts), shared with the edge's gateway.
 */
import type { MiddlewareHandler } from 'hono';
import { TokenBuckets, rateLimitHeaders, rateLimited } from '../../core/ratelimit.ts';
import type { AppEnv, Clock } from '../context.ts';
import { clientIp } from './client-ip.ts';

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
