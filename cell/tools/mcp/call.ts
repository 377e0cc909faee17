/**
 * A call of an imported tool (`mcp.<source>.<tool>`), after the engine's
 * floor (grant, value gate, permission mode) has let it through:
 *
 * 1. egress (`egress_denied`): the seat's `egress_allowlist` must allow
 *    the call. A read-only tool reads: an entry for the server's origin
 *    that allows GET (any entry without methods, as for http.get) is
 *    enough. A side-effecting tool writes: the entry must name POST, the
 *    method every MCP request travels with (`POST:<origin>`, `*:<origin>`,
 *    `*:*`), so an allowlist written for reading (or before methods
 *    existed) lets no MCP call act. A stdio source is named `mcp:<source>`
 *    (`mcp:*`, `*`), an entry that exists only for MCP and reaches all of
 *    the source's tools (named destinations take no methods,
 *    core/authority/egress-entry.ts). The URL passes the network floor and
 *    the posture again (./floor.ts);
 * 2. the identity of the call (./identity.ts) and the session opened for it;
 * 3. the pin: the server's live definition of the tool (its list, read again
 *    once `definition_max_age_ms` old) must be the one the run's graph pinned
 *    (or, outside a graph, the catalog's pin): else the call is refused,
 *    `tool_definition_changed`, naming the tool, the pinned and the live hash;
 * 4. `tools/call`, with the step's signal and the source's timeout, and in its
 *    `_meta` the call's effect key (`dev.agent-cell/effect-key`, the caller's
 *    `effectKey`: the engine's key of a side-effecting call, the same on
 *    every issue of the call, so a server that keeps keys applies it once)
 *    beside what the caller adds.
 *
 * The answer is the server's result (`content`, `structuredContent`,
 * `isError`), with `identity` (who the server saw) and, for a delegated
 * token, `on_behalf` (its id and hash) for the journal.
 */
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ServiceError, invalid } from '../../../core/errors.ts';
import { EFFECT_KEY_META } from '../../../core/engine/effect-key.ts';
import type { JsonObject } from '../../../core/journal/record.ts';
import { egressAllowed } from '../../../core/authority/egress.ts';
import { isPrivateRefusal } from '../../../runtime/ssrf.ts';
import { toolRefusal, type ToolCaller } from '../catalog.ts';
import { neverSent } from '../../../runtime/http-call.ts';
import { StdioNotConfigured, withCredentials, type Session } from './connect.ts';
import type { SourcesContext } from '../sources/context.ts';
import { assertSourceUrl } from './floor.ts';
import { callIdentity } from './identity.ts';
import type { ImportedTool } from '../sources/imported.ts';
import type { SourceRow } from '../sources/types.ts';

/** What a caller may add to one call. */
export interface ImportedCallOptions {
  /** The graph's pin of the tool; absent: the catalog's (a `single` job). */
  pin?: string | undefined;
  /** More of the MCP request's `_meta`; the effect key is the caller's (`ToolCaller.effectKey`), never taken from here. */
  meta?: Record<string, unknown> | undefined;
}

/** Where a call of the source goes, as an egress allowlist names it: the server's URL, or `mcp:<source>` for stdio. */
export function egressDestination(source: SourceRow): string {
  return source.transport === 'stdio' ? `mcp:${source.name}` : source.url!;
}

/**
 * Refuses a call the caller's egress allowlist does not allow (see the header): a side-effecting tool of an
 * HTTP source needs an entry allowing POST to the server's origin, a read-only one an entry allowing GET.
 */
