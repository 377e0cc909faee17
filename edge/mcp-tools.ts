/**
 * The imported (MCP) tools of a device's catalog: the stdio MCP servers the
 * device's operator names (`edge serve --tool-sources FILE`, the cell's file
 * format: runtime/mcp-client/config.ts), started by the edge, and the catalog
 * entries and pins the crew bundle carries (`mcp_tools`,
 * bundles/crew-bundle.ts). A tool is offered to a model as the bundle
 * describes it (its pinned definition: description, input schema, side
 * effects and idempotency from its annotations), never as the server says
 * now, and a call is made as the cell makes it (runtime/mcp-client/call.ts):
 * the seat's egress allowlist must name `mcp:<source>`; the server's live
 * definition must hash to the graph's pin (`tool_definition_changed`); a
 * side-effecting call carries its effect key in `_meta`, and one sent without
 * an answer fails `outcome_unknown` (the engine's crash rule). A device has
 * no OAuth server and a stdio server takes no credential: the journal records
 * `identity: { kind: "none" }`, as the cell records for a stdio source.
 *
 * Before a run starts (`unhonoured`), every imported tool the crew can call
 * must be honourable here: carried by the bundle, its source configured on
 * this device, and the source's server listing a definition whose hash is
 * the bundle's pin; else the run is refused `device_tools_unavailable`,
 * naming each tool, seat and why (edge/offline.ts).
 */
import type { CrewMcpTool } from '../bundles/crew-bundle.ts';
import { toolAuthorityOf, toolFailureAnswer } from '../core/catalog/builtin.ts';
import { pinnedDescriptor } from '../core/catalog/pin.ts';
import { graphToolUses } from '../core/compiler/compile.ts';
import { EngineRefusal } from '../core/engine/refusal.ts';
import type { Graph, ToolCallContext, ToolDescriptor } from '../core/engine/types.ts';
import type { JsonObject } from '../core/journal/record.ts';
import { ServiceError } from '../core/errors.ts';
import type { Logger } from '../runtime/log.ts';
import { assertCallEgress, callFailure, callMeta, callPinned } from '../runtime/mcp-client/call.ts';
import type { StdioSourceConfig } from '../runtime/mcp-client/config.ts';
import { Connections, type Session, type SourceEndpoint } from '../runtime/mcp-client/connect.ts';
import { guardedDispatcher } from '../runtime/ssrf.ts';
import { stepDeadline } from '../runtime/step-deadline.ts';
import type { UnhonouredTool } from './tools.ts';

/** What a stdio server the device configures is, for a connection. */
interface DeviceSource {
  endpoint: SourceEndpoint;
  config: StdioSourceConfig;
}

/** The device's imported tools, for one crew bundle. */
export interface DeviceMcpTools {
  /** The bundle's entry as the engine sees it, or undefined when the bundle carries no such tool. */
  describe(name: string): ToolDescriptor | undefined;
  /** Calls an imported tool for a step (see the header). */
  call(name: string, args: JsonObject, call: ToolCallContext): Promise<unknown>;
  /** The imported tools of `graph` this device cannot honour now, and why (by seat, then tool). */
  unhonoured(graph: Graph): Promise<UnhonouredTool[]>;
  /** Opens a session with every configured server (they start), so a first run does not wait for them. */
  warm(): void;
  /** Stops every server this device started. */
  close(): Promise<void>;
}

