/**
 * The gateway both programs put in front of every request, one implementation
 * of each gate, in the spec's order:
 *
 *   1. the rate budget per client IP (429, `Retry-After`); the IETF and
 *      X-RateLimit headers go on every response, errors included;
 *   2. authentication (401): the `Authorization` header read once
 *      (core/tokens/request.ts) and handed to the host's authenticator;
 *   3. authorization (403): the operation's permission in the credential's
 *      effective authority;
 *   4. the credential's own requests-per-minute ceiling (429), counted
 *      against its root credential (a token derived from a key spends the
 *      key's budget), one limiter (`CredentialLimits`);
 *   5. the error envelope for whatever any gate or handler throws.
 *
 * The cell (cell/app.ts, cell/http/) and the edge (edge/gateway.ts) build
 * their apps from these; what differs (which credentials they accept, the
 * edge's clock check, the cell's public discovery paths) is the host's.
 */
import { ServerResponse, type IncomingMessage, type OutgoingHttpHeader, type OutgoingHttpHeaders } from 'node:http';
import type { Context, Env, ErrorHandler, MiddlewareHandler, NotFoundHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { ServiceError, isServiceError, toEnvelope, unauthorized, forbidden } from '../core/errors.ts';
import { grants } from '../core/authority/scopes.ts';
import { TokenBuckets, rateLimitHeaders, rateLimited, type RateClock, type TakeResult } from '../core/ratelimit.ts';
import { parseAuthorization } from '../core/tokens/request.ts';
import { DPOP_ALGS } from '../core/tokens/dpop.ts';

/** What the gates need of an authenticated request's authority. */
export interface GatewayAuth {
  /** The permission selectors this request may exercise. */
  effective: readonly string[];
  credential: {
    /** The credential everything derives from; the rpm bucket is its. */
    root: string;
  };
}

/** The variables the gates set on a request. */
export type GatewayEnv<A extends GatewayAuth> = Env & { Variables: { auth: A; requestId: string } };

/**
 * Where hosts that serve one service together keep the buckets they share
 * (the cell's store, for a group of cells): one take, atomic for the whole
 * group, applying core's `takeToken` to the stored bucket.
 */
export interface SharedBuckets {
  take(key: string, capacity: number, refillPerMs: number, now: number): Promise<TakeResult>;
}

/**
 * Requests-per-minute buckets: one per root credential (or other budget
 * holder, such as a published endpoint), sized by its rpm. In memory, or in
 * `shared` buckets when the host serves with others (a group of cells: the
 * ceiling holds for the group, not for each cell). One limiter either way:
 * the bucket rule is core's `takeToken`.
 */
export class CredentialLimits {
  readonly #byRpm = new Map<number, TokenBuckets>();
  constructor(
    private readonly clock: RateClock,
    private readonly shared?: SharedBuckets,
  ) {}

  /** Takes one request from `root`'s bucket of `rpm` per minute. */
  take(root: string, rpm: number): TakeResult | Promise<TakeResult> {
    // Buckets are per rpm, as in memory: a ceiling changed starts a fresh bucket.
    if (this.shared) return this.shared.take(`${rpm}:${root}`, rpm, rpm / 60_000, this.clock.now());
    let b = this.#byRpm.get(rpm);
    if (!b) {
      b = new TokenBuckets(rpm, rpm / 60, this.clock);
      this.#byRpm.set(rpm, b);
    }
    return b.take(root);
  }
}

/**
 * A well-formed `X-Request-Id`: 1 to 128 letters, digits and `._:=+/-`, starting with a letter or digit (UUIDs,
 * ULIDs, hex and base64 ids of proxies and tracers pass; spaces, quotes, commas and control characters do not, so an
 * adopted id is safe in a log line and a header as it is).
 */
const REQUEST_ID = /^[A-Za-z0-9][A-Za-z0-9._:=+/-]{0,127}$/;

/**
 * The request's id: the caller's `X-Request-Id` when it sent one well-formed (a proxy or client that names its
 * requests keeps one id across the hops), else a new UUID. Read from node:http's headers when served (a repeated
 * header arrives joined with ", " and is not well-formed), else from the Request.
 */
export function requestIdOf(c: Context): string {
  const headers = (c.env as NodeBindings | undefined)?.incoming?.headers;
  const v = headers ? headers['x-request-id'] : c.req.header('x-request-id');
  return typeof v === 'string' && REQUEST_ID.test(v) ? v : crypto.randomUUID();
}

/** Gives each request an id (requestIdOf, echoed as X-Request-Id), the correlation id of its errors. */
export function requestContext<E extends GatewayEnv<GatewayAuth>>(): MiddlewareHandler<E> {
  return async function requestContext(c, next) {
    const id = requestIdOf(c);
    c.set('requestId', id);
    await next();
    addHeaders(c, { 'X-Request-Id': id });
  };
}

/** What the gateway uses of node:http's request and response when the host serves through @hono/node-server. */
interface NodeBindings {
  incoming?: { rawHeaders?: readonly string[]; headers?: Record<string, string | string[] | undefined> };
  outgoing?: { headersSent?: boolean; setHeader?: (name: string, value: string) => unknown };
}

/** Lower-case forms of the gateway's header names, computed once each. */
const LOWER = new Map<string, string>();
const lower = (name: string): string => {
  let l = LOWER.get(name);
  if (l === undefined) {
    l = name.toLowerCase();
    if (LOWER.size < 64) LOWER.set(name, l);
  }
  return l;
};

/**
 * node:http's response class for a server that runs the gateway (pass it as
 * the server's `ServerResponse` option). The gateway's headers are kept until
 * the answer's head is written and then given to `writeHead` together with
 * the answer's own, in one object: setting them one by one beforehand
 * (`setHeader`) made node:http validate and store each, then take the slow
 * path of `writeHead`, which sets every header of the answer one by one too
 * (the largest cost left of `addHeaders`, bench/RESULTS.md stop 24). The
 * head is what that gave: the gateway's headers first, in their order, a
 * header the answer carries itself (any case) winning in their place, then
 * the answer's other headers in its order.
 */
export class GatewayResponse<Request extends IncomingMessage = IncomingMessage> extends ServerResponse<Request> {
  #pending: Record<string, string>[] | undefined;

  /** Headers for the head, when it is written. */
  defer(headers: Record<string, string>): void {
    if (this.#pending) this.#pending.push(headers);
    else this.#pending = [headers];
  }

  // node:http's overloads: (status, headers?) and (status, statusMessage?, headers?).
  override writeHead(statusCode: number, a?: unknown, b?: unknown): this {
    const pending = this.#pending;
    if (pending === undefined) return super.writeHead(statusCode, a as string, b as OutgoingHttpHeaders);
    this.#pending = undefined;
    const message = typeof a === 'string' ? a : undefined;
    const own = (message === undefined ? a : b) as OutgoingHttpHeaders | OutgoingHttpHeader[] | undefined | null;
    if (Array.isArray(own)) {
      // The raw-array form: as before, each header set first and the answer's replacing them in writeHead.
      for (const h of pending) for (const k in h) this.setHeader(k, h[k]!);
      return message === undefined ? super.writeHead(statusCode, own) : super.writeHead(statusCode, message, own);
    }
    let ownByLower: Map<string, string> | undefined;
    for (const k in own) {
      ownByLower ??= new Map();
      ownByLower.set(k.toLowerCase(), k);
    }
    const merged: OutgoingHttpHeaders = {};
    for (const h of pending)
      for (const k in h) {
        const ownKey = ownByLower?.get(lower(k));
        if (ownKey === undefined) merged[k] = h[k];
        else merged[ownKey] = own![ownKey];
      }
    for (const k in own) if (!(k in merged)) merged[k] = own[k];
    return message === undefined ? super.writeHead(statusCode, merged) : super.writeHead(statusCode, message, merged);
  }
}

/**
 * Puts the gateway's headers (rate limits, request id) on the answer; a
 * header the answer carries itself wins. Served by @hono/node-server, they go
 * on node:http's response, where the answer's own headers are merged over
 * them when its head is written (`writeHead`; with `GatewayResponse`, in one
 * object, else with `setHeader` now); this spares building and copying a
 * WHATWG Headers object per request, which the CPU profile found to be the
 * largest cost of the framework's path (bench/RESULTS.md). In process
 * (`app.request`) they go on `c.res`.
 */
export function addHeaders(c: Context, headers: Record<string, string>): void {
  const out = (c.env as NodeBindings | undefined)?.outgoing;
  if (out instanceof GatewayResponse && out.headersSent === false) {
    out.defer(headers);
    return;
  }
  if (out?.setHeader && out.headersSent === false) {
    for (const k in headers) out.setHeader(k, headers[k]!);
    return;
  }
  for (const k in headers) if (!c.res.headers.has(k)) c.res.headers.set(k, headers[k]!);
}

/**
 * The request's Authorization header, read from node:http's parsed headers
 * when there is exactly one (no WHATWG Headers object built for it); when it
 * is repeated, or in process, through the Request as before (repeated values
 * joined, which no scheme parses).
 */
function authorizationHeader(c: Context): string | undefined {
  const incoming = (c.env as NodeBindings | undefined)?.incoming;
  const raw = incoming?.rawHeaders;
  if (raw && incoming.headers) {
    let n = 0;
    for (let i = 0; i < raw.length; i += 2) if (raw[i]!.length === 13 && raw[i]!.toLowerCase() === 'authorization') n++;
    if (n === 0) return undefined;
    const v = incoming.headers['authorization'];
    if (n === 1 && typeof v === 'string') return v;
  }
  return c.req.header('authorization');
}

/** The credential a request presents (`Authorization: Bearer|DPoP <token>`), or null when it presents none that parses. */
export function presentedCredential(c: Context): { scheme: 'bearer' | 'dpop'; token: string } | null {
  const header = authorizationHeader(c);
  return header ? parseAuthorization(header) : null;
}

/**
 * Gate 1 as a step: takes a token from the client IP's bucket and returns
 * the rate-limit headers the answer carries, or throws the 429 (which carries
 * them itself). `rateGate` is this step as a middleware; a host that runs its
 * gates in one middleware (the cell) calls it directly.
 */
export function rateStep<E extends Env>(o: {
  capacity: number;
  refillPerSecond: number;
  clock: RateClock;
  clientIp: (c: Context<E>) => string | null;
}): (c: Context<E>) => Record<string, string> {
  const buckets = new TokenBuckets(o.capacity, o.refillPerSecond, o.clock);
  const windowSeconds = Math.ceil(o.capacity / o.refillPerSecond);
  // What does not change between requests (the limit is the bucket's capacity), written once.
  const limit = String(o.capacity);
  const policy = `"gateway";q=${o.capacity};w=${windowSeconds}`;
  return (c) => {
    const r = buckets.take(o.clientIp(c) ?? 'unknown');
    if (!r.allowed) throw rateLimited(r, 'gateway budget for this client', rateLimitHeaders(r, 'gateway', windowSeconds));
    // rateLimitHeaders' headers, in its order.
    return {
      'X-RateLimit-Limit': limit,
      'X-RateLimit-Remaining': String(r.remaining),
      'X-RateLimit-Reset': String(r.resetSeconds),
      'RateLimit-Policy': policy,
      RateLimit: `"gateway";r=${r.remaining};t=${r.resetSeconds}`,
    };
  };
}

/** Gate 1: the per-client-IP token bucket, with the rate-limit headers on every response. */
export function rateGate<E extends Env>(o: Parameters<typeof rateStep<E>>[0]): MiddlewareHandler<E> {
  const take = rateStep(o);
  return async function rateGate(c, next) {
    const headers = take(c);
    await next();
    addHeaders(c, headers);
  };
}

/**
 * Gate 2 as a step: reads `Authorization: Bearer|DPoP <token>`, asks the
 * host's `authenticate` (which refuses with a ServiceError, or returns null
 * for a credential it does not recognise: 401) and sets `auth`. `authGate`
 * is this step as a middleware. A host's `authenticate` may answer without a
 * promise (a cached credential): then no microtask is spent on it.
 */
export function authStep<A extends GatewayAuth, E extends GatewayEnv<A>>(
  authenticate: (cred: { scheme: 'bearer' | 'dpop'; token: string }, c: Context<E>) => A | null | Promise<A | null>,
): (c: Context<E>) => void | Promise<void> {
  const settle = (c: Context<E>, auth: A | null) => {
    if (!auth) throw unauthorized('credential not recognised');
    c.set('auth', auth);
  };
  return (c) => {
    const header = authorizationHeader(c);
    if (!header) throw unauthorized('missing bearer credential');
    const cred = parseAuthorization(header);
    if (!cred) throw unauthorized('malformed Authorization header');
    const auth = authenticate(cred, c);
    if (auth instanceof Promise) return auth.then((a) => settle(c, a));
    return settle(c, auth);
  };
}

/** Gate 2: authentication (see `authStep`). */
export function authGate<A extends GatewayAuth, E extends GatewayEnv<A>>(
  authenticate: (cred: { scheme: 'bearer' | 'dpop'; token: string }, c: Context<E>) => A | null | Promise<A | null>,
): MiddlewareHandler<E> {
  const step = authStep<A, E>(authenticate);
  return async function authGate(c, next) {
    await step(c);
    await next();
  };
}

/**
 * Gates 3 and 4: the permission (403), then the credential's own rpm ceiling
 * (429) when `rpmOf` gives one, counted against its root credential. A null
 * permission is an operation any authenticated caller may call (who am I):
 * only the rpm ceiling applies.
 */
export function permissionGate<A extends GatewayAuth, E extends GatewayEnv<A>>(
  permission: string | null,
  limits: (c: Context<E>) => CredentialLimits,
  rpmOf: (auth: A) => number | null | undefined,
): MiddlewareHandler<E> {
  const judge = (r: TakeResult) => {
    if (!r.allowed) throw rateLimited(r, 'requests-per-minute ceiling of this credential', rateLimitHeaders(r, 'credential', 60));
  };
  // Not async: a refusal thrown here reaches Hono as a rejection all the same (compose awaits the
  // handler inside its try), and a request without an rpm spends no promise of its own.
  return function permissionGate(c, next) {
    const auth = c.get('auth');
    if (permission !== null && !grants(auth.effective, permission)) {
      throw forbidden(`the credential lacks the permission ${permission}`, { required_permission: permission });
    }
    const rpm = rpmOf(auth);
    if (rpm !== null && rpm !== undefined && rpm > 0) {
      const r = limits(c).take(auth.credential.root, rpm);
      if (r instanceof Promise)
        return r.then((t) => {
          judge(t);
          return next();
        });
      judge(r);
    }
    return next();
  };
}

/**
 * Gate 5: every error leaves as the spec's envelope. `toServiceError` maps
 * framework errors (malformed bodies, HTTP exceptions) first; anything else
 * is internal_error with the request id as correlation id, its cause given to
 * `logCause` only. A 503 the program answers on purpose (a ServiceError: not
 * ready while it starts or stops, a store outage, a provider away) is an
 * answer, not a fault: its access line records it and no cause is logged
 * (the outage itself is logged once by what met it). A 401 carries
 * `challenge` as WWW-Authenticate unless the refusal set its own.
 */
export function envelopeErrors<E extends GatewayEnv<GatewayAuth>>(o: {
  toServiceError?: (err: unknown) => unknown;
  logCause: (correlationId: string, err: unknown, c: Context<E>) => void;
  /** The challenge of a 401, or how to make it for the request (its protected resource's metadata). */
  challenge: string | ((c: Context<E>) => string);
}): ErrorHandler<E> {
  return (err, c) => {
    const e = o.toServiceError ? o.toServiceError(err) : err;
    const id = c.get('requestId') ?? crypto.randomUUID();
    const { status, body } = toEnvelope(e, id);
    if (status >= 500 && !(isServiceError(e) && status === 503)) o.logCause(id, err, c);
    const headers: Record<string, string> = {};
    if (isServiceError(e) && e.headers) Object.assign(headers, e.headers);
    if (status === 401 && !headers['WWW-Authenticate'])
      headers['WWW-Authenticate'] = typeof o.challenge === 'string' ? o.challenge : o.challenge(c);
    return c.json(body, status, headers);
  };
}

/** A request body past `limitBytes`: the one refusal both hosts give (400 body_too_large). */
export function bodyTooLarge(limitBytes: number): ServiceError {
  return new ServiceError('invalid_request', 'request body too large', { details: { reason: 'body_too_large', limit_bytes: limitBytes } });
}

/**
 * The body size gate both hosts put in front of their routes: a body past
 * `limitBytes` (declared or streamed) is refused with `bodyTooLarge`. The
 * cell also calls it as a step (`gate(c, rest)`) for a body of undeclared length.
 * GET and HEAD pass without a look: @hono/node-server gives them no body, and
 * asking for one (`c.req.raw.body`, which Hono's bodyLimit does first) builds
 * a full Request object, about 6 µs of every GET at the edge (bench/RESULTS.md,
 * "Issue 40: the edge's DPoP").
 */
export function bodyLimitGate<E extends Env>(limitBytes: number): MiddlewareHandler<E> {
  const limit = bodyLimit({
    maxSize: limitBytes,
    onError: () => {
      throw bodyTooLarge(limitBytes);
    },
  });
  return function bodyLimitOrGet(c, next) {
    const method = c.req.method;
    return method === 'GET' || method === 'HEAD' ? next() : limit(c, next);
  };
}

/**
 * A request the framework could not take (a body that is not JSON, a
 * malformed part the route's parser refused): 400 invalid_request, reason
 * `malformed_request`, at the cell and at the edge alike.
 */
export function malformedRequest(message = 'malformed request'): ServiceError {
  return new ServiceError('invalid_request', message, { details: { reason: 'malformed_request' } });
}

/** The answer to a path no route serves, at both hosts (the cell first answers 405 when another method serves it). */
export const notFoundAnswer: NotFoundHandler = (c) => c.json({ error: 'not_found', message: 'no such resource' }, 404);

/**
 * The `WWW-Authenticate` challenge of a 401 (`envelopeErrors`' `challenge`):
 * bearer, or a DPoP-bound token with a proof signed by one of the algorithms
 * both hosts accept (core's DPOP_ALGS). `realm` names the host;
 * `resourceMetadata` (RFC 9728 §5.1) is where the protected resource's
 * metadata is, so a client that was refused finds its authorization server.
 */
export function authChallenge(realm: string, resourceMetadata?: string): string {
  const meta = resourceMetadata ? `, resource_metadata="${resourceMetadata}"` : '';
  return `Bearer realm="${realm}"${meta}, DPoP algs="${DPOP_ALGS.join(' ')}"`;
}

/** A client address as both hosts compare it: the IPv4-mapped IPv6 prefix stripped, so `::ffff:1.2.3.4` is `1.2.3.4`. */
export function normalizeIp(ip: string): string {
  return ip.startsWith('::ffff:') && ip.includes('.') ? ip.slice(7) : ip;
}
