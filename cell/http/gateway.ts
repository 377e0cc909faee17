/**
 * The cell's gateway in front of every route, as one middleware: the access
 * log and metrics (outermost), the request id, the per-client-IP rate budget
 * (429), the body size limit, authentication under the protected API prefix
 * (401), the JSON body gate, the unknown-query gate, then the route (whose own
 * middleware judges the permission, 403, and the credential's rpm, 429).
 *
 * Each gate is runtime/gateway.ts's or the cell's own step, called in the
 * order the spec gives; what this file adds is running them in one async
 * frame instead of eight Hono middleware layers (each a promise, a closure and
 * a dispatch of their own: the largest share of the gateway's own time per
 * request, bench/RESULTS.md "Gateway hot path"). The answer is what the
 * layers gave: a gate's refusal becomes the error envelope right where it is
 * thrown (as Hono's compose does at each layer), and the gateway's headers
 * (rate limits, then the request id) go on every answer, refusals included.
 */
import type { Context, ErrorHandler, MiddlewareHandler, Next } from 'hono';
import type { OpenAPIHono } from '@hono/zod-openapi';
import {
  addHeaders,
  authStep,
  bodyLimitGate,
  bodyTooLarge,
  presentedCredential,
  rateStep,
  requestIdOf,
  type CredentialLimits,
} from '../../runtime/gateway.ts';
import { unauthorized } from '../../core/errors.ts';
import { declaredBodyLength, jsonBodyStep } from '../../runtime/json-body.ts';
import type { AppEnv, AuthContext, Authenticator, CellCore, CredentialCheck } from '../context.ts';
import type { CellMetrics } from '../ops/api.ts';
import { accessLog } from './access-log.ts';
import { clientIp } from './client-ip.ts';
import { unknownQueryStep } from './route-shape.ts';

type Credential = { scheme: 'bearer' | 'dpop'; token: string };

/** The prefix of the protected API (Hono's `/api/public/v1/*`: the prefix itself and every path under it). */
const API_PREFIX = '/api/public/v1';

export function cellGateway(
  core: CellCore,
  o: {
    app: OpenAPIHono<AppEnv>;
    metrics: CellMetrics;
    limits: CredentialLimits;
    authenticators: readonly Authenticator[];
    /** Paths under the prefix that need no credential (discovery documents). */
    publicPaths: readonly string[];
    /** Paths outside the prefix that need a credential as the API does (`/mcp`). */
    protectedPaths: readonly string[];
    onError: ErrorHandler<AppEnv>;
  },
): MiddlewareHandler<AppEnv> {
  const { limits, publicPaths, protectedPaths, onError } = o;
  const { rate, trustedProxies, bodyLimitBytes } = core.config;
  const log = accessLog({ log: core.log, metrics: o.metrics, traces: core.traces });
  const takeRate = rateStep<AppEnv>({ ...rate, clock: core.clock, clientIp: (c) => clientIp(c, trustedProxies) });
  const authenticators = o.authenticators;
  // The registered authenticators in turn; the first that recognises the credential decides.
  const firstRecognising = (from: number, cred: Credential, c: Context<AppEnv>): AuthContext | null | Promise<AuthContext | null> => {
    for (let i = from; i < authenticators.length; i++) {
      const auth = authenticators[i]!.authenticate(cred, c);
      if (auth instanceof Promise) return auth.then((a) => a ?? firstRecognising(i + 1, cred, c));
      if (auth) return auth;
    }
    return null;
  };
  const authenticate = authStep<AuthContext, AppEnv>((cred, c) => firstRecognising(0, cred, c));
  const credentialCheck = credentialCheckOf(authenticators);
  const scanBody = jsonBodyStep<AppEnv>(core.config.jsonMaxDepth);
  const judgeQuery = unknownQueryStep(o.app);
  const limitBody = bodyLimitGate<AppEnv>(bodyLimitBytes);

  /**
   * Authentication (under the API prefix, but for the public paths), the JSON
   * body gate and the unknown-query gate, in that order: a promise only when
   * one of them waits (a credential not cached, a body to read).
   */
  const guard = (c: Context<AppEnv>, hasBody: boolean): void | Promise<void> => {
    const path = c.req.path;
    const api = path === API_PREFIX || path.startsWith(`${API_PREFIX}/`);
    const guarded = api ? !publicPaths.some((p) => path === p || path.startsWith(p + '/')) : protectedPaths.includes(path);
    const authenticated = guarded ? authenticate(c) : undefined;
    const afterAuth = () => {
      // After authentication, so an anonymous caller learns nothing but 401.
      const scanned = hasBody ? scanBody(c) : undefined;
      if (scanned) return scanned.then(() => (api ? judgeQuery(c) : undefined));
      if (api) judgeQuery(c);
      return undefined;
    };
    return authenticated ? authenticated.then(afterAuth) : afterAuth();
  };

  /** The request id, the gates and the route; a gate's refusal becomes the answer here, and the gateway's headers go on it. */
  const gates = async (c: Context<AppEnv>, next: Next): Promise<void> => {
    const id = requestIdOf(c);
    c.set('requestId', id);
    c.set('credentialLimits', limits);
    c.set('credentialCheck', credentialCheck);
    let rateHeaders: Record<string, string> | undefined;
    try {
      rateHeaders = takeRate(c);
      const method = c.req.method;
      // GET and HEAD carry no body; asking for one would make @hono/node-server
      // build a full Request object on the hot read path. A declared length is
      // judged from node:http's headers, as bodyLimit itself would judge it, for
      // the same reason; the body is then read once, directly, by whoever parses it.
      if (method === 'GET' || method === 'HEAD') {
        const guarded = guard(c, false);
        if (guarded) await guarded;
        await next();
      } else {
        const rest = async () => {
          const guarded = guard(c, true);
          if (guarded) await guarded;
          await next();
        };
        const declared = declaredBodyLength(c);
        if (declared === undefined) await limitBody(c, rest);
        else if (declared > bodyLimitBytes) throw bodyTooLarge(bodyLimitBytes);
        else await rest();
      }
    } catch (err) {
      // What Hono's compose does with a layer's error: the envelope becomes the answer here.
      if (!(err instanceof Error)) throw err;
      c.error = err;
      c.res = await onError(err, c);
    }
    if (rateHeaders) addHeaders(c, rateHeaders);
    addHeaders(c, { 'X-Request-Id': id });
  };

  return async function gateway(c, next) {
    const start = performance.now();
    const trace = log.traceOf(c);
    let traceId: string | undefined;
    if (log.needsTrace(trace)) traceId = await log.traced(c, trace, () => gates(c, next));
    else await gates(c, next);
    log.done(c, start, traceId);
  };
}

/**
 * The credential check of the requests still being answered (event streams): the authenticator that
 * recognises the presented credential judges it again (its `recheck`, else `authenticate`), and the
 * tables the authenticators name are the changes that prompt it.
 */
function credentialCheckOf(authenticators: readonly Authenticator[]): CredentialCheck {
  const tables = new Set(authenticators.flatMap((a) => a.tables ?? []));
  return {
    async recheck(c) {
      const cred = presentedCredential(c);
      if (!cred) throw unauthorized('missing bearer credential');
      for (const a of authenticators) {
        const auth = await (a.recheck ?? a.authenticate).call(a, cred, c);
        if (auth) return auth;
      }
      throw unauthorized('credential not recognised');
    },
    concerns(change) {
      if (change.gap !== undefined) return true;
      for (const t of change.tables) if (tables.has(t)) return true;
      return false;
    },
  };
}
