/**
 * One call of an imported MCP tool on an open session, as the cell's catalog
 * (cell/tools/mcp/call.ts) and a device's (edge/mcp-tools.ts) both make it,
 * after the engine's floor (grant, value gate, permission mode):
 *
 * 1. egress (`assertCallEgress`, `egress_denied`): the seat's
 *    `egress_allowlist` must allow the call. A read-only tool reads: an entry
 *    for the server's origin that allows GET is enough. A side-effecting tool
 *    writes: the entry must name POST, the method every MCP request travels
 *    with (`POST:<origin>`, `*:<origin>`, `*:*`). A stdio source is named
 *    `mcp:<source>` (`mcp:*`, `*`), an entry that exists only for MCP and
 *    reaches all of the source's tools;
 * 2. the pin (`callPinned`): the server's live definition of the tool (its
 *    list, read again once `definition_max_age_ms` old) must be the one
 *    pinned: else the call is refused, `tool_definition_changed`, naming the
 *    tool, the pinned and the live hash;
 * 3. `tools/call`, with the step's signal and the source's timeout, and in its
 *    `_meta` the call's effect key (`dev.agent-cell/effect-key`: the engine's
 *    key of a side-effecting call, the same on every issue of the call, so a
 *    server that keeps keys applies it once) beside what the caller adds. A
 *    side-effecting call not declared idempotent that was sent and got no
 *    answer fails `outcome_unknown` (the engine's crash rule,
 *    core/engine/internal/effects.ts, takes it from there).
 *
 * The answer is the server's result as JSON (`content`, `structuredContent`,
 * `isError`); the caller adds what it knows of the call's identity.
 */
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { toolRefusal } from '../../core/catalog/builtin.ts';
import { egressAllowed } from '../../core/authority/egress.ts';
import { EFFECT_KEY_META } from '../../core/engine/effect-key.ts';
import { ServiceError, invalid } from '../../core/errors.ts';
import type { JsonObject } from '../../core/journal/record.ts';
import { neverSent } from '../http-call.ts';
import { isPrivateRefusal } from '../ssrf.ts';
import { requestSignal, StdioNotConfigured, type Session, type SourceEndpoint } from './connect.ts';

/** Where a call of the source goes, as an egress allowlist names it: the server's URL, or `mcp:<source>` for stdio. */
export function egressDestination(source: Pick<SourceEndpoint, 'transport' | 'name' | 'url'>): string {
  return source.transport === 'stdio' ? `mcp:${source.name}` : source.url!;
}

/**
 * Refuses a call the allowlist does not allow (see the header): a side-effecting tool of an HTTP source needs
 * an entry allowing POST to the server's origin, a read-only one an entry allowing GET; a stdio one `mcp:<source>`.
 */
export function assertCallEgress(
  allowlist: readonly string[] | undefined,
  source: Pick<SourceEndpoint, 'transport' | 'name' | 'url'>,
  tool: string,
  sideEffects: boolean,
): void {
  const destination = egressDestination(source);
  const method = sideEffects ? 'POST' : 'GET';
  if (egressAllowed(allowlist, destination, method)) return;
  const stdio = source.transport === 'stdio';
  const how = stdio || method === 'GET' ? '' : ' with POST (the tool is side-effecting)';
  throw toolRefusal('egress_denied', `egress to the source ${source.name}${how} is not on the allowlist`, {
    destination: stdio ? destination : new URL(destination).origin,
    tool,
    ...(stdio || method === 'GET' ? {} : { method }),
  });
}

/**
 * Whether a `tools/call` that failed may have reached the server and acted: not when the server answered
 * (a JSON-RPC error, an answer too large, an HTTP 4xx: not processed), nor when no connection was made;
 * yes when it timed out, lost its connection or stream, or got a 5xx or an answer that is not MCP's.
 */
function mayHaveActed(e: unknown, session: Session): boolean {
  if (e instanceof ServiceError || session.tooLarge || isPrivateRefusal(e)) return false;
  if (e instanceof McpError) return e.code === ErrorCode.RequestTimeout || e.code === ErrorCode.ConnectionClosed;
  if (e instanceof StreamableHTTPError) return e.code === undefined || e.code < 400 || e.code >= 500;
  return !neverSent(e);
}

/** The request's `_meta`: what the caller adds, and the call's effect key under its own name (never the caller's value for it). */
export function callMeta(effectKey: string | undefined, extra: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  const rest: Record<string, unknown> = { ...extra };
  delete rest[EFFECT_KEY_META];
  if (effectKey !== undefined) rest[EFFECT_KEY_META] = effectKey;
  return Object.keys(rest).length > 0 ? rest : undefined;
}

