/**
 * The offline HTTP gateway: the same gates as the cell, from the same code
 * (runtime/gateway.ts), in the same order:
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
import { ServiceError, isServiceError } from '../core/errors.ts';
import { isoTimeOrNull } from '../core/iso-time.ts';
import { VerifiedTokenCache } from '../core/tokens/cache.ts';
import { DPOP_ALGS, DpopKeyCache } from '../core/tokens/dpop.ts';
import { MemoryReplayCache, type ReplayCache } from '../core/tokens/replay.ts';
import { dpopHeaderOf } from '../core/tokens/request.ts';
import { checkClock, type DeviceState } from '../bundles/accept.ts';
import { edgeAudience, tokenJudgeFromBundle } from '../bundles/token-trust.ts';
import { verifiedLeafThumbprint } from '../runtime/peer-certificate.ts';
import { nodeProofSignatures } from '../runtime/proof-signature.ts';
import { authenticateCredential, type EdgeAuth, type LoadedKeys } from './decide.ts';
import { jsonBodyGate } from '../runtime/json-body.ts';
import {
  CredentialLimits,
  authChallenge,
  authGate,
  bodyLimitGate,
  envelopeErrors,
  malformedRequest,
  normalizeIp,
  notFoundAnswer,
  permissionGate,
  rateGate,
  requestContext,
} from '../runtime/gateway.ts';
import type { EdgeClock } from './clock.ts';
import { accessLog } from './access-log.ts';
import { createLogger, type Logger } from '../runtime/log.ts';

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
  /** The operator log (edge/main.ts: `--log-level`, `--log-format`); absent: warn and error lines on stderr, no access log. */
  log?: Logger;
}

let fallbackLog: Logger | undefined;
/** The log of an edge app built without one (in-process tests): warnings and errors only. */
export function edgeLog(rt: EdgeRuntime): Logger {
  if (rt.log) return rt.log;
  fallbackLog ??= createLogger({ level: 'warn', format: 'json' });
  return fallbackLog;
}

export type EdgeEnv = {
  Bindings: {
    incoming?: {
      socket?: { remoteAddress?: string; encrypted?: boolean } & Record<string, unknown>;
      headers?: Record<string, string | string[] | undefined>;
    };
  };
  Variables: { auth: EdgeAuth; requestId: string };
};

/** Largest request body the edge accepts (as the cell: 1 MiB). */
export const BODY_LIMIT_BYTES = 1024 * 1024;
/** The deepest nesting of arrays and objects a request body may have (the cell's default `jsonMaxDepth`). */
export const JSON_MAX_DEPTH = 64;

export const PROTECTED_RESOURCE_METADATA = '/.well-known/oauth-protected-resource';

export function clientIp(c: Context<EdgeEnv>): string | null {
  const raw = c.env?.incoming?.socket?.remoteAddress;
  if (!raw) return null;
  return normalizeIp(raw);
}

/**
 * The request's own URI, for the DPoP proof's `htu`: the scheme of this
 * connection (https when the edge terminates TLS), the authority from the
 * Host header, and the route being served. Never the client's request target
 * in absolute form (`GET https://elsewhere/... HTTP/1.1`), which the HTTP
 * server turns into the request URL as sent, and never X-Forwarded-*. A Host
 * that is not a plain host[:port] is refused (400). Requests that did not
 * arrive on a connection (in-process `app.request`, tests) have no Host: their
 * URL is the one the caller built.
 */
export function ownRequestUri(c: Context<EdgeEnv>): string {
  const url = new URL(c.req.url);
  const incoming = c.env?.incoming;
  if (!incoming?.headers) return url.href;
  const host = incoming.headers['host'];
  const scheme = incoming.socket?.encrypted === true ? 'https' : 'http';
  const own = typeof host === 'string' && HOST.test(host) ? URL.parse(`${scheme}://${host}${url.pathname}${url.search}`) : null;
  if (!own)
    throw new ServiceError('invalid_request', 'the Host header is missing or is not host[:port]', { details: { reason: 'bad_host' } });
  return own.href;
}

/** The URL of this device's protected resource metadata as the request reached it; null when its Host is unusable. */
function edgeResourceMetadata(c: Context<EdgeEnv>): string | null {
  try {
    return new URL(PROTECTED_RESOURCE_METADATA, ownRequestUri(c)).href;
  } catch {
    return null; // a bad Host is its own 400; the challenge then names no metadata
  }
}

/** A Host header value: a DNS name or IPv4 address, or a bracketed IPv6 address, and an optional port. */
const HOST = /^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$/;

