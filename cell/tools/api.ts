/**
 * The tools module's API, as the other modules use it: describe a catalog
 * tool (the engine's tools port, the authoring checks of skills and
 * authority envelopes), run one for a caller, and the catalog's public view.
 * Agent Teams' crew ports and Jobs' `single` runs both call tools through it.
 *
 * This is the module's face (docs/architecture.md, "Faces"): another module of
 * cell/ imports it only from here.
 */
import { invalid } from '../../core/errors.ts';
import type { ToolDescriptor } from '../../core/engine/types.ts';
import { catalogEntry, toolRegistryView, type ToolCaller, type ToolRegistryEntry, type ToolsContext } from './catalog.ts';

/**
 * The network floor of every fetch the cell makes for someone else (ssrf.ts): an undici dispatcher
 * whose connections refuse non-public addresses outside `--egress-allow-private`. The OAuth module
 * fetches client ID metadata documents through one of its own.
 */
export { guardedDispatcher, PrivateDestinationError } from './ssrf.ts';

export class Tools {
  #registry: ToolRegistryEntry[] | undefined;
  #registryJson: string | undefined;
  constructor(private readonly ctx: ToolsContext) {}

  /** The catalog entry as the engine sees it, or undefined when there is no such tool. */
  describe(name: string): ToolDescriptor | undefined {
    const t = catalogEntry(name);
    return t ? { name: t.name, description: t.description, side_effects: t.side_effects, parameters: t.parameters } : undefined;
  }

  /** True when the catalog has a tool of this name. */
  has(name: string): boolean {
    return catalogEntry(name) !== undefined;
  }

  /**
   * Runs a tool for `caller`. The security floor's refusals leave as
   * ServiceError `forbidden` (details.reason: egress_denied,
   * egress_private_address, data_not_granted, clearance_insufficient,
   * compartment_not_granted), bad arguments as `invalid_request`, an unknown
   * tool as `invalid_request` with reason `tool_unknown`. `signal` stops the
   * call (a tool that waits on something outside aborts it; reason `cancelled`).
   */
  run(name: string, caller: ToolCaller, args: Record<string, unknown>, signal?: AbortSignal): Promise<unknown> {
    const t = catalogEntry(name);
    if (!t) return Promise.reject(invalid(`no tool named ${name} in the catalog`, { reason: 'tool_unknown' }));
    return t.run(this.ctx, caller, args, signal);
  }

  /** The catalog's public view (GET /admin/ai/tool-registry); the catalog is static, so it is built once. Never mutate it. */
  registry(): ToolRegistryEntry[] {
    this.#registry ??= toolRegistryView();
    return this.#registry;
  }

  /** The whole catalog as a JSON array, serialised once (the body of a tool-registry page that holds every tool). */
  registryJson(): string {
    this.#registryJson ??= JSON.stringify(this.registry());
    return this.#registryJson;
  }
}