function assertCallEgress(tool: ImportedTool, caller: ToolCaller): void {
  const { source } = tool;
  const destination = egressDestination(source);
  const method = tool.descriptor.side_effects ? 'POST' : 'GET';
  if (egressAllowed(caller.authority.egress_allowlist, destination, method)) return;
  const stdio = source.transport === 'stdio';
  const how = stdio || method === 'GET' ? '' : ' with POST (the tool is side-effecting)';
  throw toolRefusal('egress_denied', `egress to the source ${source.name}${how} is not on the allowlist`, {
    destination: stdio ? destination : new URL(destination).origin,
    tool: tool.name,
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
function callMeta(caller: ToolCaller, extra: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  const rest: Record<string, unknown> = { ...extra };
  delete rest[EFFECT_KEY_META];
  if (caller.effectKey !== undefined) rest[EFFECT_KEY_META] = caller.effectKey;
  return Object.keys(rest).length > 0 ? rest : undefined;
}

/** Runs an imported tool for `caller` (see the header). */
export async function callImported(
  ctx: SourcesContext,
  tool: ImportedTool,
  caller: ToolCaller,
  args: Record<string, unknown>,
  signal: AbortSignal | undefined,
  opts: ImportedCallOptions = {},
): Promise<unknown> {
  const { source, pin } = tool;
  assertCallEgress(tool, caller);
  if (source.url !== null) assertSourceUrl(ctx.core.config, source.url);
  // A side-effecting call that may not be issued again: once sent, a call without an answer has an unknown outcome.
  const lossy = tool.descriptor.side_effects && tool.descriptor.idempotent !== true;
  const expected = opts.pin ?? pin.pin;
  const meta = callMeta(caller, opts.meta);
  const identity = await callIdentity(ctx, source, tool.name, caller);
  const result = await withCredentials(identity.credentials, () =>
    withSession(ctx, source, identity.key, signal, async (session) => {
      const listing = await session.live(source.definition_max_age_ms, ctx.core.clock.now(), source.timeout_ms);
      const live = listing.tools.get(pin.tool);
      if (live?.pin !== expected) {
        throw toolRefusal('tool_definition_changed', `the server's definition of ${tool.name} is not the one pinned`, {
          tool: tool.name,
          source: source.name,
          pinned: expected,
          live: live?.pin ?? null,
        });
      }
      try {
        return await session.client.callTool(
          { name: pin.tool, arguments: args, ...(meta !== undefined ? { _meta: meta } : {}) },
          undefined,
          { timeout: source.timeout_ms, ...(signal ? { signal } : {}) },
        );
      } catch (e) {
        if (!lossy || signal?.aborted || !mayHaveActed(e, session)) throw e;
        ctx.connections.discard(session);
        throw new ServiceError('service_unavailable', `the call of ${tool.name} was sent and got no answer: its outcome is unknown`, {
          details: { reason: 'outcome_unknown', source: source.name, tool: tool.name },
        });
      }
    }),
  );
  // The SDK validated the result's shape (CallToolResultSchema): JSON as the server sent it.
  const out: JsonObject = { content: result.content ?? [] };
  if (result.structuredContent !== undefined) out['structuredContent'] = result.structuredContent;
  if (result.isError === true) out['isError'] = true;
  out['identity'] = identity.record;
  if (identity.onBehalf) out['on_behalf'] = identity.onBehalf;
  return out;
}

/**
 * Runs `fn` on the session of `source` for this identity, opening it when needed. A session the server
 * no longer knows (HTTP 404: its sessions were lost, nothing was processed) is opened again once.
 */
export async function withSession<T>(
  ctx: SourcesContext,
  source: SourceRow,
  identity: string,
  signal: AbortSignal | undefined,
  fn: (s: Session) => Promise<T>,
): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    let session: Session | undefined;
    try {
      session = await ctx.connections.session(source, identity);
      if (session.closed) throw new StreamableHTTPError(404, 'session closed');
      return await fn(session);
    } catch (e) {
      if (session !== undefined && !(e instanceof ServiceError)) ctx.connections.discard(session);
      const lost = e instanceof StreamableHTTPError && e.code === 404;
      if (lost && attempt === 0 && !signal?.aborted) continue;
      throw callFailure(e, source, session, signal);
    }
  }
}

/** An SDK or network failure as the envelope's error (refusals pass as they are). */
export function callFailure(e: unknown, source: SourceRow, session: Session | undefined, signal: AbortSignal | undefined): unknown {
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
