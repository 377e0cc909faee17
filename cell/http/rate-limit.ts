/**
 * The gateway's first gate: a per-client-IP token bucket (429), with the
 * rate-limit headers on every response. The arithmetic is core's
 * (core/ratelimit.ts), shared with the edge's gateway.
 */
import type { MiddlewareHandler } from 'hono';
import { rateGate } from '../../runtime/gateway.ts';
import type { AppEnv, Clock } from '../context.ts';
import { clientIp } from './client-ip.ts';

/** The gateway's first gate: per-client-IP bucket; headers on every response. */
export function gatewayRateLimit(opts: {
  capacity: number;
  refillPerSecond: number;
  clock: Clock;
  trustedProxies: readonly string[];
}): MiddlewareHandler<AppEnv> {
  return rateGate<AppEnv>({
    capacity: opts.capacity,
    refillPerSecond: opts.refillPerSecond,
    clock: opts.clock,
    clientIp: (c) => clientIp(c, opts.trustedProxies),
  });
}
