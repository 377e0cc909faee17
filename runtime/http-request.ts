/**
 * `http.request`: an HTTP request with any of GET, HEAD, POST, PUT, PATCH,
 * DELETE, under the same floor as `http.get` (http-call.ts) and more:
 *
 * - egress: the seat's allowlist must allow the method (an entry without
 *   methods allows GET and HEAD only; a write needs `POST:…`, `*:…`;
 *   core/authority/egress-entry.ts);
 * - headers: at most 32, names RFC 9110 tokens of at most 128 characters,
 *   values of at most 4096 characters without control characters, 16 KiB in
 *   all; credentials, hop-by-hop, framing and routing headers, and
 *   `Idempotency-Key` (the caller's own) are refused (`header_not_allowed`): an
 *   agent cannot present a credential, smuggle a request or pick its own key;
 * - body: a string, sent as it is, or any other JSON value, sent as JSON; at
 *   most 64 KiB; none with GET or HEAD;
 * - no redirects (a 3xx is the answer, with its `location`), 5 s for the
 *   headers and between body chunks, the response read up to 64 KiB;
 * - a registered protected resource gets the per-call delegated token
 *   (`Authorization: DPoP`, scope `tools.http.request`), as for http.get;
 * - a write method (POST, PUT, PATCH, DELETE) carries the call's effect key as
 *   `Idempotency-Key` (a Structured Field string,
 *   draft-ietf-httpapi-idempotency-key-header), the same on every issue of
 *   the call: a service that keeps keys applies it once.
 *
 * The tool is side-effecting (`ask` and `auto-read` hold it for approval).
 * GET, HEAD, PUT and DELETE are idempotent methods (RFC 9110 §9.2.2): a call
 * with one of them whose outcome was lost in a crash is issued again with the
 * same key. POST and PATCH are not: such a call is never issued blindly again
 * (the run waits `outcome_unknown`, core/engine/internal/effects.ts), and a
 * POST or PATCH that may have reached the service but got no answer fails
 * with reason `outcome_unknown` instead of `tool_unreachable`, so no retry
 * policy sends it again unseen.
 */
import { ServiceError, invalid } from '../core/errors.ts';
import { EGRESS_METHODS, type EgressMethod } from '../core/authority/egress-entry.ts';
import type { ToolAuthority } from '../core/catalog/builtin.ts';
import {
  answerOf,
  assertAllowlisted,
  assertHostFloor,
  delegationFor,
  neverSent,
  requestFailure,
  send,
  toolRefusal,
  urlArg,
  type HttpTool,
} from './http-call.ts';

/** Methods whose calls may be issued again after a lost outcome (RFC 9110 §9.2.2). */
const IDEMPOTENT_METHODS: EgressMethod[] = ['GET', 'HEAD', 'PUT', 'DELETE'];
/** Methods that carry no body and the effect key not (RFC 9110 §9.2.1: safe). */
const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD']);

export const MAX_HEADERS = 32;
export const MAX_HEADER_NAME = 128;
export const MAX_HEADER_VALUE = 4096;
export const MAX_HEADER_BYTES = 16 * 1024;
export const MAX_REQUEST_BODY = 64 * 1024;

/**
 * Request headers an agent may not set (lower case): credentials (the cell presents the only one a call
 * carries, the delegated token), hop-by-hop headers (RFC 9110 §7.6.1), framing and routing (the client
 * frames the message; Host is the URL's), and the effect key's header (the cell's own).
 */
export const DENIED_HEADERS: ReadonlySet<string> = new Set([
  'authorization',
  'proxy-authorization',
  'cookie',
  'cookie2',
  'dpop',
  'x-api-key',
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  'content-length',
  'expect',
  'forwarded',
  'via',
  'x-forwarded-for',
  'x-forwarded-host',
  'x-forwarded-proto',
  'idempotency-key',
]);

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
// Visible characters, space and tab (RFC 9110 §5.5); no CR, LF or NUL.
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\uffff]*$/;

const bad = (message: string, argument: string) => invalid(message, { reason: 'tool_bad_arguments', argument });

function methodArg(args: Record<string, unknown>): EgressMethod {
  const m = args['method'];
  if (typeof m !== 'string' || !(EGRESS_METHODS as readonly string[]).includes(m))
    throw bad(`argument 'method' must be one of ${EGRESS_METHODS.join(', ')}`, 'method');
  return m as EgressMethod;
}

