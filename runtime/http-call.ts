/**
 * The HTTP tools a cell and a device both run (`http.get` here,
 * `http.request` in http-request.ts), and the floor under every tool that
 * sends an HTTP request, in the order a request meets it: the URL argument
 * (http or https), the egress allowlist for the request's method
 * (core/authority/egress.ts), a literal private address (ssrf.ts; names are
 * judged when the connection is made, by the caller's dispatcher), the
 * delegated token for a registered protected resource (a cell's,
 * cell/oauth/tool-delegation.ts; a device has none), the response read up to
 * a limit, and what a failed request becomes.
 *
 * The cell's catalog (cell/tools/catalog.ts) and a device's (edge/tools.ts)
 * list these same definitions; each gives its own `HttpToolsContext` (the
 * private ranges its operator allowed, its dispatcher).
 */
import { request } from 'undici';
import { ServiceError, invalid } from '../core/errors.ts';
import type { EgressMethod } from '../core/authority/egress-entry.ts';
import { egressAllowed } from '../core/authority/egress.ts';
import { isPrivateRefusal, literalHostAllowed } from './ssrf.ts';
import { stringArg, toolRefusal, type ToolAuthority } from '../core/catalog/builtin.ts';
import type { ArgumentIn } from '../core/engine/types.ts';
import type { JsonObject } from '../core/journal/record.ts';
import type { Dispatcher } from 'undici';

export { stringArg, toolRefusal } from '../core/catalog/builtin.ts';

/** A token for one call to a registered protected resource (a cell's OAuth server issues it): its id and SHA-256 go in the journal, never the token. */
export interface HttpDelegation {
  token: string;
  jti: string;
  tokenSha256: string;
  proof(htm: string, htu: string): Promise<string>;
}

/** What a call to a protected resource asks the token for. */
export interface HttpDelegationRequest {
  /** The URL the tool is about to call. */
  url: string;
  /** The tool, e.g. `http.get`: its grant is the token's scope (`tools.http.get`). */
  tool: string;
  requester: string;
  /** The acting agent (`act.sub`); absent: the requester calls for itself (a `single` job, a catalog review) and there is no `act`. */
  agentId?: string;
  runId?: string;
  crewId?: string;
}

/** What an HTTP tool is given: the network floor, and a cell's delegation (a device has none). */
export interface HttpToolsContext {
  /** CIDR ranges the operator allow-listed (the cell's or `edge serve`'s `--egress-allow-private`). */
  allowPrivate: readonly string[];
  /** The dispatcher whose connections pass the floor (ssrf.ts guardedDispatcher). */
  dispatcher: Dispatcher;
  /** A token for a call to a registered protected resource on behalf of the run's requester; null when the URL is no such resource. */
  delegation?: ((req: HttpDelegationRequest) => Promise<HttpDelegation | null>) | undefined;
}

/** Who calls an HTTP tool: its authority, the call's effect key, and whom it acts for. */
export interface HttpCaller {
  agentId: string;
  authority: ToolAuthority;
  onBehalf?: { requester: string; runId: string; crewId?: string };
  /** The call's effect key (core/engine/effect-key.ts): a write method sends it as `Idempotency-Key`. */
  effectKey?: string;
}

/** An HTTP tool: its definition and how it runs (the shape of a cell's ToolDef over HttpToolsContext). */
export interface HttpTool {
  name: string;
  description: string;
  side_effects: boolean;
  idempotent?: boolean | ArgumentIn;
  parameters: JsonObject;
  run(ctx: HttpToolsContext, caller: HttpCaller, args: Record<string, unknown>, signal?: AbortSignal): Promise<unknown>;
}

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
 * Refuses a request `authority`'s egress allowlist does not allow with `method` (`egress_denied`, naming
 * the method when it is not GET). The seat's part of the egress check: what a journal carried back from a
 * device is judged by again (cell/edge/journal-acts.ts).
 */
export function assertAllowlisted(authority: ToolAuthority, url: URL, method: EgressMethod = 'GET'): void {
  if (!egressAllowed(authority.egress_allowlist, url.href, method)) {
    const how = method === 'GET' ? '' : ` with ${method}`;
    throw toolRefusal('egress_denied', `egress to ${url.host}${how} is not on the allowlist`, {
      destination: url.origin,
      ...(method === 'GET' ? {} : { method }),
    });
  }
}

/** Refuses a literal private address the host's configuration does not allow (`egress_private_address`). */
export function assertHostFloor(ctx: HttpToolsContext, url: URL): void {
  if (!literalHostAllowed(url.hostname, ctx.allowPrivate)) throw privateRefusal(url);
}

/** What http.get judges before it sends, of the seat alone: its argument and the allowlist (not the host's floor). */
export function judgeHttpGet(authority: ToolAuthority, args: Record<string, unknown>): URL {
  const url = urlArg(args);
  assertAllowlisted(authority, url);
  return url;
}

/** A token for this call, when the URL is at or below a registered protected resource and the call acts for a run's requester. */
export async function delegationFor(ctx: HttpToolsContext, caller: HttpCaller, url: URL, tool: string) {
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
  ctx: HttpToolsContext,
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

/** `http.get`: a GET of a URL on the egress allowlist, under the floor above. */
export const HTTP_GET: HttpTool = {
  name: 'http.get',
  description: 'Fetch a URL on the egress allowlist (GET, no redirects, 64 KiB, 5 s).',
  side_effects: false,
  parameters: { type: 'object', properties: { url: { type: 'string' } }, required: ['url'] },
  async run(ctx, caller, args, signal) {
    const parsed = judgeHttpGet(caller.authority, args);
    assertHostFloor(ctx, parsed);
    // A registered protected resource gets a token: the requester as subject, this agent as actor.
    const d = await delegationFor(ctx, caller, parsed, 'http.get');
    const headers = d ? { authorization: `DPoP ${d.token}`, dpop: await d.proof('GET', `${parsed.origin}${parsed.pathname}`) } : undefined;
    try {
      return answerOf(await send(ctx, parsed, { method: 'GET', ...(headers ? { headers } : {}), signal }), d);
    } catch (e) {
      throw requestFailure(e, signal, parsed, 'http.get');
    }
  },
};
