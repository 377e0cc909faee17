/**
 * A call of an imported tool (`mcp.<source>.<tool>`), after the engine's
 * floor (grant, value gate, permission mode) has let it through. The call
 * itself is runtime/mcp-client/call.ts (shared with a device's catalog):
 * egress (`egress_denied`: `mcp:<source>` for stdio, POST to the server's
 * origin for a side-effecting tool of an HTTP source), the pin
 * (`tool_definition_changed`), the effect key in `_meta`, `outcome_unknown`.
 * Here, the cell's part:
 *
 * 1. the URL passes the network floor and the posture again (./floor.ts);
 * 2. the identity of the call (./identity.ts) and the pooled session opened
 *    for it (a session the server lost is opened again once);
 * 3. the pin expected is the one the run's graph pinned (or, outside a
 *    graph, the catalog's).
 *
 * The answer is the server's result (`content`, `structuredContent`,
 * `isError`), with `identity` (who the server saw) and, for a delegated
 * token, `on_behalf` (its id and hash) for the journal.
 */
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ServiceError } from '../../../core/errors.ts';
import type { ToolCaller } from '../catalog.ts';
import { assertCallEgress, callFailure, callMeta, callPinned } from '../../../runtime/mcp-client/call.ts';
import { withCredentials, type Session } from '../../../runtime/mcp-client/connect.ts';
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

export { egressDestination } from '../../../runtime/mcp-client/call.ts';

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
  assertCallEgress(caller.authority.egress_allowlist, source, tool.name, tool.descriptor.side_effects);
  if (source.url !== null) assertSourceUrl(ctx.core.config, source.url);
  const identity = await callIdentity(ctx, source, tool.name, caller);
  const out = await withCredentials(identity.credentials, () =>
    withSession(ctx, source, identity.key, signal, (session) =>
      callPinned(session, {
        name: tool.name,
        tool: pin.tool,
        source,
        pin: opts.pin ?? pin.pin,
        args,
        meta: callMeta(caller.effectKey, opts.meta),
        lossy: tool.descriptor.side_effects && tool.descriptor.idempotent !== true,
        maxAgeMs: source.definition_max_age_ms,
        now: ctx.core.clock.now(),
        signal,
        onLost: (s) => ctx.connections.discard(s),
      }),
    ),
  );
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
      // A call the caller stopped (its deadline, the run's cancel) leaves a working session: the SDK told the
      // server of the cancellation on it (notifications/cancelled), and the next call may use it.
      if (session !== undefined && !(e instanceof ServiceError) && !signal?.aborted) ctx.connections.discard(session);
      const lost = e instanceof StreamableHTTPError && e.code === 404;
      if (lost && attempt === 0 && !signal?.aborted) continue;
      throw callFailure(e, source, session, signal);
    }
  }
}