export function createEdgeApp(
  rt: EdgeRuntime,
  mount?: (app: Hono<EdgeEnv>, guard: (permission: string | null) => MiddlewareHandler<EdgeEnv>) => void,
): Hono<EdgeEnv> {
  const app = new Hono<EdgeEnv>();
  const limits = new CredentialLimits(rt.clock);
  const tokens = rt.keys
    ? tokenJudgeFromBundle(rt.keys.index, {
        audience: edgeAudience(rt.deviceId),
        replay: rt.replay ?? new MemoryReplayCache(),
        cache: new VerifiedTokenCache(),
        dpopKeys: new DpopKeyCache({ native: nodeProofSignatures }),
      })
    : null;

  const log = edgeLog(rt);
  // Outermost: the line names the answer the client got, errors included.
  app.use('*', accessLog(log));
  app.use('*', requestContext<EdgeEnv>());
  app.use('*', rateGate<EdgeEnv>({ capacity: rt.rate.capacity, refillPerSecond: rt.rate.refillPerSecond, clock: rt.clock, clientIp }));
  app.use('*', bodyLimitGate<EdgeEnv>(BODY_LIMIT_BYTES));

  // RFC 9728: who this resource is, which authorization server issues its tokens, which bindings it honours.
  app.get(PROTECTED_RESOURCE_METADATA, (c) =>
    c.json(
      {
        resource: edgeAudience(rt.deviceId),
        // The issuing cell's own issuer (its `--oauth-issuer` URL when it has one): where a client finds the metadata.
        authorization_servers: tokens && rt.keys?.index.tokens ? [rt.keys.index.tokens.issuer] : [],
        bearer_methods_supported: ['header'],
        dpop_signing_alg_values_supported: [...DPOP_ALGS],
        dpop_bound_access_tokens_required: false,
        tls_client_certificate_bound_access_tokens: rt.clientCa === true,
        resource_name: `agent-cell edge ${rt.deviceId}`,
      },
      200,
      { 'Cache-Control': 'max-age=300' },
    ),
  );

  const clockCheck: MiddlewareHandler<EdgeEnv> = async function clockCheck(_c, next) {
    const now = rt.clock.now();
    // Clock doubt fails closed: earlier than the last time this device trusted.
    checkClock(rt.state, now);
    if (now > rt.state.clock_high_water) rt.state = { ...rt.state, clock_high_water: now };
    await next();
  };
  // The API and the MCP endpoint (edge/mcp.ts) are protected alike.
  for (const path of ['/api/public/v1/*', '/mcp']) app.use(path, clockCheck);
  const authenticate = authGate<EdgeAuth, EdgeEnv>((cred, c) => {
    // The request's own URI: scheme of this connection, its Host, the route (never an absolute-form target).
    const uri = ownRequestUri(c);
    return authenticateCredential(
      rt.keys,
      tokens,
      cred,
      { now: rt.clock.now(), ip: clientIp(c), region: rt.region },
      {
        method: c.req.method,
        uri,
        dpop: dpopHeaderOf(c.req.raw.headers),
        certThumbprint: () => verifiedLeafThumbprint(c.env?.incoming?.socket),
      },
      () => ({ realm: 'edge', resourceMetadata: new URL(PROTECTED_RESOURCE_METADATA, uri).href }),
    );
  });
  const bodyGate = jsonBodyGate<EdgeEnv>(JSON_MAX_DEPTH);
  for (const path of ['/api/public/v1/*', '/mcp']) {
    app.use(path, authenticate);
    // After authentication, as on the cell: a body nested too deep or with a key twice is 400 before any handler parses it.
    app.use(path, bodyGate);
  }

  const guard = (permission: string | null) =>
    permissionGate<EdgeAuth, EdgeEnv>(
      permission,
      () => limits,
      (a) => a.rate_limit_rpm,
    );

  app.get('/api/public/v1/edge/status', guard('edge.read'), (c) =>
    c.json({
      device_id: rt.deviceId,
      cell_id: rt.cellId,
      region: rt.region,
      key_bundle: rt.keys
        ? { version: rt.keys.version, hash: rt.keys.hash, keys: rt.keys.index.size, expires_at: isoTimeOrNull(rt.keys.expires_at) }
        : null,
      tokens:
        tokens && rt.keys?.index.tokens
          ? {
              issuer: rt.keys.index.tokens.issuer,
              audience: tokens.audience,
              signing_keys: rt.keys.index.tokens.keys.length,
              revoked: rt.keys.index.tokens.revoked.length,
              clients: rt.keys.index.tokens.clients?.length ?? null,
            }
          : null,
      ...rt.info,
    }),
  );

  // The generic offline check: 200 when the presented key may do `permission` here, else the refusal.
  app.get(
    '/api/public/v1/edge/authz/:permission',
    async (c, next) => guard(c.req.param('permission'))(c, next),
    (c) => {
      const auth = c.get('auth');
      return c.json({
        allowed: true,
        permission: c.req.param('permission'),
        credential: auth.credential,
        key_id: auth.key_id,
        owner_id: auth.owner_id,
        effective: auth.effective,
        matched: auth.matched,
      });
    },
  );

  mount?.(app, guard);

  app.notFound(notFoundAnswer);
  app.onError(
    envelopeErrors<EdgeEnv>({
      toServiceError: (err) => (!isServiceError(err) && (err as { status?: number }).status === 400 ? malformedRequest() : err),
      logCause: (id, err, c) =>
        log.error('request failed', {
          correlation_id: id,
          method: c.req.method,
          path: c.req.path,
          error: err,
        }),
      // As the cell: a 401 names the device's protected resource metadata (RFC 9728 §5.1).
      challenge: (c) => {
        const own = URL.parse(c.req.url) ? edgeResourceMetadata(c) : null;
        return authChallenge('edge', own ?? undefined);
      },
    }),
  );
  return app;
}
