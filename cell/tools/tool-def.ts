/**
 * What a catalog tool is, and what it is given: the contract every tool of
 * the governed catalog implements (`ToolDef`), the module's context it runs
 * in (`ToolsContext`: store, clock, the network floor, delegation), who calls
 * it (`ToolCaller`), and the helpers tools share for their refusals and
 * arguments. The catalog (catalog.ts) lists the tools; tools with a file of
 * their own (http-request.ts) import this, not the catalog.
 */
import type { HttpToolsContext } from '../../runtime/http-call.ts';
import type { ArgumentIn } from '../../core/engine/types.ts';
import type { JsonObject } from '../../core/journal/record.ts';
import type { Clock } from '../context.ts';
import type { ToolDelegation, ToolDelegationRequest } from '../oauth/api.ts';
import type { Store } from '../store/types.ts';
import type { ToolAuthority } from '../../core/catalog/builtin.ts';

// The floor's helpers and the authority slice are core's (core/catalog/builtin.ts), shared with a device's tools.
export { stringArg, toolRefusal, type ToolAuthority } from '../../core/catalog/builtin.ts';

/** What the tools module gives every tool: its store, the cell clock, and the network floor and delegation (runtime/http-call.ts). */
export interface ToolsContext extends HttpToolsContext {
  store: Store;
  clock: Clock;
  delegation?: ((req: ToolDelegationRequest) => Promise<ToolDelegation | null>) | undefined;
}

/** Who calls a tool, where, and with what authority. */
export interface ToolCaller {
  workspaceId: string;
  /** Principal id of the calling agent (or the requester of a `single` job). */
  agentId: string;
  authority: ToolAuthority;
  /** The run this call is part of and whom it acts for: a call to a protected resource carries a token for them. */
  onBehalf?: { requester: string; runId: string; crewId?: string };
  /**
   * The call's effect key (core/engine/effect-key.ts), the same on every issue of this call: a tool
   * that acts on another system passes it on (http.request: `Idempotency-Key` on a write method; an
   * imported MCP tool: its request's `_meta["dev.agent-cell/effect-key"]`).
   */
  effectKey?: string;
}

export interface ToolDef {
  name: string;
  description: string;
  side_effects: boolean;
  /**
   * Which calls may be issued again with their effect key when their outcome was lost in a crash
   * (core/engine/types.ts ToolDescriptor.idempotent); absent: none, the run waits `outcome_unknown`.
   */
  idempotent?: boolean | ArgumentIn;
  /** JSON Schema of the arguments (sent to the model as a function). */
  parameters: JsonObject;
  /**
   * Runs the tool. `signal` stops the call (a step's timeout, a cancel of the run): a tool that waits
   * on something outside (http.get) aborts it and fails with reason `cancelled`; the others are instant.
   */
  run(ctx: ToolsContext, caller: ToolCaller, args: Record<string, unknown>, signal?: AbortSignal): Promise<unknown>;
}
