/**
 * The caller's IP: the socket's remote address. X-Forwarded-For is read only
 * when the socket peer is a configured trusted proxy, and then only its last
 * hop (the address the proxy itself saw).
 */
import type { Context } from 'hono';
import type { AppEnv } from '../context.ts';

/** Strips the IPv4-mapped IPv6 prefix so `::ffff:1.2.3.4` compares as `1.2.3.4`. */
export function normalizeIp(ip: string): string {
  return ip.startsWith('::ffff:') && ip.includes('.') ? ip.slice(7) : ip;
}

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
