/**
 * A call of an imported tool (`mcp.<source>.<tool>`), after the engine's
 * floor (grant, value gate, permission mode) has let it through:
 *
 * 1. egress: the server's origin must be on the seat's `egress_allowlist`
 *    (`mcp:<source>` or `*` for a stdio source), as for http.get
 *    (`egress_denied`); the URL passes the network floor and the posture
 *    again (cell/tools/sources/floor.ts);
 * 2. the identity of the call (./identity.ts) and the session opened for it;
 * 3. the pin: the server's live definition of the tool (its list, read again
 *    once `definition_max_age_ms` old) must be the one the run's graph pinned
 *    (or, outside a graph, the catalog's pin): else the call is refused,
 *    `tool_definition_changed`, naming the tool, the pinned and the live hash;
 * 4. `tools/call`, with the call's `_meta` when given (the effect key goes
 *    there), the step's signal and the source's timeout.
 *
 * The answer is the server's result (`content`, `structuredContent`,
 * `isError`), with `identity` (who the server saw) and, for a delegated
 * token, `on_behalf` (its id and hash) for the journal.
 */
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ServiceError, invalid } from '../../../core/errors.ts';
import type { JsonObject } from '../../../core/journal/record.ts';
import { egressAllowed } from '../egress.ts';
import { isPrivateRefusal } from '../ssrf.ts';
import { toolRefusal, type ToolCaller } from '../catalog.ts';
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
  /** The MCP request's `_meta` (e.g. an effect key). */
  meta?: Record<string, unknown> | undefined;
}

/** Where a call of the source goes, as an egress allowlist names it: the server's URL, or `mcp:<source>` for stdio. */
export function egressDestination(source: SourceRow): string {
  return source.transport === 'stdio' ? `mcp:${source.name}` : source.url!;
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
  const destination = egressDestination(source);
  if (!egressAllowed(caller.authority.egress_allowlist, destination)) {
    throw toolRefusal('egress_denied', `egress to the source ${source.name} is not on the allowlist`, {
      destination: source.transport === 'stdio' ? destination : new URL(destination).origin,
      tool: tool.name,
    });
  }
  if (source.url !== null) assertSourceUrl(ctx.core.config, source.url);
  const expected = opts.pin ?? pin.pin;
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
      return session.client.callTool(
        { name: pin.tool, arguments: args, ...(opts.meta !== undefined ? { _meta: opts.meta } : {}) },
        undefined,
        { timeout: source.timeout_ms, ...(signal ? { signal } : {}) },
      );
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