/** The device's imported tools over the configured `sources` and the bundle's `tools`. */
export function deviceMcpTools(opts: {
  sources: readonly StdioSourceConfig[];
  tools: readonly CrewMcpTool[];
  clock: { now(): number };
  log: Logger;
}): DeviceMcpTools {
  const sources = new Map<string, DeviceSource>(
    opts.sources.map((c) => [
      c.name,
      {
        config: c,
        endpoint: { source_id: `src_${c.name}`, name: c.name, transport: 'stdio', url: null, timeout_ms: c.timeout_ms, updated_at: 0 },
      },
    ]),
  );
  const entries = new Map(opts.tools.map((t) => [t.name, { entry: t, descriptor: pinnedDescriptor(t.name, t.definition) }]));
  const connections = new Connections({
    // Stdio only: no request leaves over the network, but the connections take the device's floor all the same.
    dispatcher: guardedDispatcher([]),
    log: opts.log,
    stdio: (name) => {
      const c = sources.get(name)?.config;
      return c && { command: c.command, args: c.args, env: c.env, cwd: c.cwd };
    },
  });

  /** Runs `fn` on the source's session; a failed session is closed (the next call starts the server again). */
  async function withSession<T>(s: DeviceSource, signal: AbortSignal | undefined, fn: (x: Session) => Promise<T>): Promise<T> {
    let session: Session | undefined;
    try {
      session = await connections.session(s.endpoint, '');
      if (session.closed) throw new Error('the session closed');
      return await fn(session);
    } catch (e) {
      // A call the caller stopped leaves a working session (the SDK told the server of the cancellation on it).
      if (session !== undefined && !(e instanceof ServiceError) && !signal?.aborted) connections.discard(session);
      throw callFailure(e, s.endpoint, session, signal);
    }
  }

  /** Why the device cannot honour `tool` now, or null. */
  async function why(tool: string): Promise<string | null> {
    const e = entries.get(tool)?.entry;
    // A tool the bundle does not carry is outside the device's catalog: unhonouredTools (./tools.ts) names it.
    if (e === undefined) return null;
    const s = sources.get(e.source);
    if (s === undefined) return `the source ${e.source} is not configured on this device (edge serve --tool-sources)`;
    try {
      const listing = await withSession(s, undefined, (x) => x.live(s.config.definition_max_age_ms, opts.clock.now(), s.config.timeout_ms));
      const live = listing.tools.get(e.tool);
      if (live === undefined) return `the server of ${e.source} does not list ${e.tool}`;
      if (live.pin !== e.pin) return `the server's definition does not hash to the bundle's pin (pinned ${e.pin}, live ${live.pin})`;
      return null;
    } catch (err) {
      return `the server of ${e.source} could not be read: ${err instanceof Error ? err.message : String(err)}`;
    }
  }

  return {
    describe: (name) => entries.get(name)?.descriptor,

    async call(name, args, call) {
      const found = entries.get(name);
      if (found === undefined) throw new EngineRefusal('tool_unknown', `the crew bundle carries no tool ${name}`, { tool: name });
      const { entry, descriptor } = found;
      const s = sources.get(entry.source);
      if (s === undefined)
        throw new EngineRefusal('tool_unknown', `the source ${entry.source} is not configured on this device`, { tool: name });
      const deadline = stepDeadline(call.timeout_ms);
      try {
        assertCallEgress(toolAuthorityOf(call.authority).egress_allowlist, s.endpoint, name, descriptor.side_effects);
        const out = await deadline.race(
          withSession(s, deadline.signal, (session) =>
            callPinned(session, {
              name,
              tool: entry.tool,
              source: s.endpoint,
              // The graph's pin (the bundle's entry carries the same: bundles/crew-bundle.ts checks it).
              pin: call.tool_pin ?? entry.pin,
              args,
              meta: callMeta(call.effect_key, undefined),
              lossy: descriptor.side_effects && descriptor.idempotent !== true,
              maxAgeMs: s.config.definition_max_age_ms,
              now: opts.clock.now(),
              signal: deadline.signal,
              onLost: (x) => connections.discard(x),
            }),
          ),
        );
        out['identity'] = { kind: 'none' };
        return out;
      } catch (e) {
        return toolFailureAnswer(e);
      } finally {
        // The egress check may refuse the call before the race (which releases it) began.
        deadline.release();
      }
    },

    async unhonoured(graph) {
      const out: UnhonouredTool[] = [];
      const seen = new Map<string, Promise<string | null>>();
      for (const { tool, seat } of graphToolUses(graph.nodes, graph.seats)) {
        if (!tool.startsWith('mcp.')) continue;
        if (!seen.has(tool)) seen.set(tool, why(tool));
        const w = await seen.get(tool)!;
        if (w !== null) out.push({ tool, seat, why: w });
      }
      return out;
    },

    warm() {
      for (const s of sources.values()) {
        withSession(s, undefined, (x) => x.live(0, opts.clock.now(), s.config.timeout_ms)).catch((e: unknown) =>
          opts.log.warn('tools: a configured stdio source did not start', { source: s.config.name, error: e }),
        );
      }
    },

    close: () => connections.closeAll(),
  };
}