/** One call on `session` (see the header, 2 and 3). */
export interface PinnedCall {
  /** The catalog's name of the tool (`mcp.<source>.<tool>`), for refusals. */
  name: string;
  /** The server's name of the tool. */
  tool: string;
  source: Pick<SourceEndpoint, 'name' | 'timeout_ms'>;
  /** The pin the live definition must have. */
  pin: string;
  args: Record<string, unknown>;
  /** The request's `_meta` (`callMeta`). */
  meta: Record<string, unknown> | undefined;
  /** A side-effecting call not declared idempotent: once sent, a call without an answer has an unknown outcome. */
  lossy: boolean;
  /** How old the server's list may be, and now. */
  maxAgeMs: number;
  now: number;
  signal: AbortSignal | undefined;
  /** Called before an `outcome_unknown` is thrown: the session is no longer trusted. */
  onLost(session: Session): void;
}

/** Checks the live definition against the pin, then calls the tool; its result as JSON. */
export async function callPinned(session: Session, c: PinnedCall): Promise<JsonObject> {
  const listing = await session.live(c.maxAgeMs, c.now, c.source.timeout_ms);
  const live = listing.tools.get(c.tool);
  if (live?.pin !== c.pin) {
    throw toolRefusal('tool_definition_changed', `the server's definition of ${c.name} is not the one pinned`, {
      tool: c.name,
      source: c.source.name,
      pinned: c.pin,
      live: live?.pin ?? null,
    });
  }
  let result;
  // Not the caller's signal itself: the SDK would keep its listener on it after the call (requestSignal).
  const bound = requestSignal(c.signal);
  try {
    result = await session.client.callTool(
      { name: c.tool, arguments: c.args, ...(c.meta !== undefined ? { _meta: c.meta } : {}) },
      undefined,
      { timeout: c.source.timeout_ms, ...(bound.signal ? { signal: bound.signal } : {}) },
    );
  } catch (e) {
    if (!c.lossy || c.signal?.aborted || !mayHaveActed(e, session)) throw e;
    c.onLost(session);
    throw new ServiceError('service_unavailable', `the call of ${c.name} was sent and got no answer: its outcome is unknown`, {
      details: { reason: 'outcome_unknown', source: c.source.name, tool: c.name },
    });
  } finally {
    bound.release();
  }
  // The SDK validated the result's shape (CallToolResultSchema): JSON as the server sent it.
  const out: JsonObject = { content: (result.content ?? []) as JsonObject['content'] };
  if (result.structuredContent !== undefined) out['structuredContent'] = result.structuredContent as JsonObject;
  if (result.isError === true) out['isError'] = true;
  return out;
}

/** An SDK or network failure as the envelope's error (refusals pass as they are). */
export function callFailure(e: unknown, source: { name: string }, session: Session | undefined, signal: AbortSignal | undefined): unknown {
  if (e instanceof ServiceError) return e;
  if (signal?.aborted)
    return new ServiceError('service_unavailable', 'the call was stopped before the server answered', { details: { reason: 'cancelled' } });
  if (session?.tooLarge)
    return new ServiceError('service_unavailable', `the server of ${source.name} answered with more than the cell reads`, {
      details: { reason: 'tool_result_too_large', source: source.name },
    });
  if (e instanceof StdioNotConfigured)
    return new ServiceError('service_unavailable', e.message, { details: { reason: 'source_not_configured', source: source.name } });
  if (isPrivateRefusal(e))
    return toolRefusal('egress_private_address', 'egress to a loopback, private or link-local address is refused', { source: source.name });
  if (e instanceof McpError) {
    if (e.code === ErrorCode.InvalidParams)
      return invalid(`the server of ${source.name} refused the arguments: ${e.message.slice(0, 300)}`, { reason: 'tool_bad_arguments' });
    if (e.code === ErrorCode.RequestTimeout || e.code === ErrorCode.ConnectionClosed)
      return new ServiceError('service_unavailable', `the server of ${source.name} did not answer`, {
        details: { reason: 'tool_unreachable', source: source.name },
        retryable: true,
      });
    return new ServiceError('service_unavailable', `the server of ${source.name} answered with an error (${e.code})`, {
      details: { reason: 'tool_error', source: source.name, mcp_code: e.code },
    });
  }
  const status = e instanceof StreamableHTTPError ? e.code : undefined;
  return new ServiceError('service_unavailable', `the server of ${source.name} could not be reached`, {
    details: { reason: 'tool_unreachable', source: source.name, ...(status !== undefined ? { status } : {}) },
    retryable: true,
  });
}
