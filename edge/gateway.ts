/**
 * The offline HTTP gateway. Same gates, in the same order, as the cell:
 * per-client-IP rate budget (429) -> authentication from the key bundle (401,
 * or 403 for IP/region rules): an API key, or an OAuth access token / SAT
 * addressed to this device (`aud` = `edge:<device_id>`) judged by core's
 * token judge -> authorization (403) -> per-credential rpm (429), and the
 * spec's error envelope for every error. Client IP is the socket address;
 * X-Forwarded-* headers are never read. The DPoP proof's expected URI is the
 * request's own: the connection's scheme (https when the edge terminates
 * TLS), its Host and its route, so a TLS-terminating or path-rewriting proxy
 * in front of the edge makes proofs fail (`dpop_htu_mismatch`).
 * `GET /.well-known/oauth-protected-resource` is the RFC 9728 metadata.
 */
import { Hono, type Context, type MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { ServiceError, isServiceError, toEnvelope, unauthorized } from '../core/errors.ts';
import { VerifiedTokenCache } from '../core/tokens/cache.ts';
import { DPOP_ALGS } from '../core/tokens/dpop.ts';
import { MemoryReplayCache, type ReplayCache } from '../core/tokens/replay.ts';
import { dpopHeaderOf, parseAuthorization } from '../core/tokens/request.ts';
import { checkClock, type DeviceState } from '../bundles/accept.ts';
import { edgeAudience, tokenJudgeFromBundle } from '../bundles/token-trust.ts';
import { verifiedLeafThumbprint } from '../runtime/peer-certificate.ts';
import { authenticateCredential, authorizeOffline, type EdgeAuth, type LoadedKeys } from './decide.ts';
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
  /** The DPoP replay cache: durable on a device (edge/replay-log.ts); in memory when absent. */
  replay?: ReplayCache;
  /** True when the edge terminates TLS with a client CA, so certificate-bound tokens can be honoured. */
  clientCa?: boolean;
}

export type EdgeEnv = {
  Bindings: { incoming?: { socket?: { remoteAddress?: string } & Record<string, unknown> } };
  Variables: { auth: EdgeAuth; requestId: string };
};

/** Largest request body the edge accepts (as the cell: 1 MiB). */
export const BODY_LIMIT_BYTES = 1024 * 1024;

export const PROTECTED_RESOURCE_METADATA = '/.well-known/oauth-protected-resource';

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
      // One bucket per root credential: a token obtained with a key spends the key's budget, as on the cell.
      const r = b.take(auth.credential.root);
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
  const tokens = rt.keys ? tokenJudgeFromBundle(rt.keys.index, {
    audience: edgeAudience(rt.deviceId), replay: rt.replay ?? new MemoryReplayCache(), cache: new VerifiedTokenCache(),
  }) : null;

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

  // RFC 9728: who this resource is, which authorization server issues its tokens, which bindings it honours.
  app.get(PROTECTED_RESOURCE_METADATA, (c) => c.json({
    resource: edgeAudience(rt.deviceId),
    authorization_servers: tokens ? [tokens.issuer] : [],
    bearer_methods_supported: ['header'],
    dpop_signing_alg_values_supported: [...DPOP_ALGS],
    dpop_bound_access_tokens_required: false,
    tls_client_certificate_bound_access_tokens: rt.clientCa === true,
    resource_name: `agent-cell edge ${rt.deviceId}`,
  }, 200, { 'Cache-Control': 'max-age=300' }));

  app.use('/api/public/v1/*', async function authenticate(c, next) {
    const now = rt.clock.now();
    // Clock doubt fails closed: earlier than the last time this device trusted.
    checkClock(rt.state, now);
    if (now > rt.state.clock_high_water) rt.state = { ...rt.state, clock_high_water: now };
    const header = c.req.header('authorization');
    if (!header) throw unauthorized('missing bearer credential');
    const cred = parseAuthorization(header);
    if (!cred) throw unauthorized('malformed Authorization header');
    // The request's own URI: scheme of this connection, its Host (validated by the server), the route.
    const uri = c.req.url;
    c.set('auth', await authenticateCredential(rt.keys, tokens, cred, { now, ip: clientIp(c), region: rt.region }, {
      method: c.req.method, uri, dpop: dpopHeaderOf(c.req.raw.headers),
      certThumbprint: () => verifiedLeafThumbprint(c.env?.incoming?.socket),
    }, () => ({ realm: 'edge', resourceMetadata: new URL(PROTECTED_RESOURCE_METADATA, uri).href })));
    await next();
  });

  const guard = (permission: string) => requires(rt, permission, keyBuckets);

  app.get('/api/public/v1/edge/status', guard('edge.read'), (c) => c.json({
    device_id: rt.deviceId, cell_id: rt.cellId, region: rt.region,
    key_bundle: rt.keys ? { version: rt.keys.version, hash: rt.keys.hash, keys: rt.keys.index.size, expires_at: rt.keys.expires_at } : null,
    tokens: tokens && rt.keys?.index.tokens
      ? { issuer: tokens.issuer, audience: tokens.audience, signing_keys: rt.keys.index.tokens.keys.length, revoked: rt.keys.index.tokens.revoked.length }
      : null,
    ...rt.info,
  }));

  // The generic offline check: 200 when the presented key may do `permission` here, else the refusal.
  app.get('/api/public/v1/edge/authz/:permission', async (c, next) => guard(c.req.param('permission'))(c, next), (c) => {
    const auth = c.get('auth');
    return c.json({
      allowed: true, permission: c.req.param('permission'), credential: auth.credential, key_id: auth.key_id,
      owner_id: auth.owner_id, effective: auth.effective, matched: auth.matched,
    });
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
    if (status === 401 && !headers['WWW-Authenticate']) headers['WWW-Authenticate'] = `Bearer realm="edge", DPoP algs="${DPOP_ALGS.join(' ')}"`;
    return c.json(body, status, headers);
  });
  return app;
}
