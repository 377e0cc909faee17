/**
 * The offline HTTP gateway. Same gates, in the same order, as the cell:
 * per-client-IP rate budget (429) -> authentication from the key bundle (401,
 * or 403 for IP/region rules) -> authorization (403) -> per-key rpm (429),
 * and the spec's error envelope for every error. Client IP is the socket
 * address; X-Forwarded-* headers are never read.
 */
import { Hono, type Context, type MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { ServiceError, isServiceError, toEnvelope, unauthorized } from '../core/errors.ts';
import { checkClock, type DeviceState } from '../bundles/accept.ts';
import { authenticateOffline, authorizeOffline, type EdgeAuth, type LoadedKeys } from './decide.ts';
import { TokenBuckets, rateLimitHeaders as rateHeaders, rateLimited } from '../core/ratelimit.ts';
import type { EdgeClock } from './clock.ts';

export interface EdgeRuntime {
  deviceId: string;
  cellId: string;
  region: string;
  clock: EdgeClock;
  keys: LoadedKeys | null;
  /** Current device state; `noteTime` moves its clock high-water mark. */
  state: DeviceState;
  rate: { capacity: number; refillPerSecond: number };
  info: Record<string, unknown>;
}

export type EdgeEnv = {
  Bindings: { incoming?: { socket?: { remoteAddress?: string } } };
  Variables: { auth: EdgeAuth; requestId: string };
};

/** Largest request body the edge accepts (as the cell: 1 MiB). */
export const BODY_LIMIT_BYTES = 1024 * 1024;

const AUTH_HEADER = /^Bearer +([A-Za-z0-9\-._~+/]+=*)$/i;

export function clientIp(c: Context<EdgeEnv>): string | null {
  const raw = c.env?.incoming?.socket?.remoteAddress;
  if (!raw) return null;
  return raw.startsWith('::ffff:') && raw.includes('.') ? raw.slice(7) : raw;
}

/** Authorization gate for one permission, then the key's own rpm ceiling. */
export function requires(rt: EdgeRuntime, permission: string, keyBuckets: Map<number, TokenBuckets>): MiddlewareHandler<EdgeEnv> {
  return async function requiresPermission(c, next) {
    const auth = c.get('auth');
    authorizeOffline(auth, permission);
    const rpm = auth.rate_limit_rpm;
    if (rpm !== null && rpm > 0) {
      let b = keyBuckets.get(rpm);
      if (!b) { b = new TokenBuckets(rpm, rpm / 60, rt.clock); keyBuckets.set(rpm, b); }
      const r = b.take(auth.key_id);
      if (!r.allowed) throw rateLimited(r, 'requests-per-minute ceiling of this credential', rateHeaders(r, 'credential', 60));
    }
    await next();
  };
}

export function createEdgeApp(rt: EdgeRuntime, mount?: (app: Hono<EdgeEnv>, guard: (permission: string) => MiddlewareHandler<EdgeEnv>) => void): Hono<EdgeEnv> {
  const app = new Hono<EdgeEnv>();
  const ipBuckets = new TokenBuckets(rt.rate.capacity, rt.rate.refillPerSecond, rt.clock);
  const windowSeconds = Math.ceil(rt.rate.capacity / rt.rate.refillPerSecond);
  const keyBuckets = new Map<number, TokenBuckets>();

  app.use('*', async function requestContext(c, next) {
    c.set('requestId', crypto.randomUUID());
    await next();
    c.res.headers.set('X-Request-Id', c.get('requestId'));
  });

  app.use('*', async function gatewayRateLimit(c, next) {
    const r = ipBuckets.take(clientIp(c) ?? 'unknown');
    const headers = rateHeaders(r, 'gateway', windowSeconds);
    if (!r.allowed) throw rateLimited(r, 'gateway budget for this client', headers);
    await next();
    for (const [k, v] of Object.entries(headers)) if (!c.res.headers.has(k)) c.res.headers.set(k, v);
  });

  app.use('*', bodyLimit({
    maxSize: BODY_LIMIT_BYTES,
    onError: () => { throw new ServiceError('invalid_request', 'request body too large', { details: { reason: 'body_too_large', limit_bytes: BODY_LIMIT_BYTES } }); },
  }));

  app.use('/api/public/v1/*', async function authenticate(c, next) {
    const now = rt.clock.now();
    // Clock doubt fails closed: earlier than the last time this device trusted.
    checkClock(rt.state, now);
    if (now > rt.state.clock_high_water) rt.state = { ...rt.state, clock_high_water: now };
    const header = c.req.header('authorization');
    if (!header) throw unauthorized('missing bearer credential');
    const m = AUTH_HEADER.exec(header.trim());
    if (!m) throw unauthorized('malformed Authorization header');
    c.set('auth', authenticateOffline(rt.keys, m[1]!, { now, ip: clientIp(c), region: rt.region }));
    await next();
  });

  const guard = (permission: string) => requires(rt, permission, keyBuckets);

  app.get('/api/public/v1/edge/status', guard('edge.read'), (c) => c.json({
    device_id: rt.deviceId, cell_id: rt.cellId, region: rt.region,
    key_bundle: rt.keys ? { version: rt.keys.version, hash: rt.keys.hash, keys: rt.keys.index.size, expires_at: rt.keys.expires_at } : null,
    ...rt.info,
  }));

  // The generic offline check: 200 when the presented key may do `permission` here, else the refusal.
  app.get('/api/public/v1/edge/authz/:permission', async (c, next) => guard(c.req.param('permission'))(c, next), (c) => {
    const auth = c.get('auth');
    return c.json({ allowed: true, permission: c.req.param('permission'), key_id: auth.key_id, owner_id: auth.owner_id, effective: auth.effective, matched: auth.matched });
  });

  mount?.(app, guard);

  app.notFound((c) => c.json({ error: 'not_found', message: 'no such resource' }, 404));
  app.onError((err, c) => {
    const id = c.get('requestId') ?? crypto.randomUUID();
    let e: unknown = err;
    if (!isServiceError(err) && (err as { status?: number }).status === 400) e = new ServiceError('invalid_request', 'malformed request body', { details: { reason: 'malformed_body' } });
    const { status, body } = toEnvelope(e, id);
    if (status >= 500) console.error(`[${id}]`, err instanceof Error ? (err.stack ?? err.message) : String(err));
    const headers: Record<string, string> = {};
    if (isServiceError(e) && e.headers) Object.assign(headers, e.headers);
    if (status === 401) headers['WWW-Authenticate'] = 'Bearer realm="edge"';
    return c.json(body, status, headers);
  });
  return app;
}
