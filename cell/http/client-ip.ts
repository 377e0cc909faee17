/**
 * The caller's IP: the socket's remote address. X-Forwarded-For is read only
 * when the socket peer is a configured trusted proxy, and then only its last
 * hop (the address the proxy itself saw).
 */
import type { Context } from 'hono';
import { normalizeIp } from '../../runtime/gateway.ts';
import type { AppEnv } from '../context.ts';

export function clientIp(c: Context<AppEnv>, trustedProxies: readonly string[]): string | null {
  const raw = c.env?.incoming?.socket?.remoteAddress;
  if (!raw) return null;
  const peer = normalizeIp(raw);
  if (trustedProxies.length > 0 && trustedProxies.includes(peer)) {
    const xff = c.req.header('x-forwarded-for');
    const last = xff
      ?.split(',')
      .map((s) => s.trim())
      .filter(Boolean)
      .pop();
    if (last) return normalizeIp(last);
  }
  return peer;
}