/** The `headers` argument, checked: names and values, their count and size, and none an agent may not set. */
function headersArg(args: Record<string, unknown>): Map<string, string> {
  const h = args['headers'];
  if (h === undefined || h === null) return new Map();
  if (typeof h !== 'object' || Array.isArray(h)) throw bad("argument 'headers' must be an object of header names to strings", 'headers');
  const entries = Object.entries(h as Record<string, unknown>);
  if (entries.length > MAX_HEADERS) throw bad(`at most ${MAX_HEADERS} headers`, 'headers');
  const out = new Map<string, string>();
  let bytes = 0;
  for (const [name, value] of entries) {
    if (name.length > MAX_HEADER_NAME || !TOKEN.test(name))
      throw bad(`header name '${name.slice(0, 64)}' is not a token of at most ${MAX_HEADER_NAME} characters`, 'headers');
    if (typeof value !== 'string' || value.length > MAX_HEADER_VALUE || !FIELD_VALUE.test(value))
      throw bad(`header '${name}' must be a string of at most ${MAX_HEADER_VALUE} characters without control characters`, 'headers');
    const lower = name.toLowerCase();
    if (DENIED_HEADERS.has(lower) || lower.startsWith('proxy-'))
      throw toolRefusal('header_not_allowed', `an agent may not set the header ${name}`, { header: lower });
    if (out.has(lower)) throw bad(`header '${name}' is given twice`, 'headers');
    bytes += Buffer.byteLength(name) + Buffer.byteLength(value);
    out.set(lower, value);
  }
  if (bytes > MAX_HEADER_BYTES) throw bad(`headers larger than ${MAX_HEADER_BYTES} bytes`, 'headers');
  return out;
}

/** The `body` argument as bytes to send and the content type it implies (none for a string). */
function bodyArg(args: Record<string, unknown>, method: EgressMethod): { bytes: Buffer; json: boolean } | null {
  const b = args['body'];
  if (b === undefined || b === null) return null;
  if (SAFE_METHODS.has(method)) throw bad(`a ${method} request carries no body`, 'body');
  const json = typeof b !== 'string';
  const bytes = Buffer.from(json ? JSON.stringify(b) : b, 'utf8');
  if (bytes.length > MAX_REQUEST_BODY) throw bad(`body larger than ${MAX_REQUEST_BODY / 1024} KiB`, 'body');
  return { bytes, json };
}

/**
 * What http.request judges before it sends, of the seat alone: its arguments (method, URL, headers, body) and
 * the allowlist for the method, not the host's floor; what a journal carried back from a device is judged by
 * again (cell/edge/journal-acts.ts).
 */
export function judgeHttpRequest(
  authority: ToolAuthority,
  args: Record<string, unknown>,
): { method: EgressMethod; url: URL; headers: Map<string, string>; body: { bytes: Buffer; json: boolean } | null } {
  const method = methodArg(args);
  const url = urlArg(args);
  const headers = headersArg(args);
  const body = bodyArg(args, method);
  assertAllowlisted(authority, url, method);
  return { method, url, headers, body };
}

export const HTTP_REQUEST: HttpTool = {
  name: 'http.request',
  description:
    'Send an HTTP request (GET, HEAD, POST, PUT, PATCH, DELETE) to a URL on the egress allowlist for that method; no redirects, 64 KiB bodies, 5 s.',
  side_effects: true,
  idempotent: { argument: 'method', values: IDEMPOTENT_METHODS },
  parameters: {
    type: 'object',
    properties: {
      method: { type: 'string', enum: [...EGRESS_METHODS] },
      url: { type: 'string' },
      headers: {
        type: 'object',
        additionalProperties: { type: 'string' },
        maxProperties: MAX_HEADERS,
        description: 'Request headers (no credentials, hop-by-hop or framing headers)',
      },
      body: { description: 'A string sent as it is, or a JSON value sent as application/json (not with GET or HEAD)' },
    },
    required: ['method', 'url'],
  },
  async run(ctx, caller, args, signal) {
    const { method, url, headers, body } = judgeHttpRequest(caller.authority, args);
    assertHostFloor(ctx, url);
    if (body?.json && !headers.has('content-type')) headers.set('content-type', 'application/json');
    if (!SAFE_METHODS.has(method) && caller.effectKey) headers.set('idempotency-key', `"${caller.effectKey}"`);
    // A registered protected resource gets a token: the requester as subject, this agent as actor.
    const d = await delegationFor(ctx, caller, url, 'http.request');
    if (d) {
      headers.set('authorization', `DPoP ${d.token}`);
      headers.set('dpop', await d.proof(method, `${url.origin}${url.pathname}`));
    }
    // A write that may have reached the service and got no answer: its outcome is unknown, not retryable.
    const lost = IDEMPOTENT_METHODS.includes(method)
      ? null
      : new ServiceError('service_unavailable', `http.request sent the ${method} and got no answer: its outcome is unknown`, {
          details: { reason: 'outcome_unknown' },
        });
    try {
      const a = await send(ctx, url, { method, headers: Object.fromEntries(headers), ...(body ? { body: body.bytes } : {}), signal });
      return answerOf(a, d, { location: true });
    } catch (e) {
      throw requestFailure(e, signal, url, 'http.request', neverSent(e) ? null : lost);
    }
  },
};
