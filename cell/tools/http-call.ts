/**
 * The floor under every tool that sends an HTTP request (http.get,
 * http.request), in the order a request meets it: the URL argument (http or
 * https), the egress allowlist for the request's method (egress.ts), a literal
 * private address (ssrf.ts; names are judged when the connection is made, by
 * the module's dispatcher), the delegated token for a registered protected
 * resource (cell/oauth/tool-delegation.ts), the response read up to a limit,
 * and what a failed request becomes.
 */
import { request } from 'undici';
import { ServiceError, invalid } from '../../core/errors.ts';
import type { EgressMethod } from '../../core/authority/egress-entry.ts';
import { egressAllowed } from '../../core/authority/egress.ts';
import { isPrivateRefusal, literalHostAllowed } from './ssrf.ts';
import { stringArg, toolRefusal, type ToolCaller, type ToolsContext } from './tool-def.ts';

/** The most of a response body an HTTP tool returns (bytes); the rest is dropped and the result says `truncated`. */
export const HTTP_BODY_LIMIT = 64 * 1024;

/** How long an HTTP tool waits for the response's headers, and then between chunks of its body (ms). */
export const HTTP_TIMEOUT_MS = 5000;

/** The `url` argument: an http or https URL of at most 2048 characters, else invalid_request. */
export function urlArg(args: Record<string, unknown>): URL {
  const url = stringArg(args, 'url');
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw invalid("argument 'url' is not a URL", { reason: 'tool_bad_arguments', argument: 'url' });
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw invalid('only http and https URLs', { reason: 'tool_bad_arguments', argument: 'url' });
  return parsed;
}

/** The refusal of a loopback, private or link-local destination. */
function privateRefusal(url: URL): ServiceError {
  return toolRefusal('egress_private_address', 'egress to a loopback, private or link-local address is refused', {
    destination: url.origin,
  });
}

/**
 * Refuses a request the caller's egress allowlist does not allow with `method` (`egress_denied`, naming
 * the method when it is not GET), or one to a literal private address (`egress_private_address`).
 */
export function assertEgress(ctx: ToolsContext, caller: ToolCaller, url: URL, method: EgressMethod = 'GET'): void {
  if (!egressAllowed(caller.authority.egress_allowlist, url.href, method)) {
    const how = method === 'GET' ? '' : ` with ${method}`;
    throw toolRefusal('egress_denied', `egress to ${url.host}${how} is not on the allowlist`, {
      destination: url.origin,
      ...(method === 'GET' ? {} : { method }),
    });
  }
  if (!literalHostAllowed(url.hostname, ctx.allowPrivate)) throw privateRefusal(url);
}

/** A token for this call, when the URL is at or below a registered protected resource and the call acts for a run's requester. */
export async function delegationFor(ctx: ToolsContext, caller: ToolCaller, url: URL, tool: string) {
  if (!caller.onBehalf || !ctx.delegation) return null;
  return ctx.delegation({
    url: url.href,
    tool,
    requester: caller.onBehalf.requester,
    agentId: caller.agentId,
    runId: caller.onBehalf.runId,
    ...(caller.onBehalf.crewId ? { crewId: caller.onBehalf.crewId } : {}),
  });
}

/** What came back: status, content type, a redirect's location, and the body read up to the limit. */
export interface HttpAnswer {
  status: number;
  content_type: string;
  location: string | undefined;
  body: string;
  truncated: boolean;
}

/**
 * Sends one request through the module's dispatcher (the floor's connections), following no redirect,
 * with the tools' timeouts; `signal` (a step's timeout, a cancel) aborts it: the server sees its
 * connection closed.
 */
export async function send(
  ctx: ToolsContext,
  url: URL,
  o: { method: EgressMethod; headers?: Record<string, string>; body?: Buffer; signal?: AbortSignal | undefined },
): Promise<HttpAnswer> {
  const res = await request(url.href, {
    method: o.method,
    ...(o.headers ? { headers: o.headers } : {}),
    ...(o.body ? { body: o.body } : {}),
    headersTimeout: HTTP_TIMEOUT_MS,
    bodyTimeout: HTTP_TIMEOUT_MS,
    maxRedirections: 0,
    dispatcher: ctx.dispatcher,
    ...(o.signal ? { signal: o.signal } : {}),
  } as Parameters<typeof request>[1]);
  const { text, truncated } = await readCapped(res.body);
  const location = res.headers['location'];
  return {
    status: res.statusCode,
    content_type: String(res.headers['content-type'] ?? ''),
    location: typeof location === 'string' ? location : undefined,
    body: text,
    truncated,
  };
}

/**
 * An HTTP tool's result: the answer (with a redirect's `location` when `location` is asked for) and, when a
 * delegated token went with the request, which one (its id and SHA-256: the journal keeps which token went
 * where, never the token).
 */
export function answerOf(
  a: HttpAnswer,
  d: { jti: string; tokenSha256: string } | null,
  o: { location?: boolean } = {},
): Record<string, unknown> {
  return {
    status: a.status,
    content_type: a.content_type,
    ...(o.location && a.location !== undefined ? { location: a.location } : {}),
    body: a.body,
    truncated: a.truncated,
    ...(d ? { on_behalf: { jti: d.jti, token_sha256: d.tokenSha256 } } : {}),
  };
}

/** Reads a response body up to `limit` bytes (UTF-8 text); the rest is not read (the body is destroyed). */
export async function readCapped(
  body: AsyncIterable<unknown> & { destroy(): unknown },
  limit = HTTP_BODY_LIMIT,
): Promise<{ text: string; truncated: boolean }> {
  const chunks: Buffer[] = [];
  let size = 0;
  let truncated = false;
  for await (const c of body) {
    const b = c as Buffer;
    if (size + b.length > limit) {
      chunks.push(b.subarray(0, limit - size));
      truncated = true;
      body.destroy();
      break;
    }
    chunks.push(b);
    size += b.length;
  }
  return { text: Buffer.concat(chunks).toString('utf8'), truncated };
}

/** Error codes of a connection that was never made: the request did not leave, so it did nothing. */
const NOT_SENT = new Set(['UND_ERR_CONNECT_TIMEOUT', 'ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EACCES']);

/** True when a request failed before it left (no connection was made), so it did nothing (its causes are read). */
export function neverSent(e: unknown): boolean {
  for (let x: unknown = e, i = 0; x && i < 5; x = (x as { cause?: unknown }).cause, i++) {
    const code = (x as { code?: unknown }).code;
    if (typeof code === 'string' && NOT_SENT.has(code)) return true;
  }
  return false;
}

/**
 * What a request that failed becomes: the floor's refusal as it was, `cancelled` when the call's
 * signal stopped it, `egress_private_address` when the name resolved to a private address, else
 * `tool_unreachable` (retryable), or `unreached` when the caller says retrying it is not safe.
 */
export function requestFailure(
  e: unknown,
  signal: AbortSignal | undefined,
  url: URL,
  tool: string,
  unreached: ServiceError | null = null,
): ServiceError {
  if (e instanceof ServiceError) return e;
  if (signal?.aborted)
    return new ServiceError('service_unavailable', `${tool} was stopped before the URL answered`, { details: { reason: 'cancelled' } });
  if (isPrivateRefusal(e)) return privateRefusal(url);
  return (
    unreached ??
    new ServiceError('service_unavailable', `${tool} failed to reach the URL`, {
      details: { reason: 'tool_unreachable' },
      retryable: true,
    })
  );
}
