/**
 * The tools module's API, as the other modules use it: describe a catalog
 * tool (the engine's tools port, the authoring checks of skills and
 * authority envelopes), run one for a caller, the catalog's public view, and
 * the pins of its imported tools (the compiler puts those a graph calls into
 * the graph). Agent Teams' crew ports and Jobs' `single` runs both call tools
 * through it. The catalog is the built-in tools (catalog.ts) and the tools
 * imported from its sources (sources/: MCP servers, docs/tools.md).
 *
 * This is the module's face (docs/architecture.md, "Faces"): another module of
 * cell/ imports it only from here.
 */
import { invalid } from '../../core/errors.ts';
import type { PinnedDefinition } from '../../core/catalog/pin.ts';
import type { ToolDescriptor } from '../../core/engine/types.ts';
import type { Reader } from '../store/types.ts';
import { catalogEntry, toolRegistryView, type ToolCaller, type ToolRegistryEntry, type ToolsContext } from './catalog.ts';
import { callImported, type ImportedCallOptions } from './mcp/call.ts';
import type { SourceSecrets, SourcesContext, ToolReachHook, ToolUsersHook } from './sources/context.ts';
import { sourcesUsingSecret } from './sources/repository.ts';

export type { ImportedCallOptions, SourceSecrets, ToolCaller, ToolReachHook, ToolUsersHook };

/**
 * The network floor of every fetch the cell makes for someone else (runtime/ssrf.ts, shared with a device's HTTP tools): an undici dispatcher
 * whose connections refuse non-public addresses outside `--egress-allow-private`. The OAuth module
 * fetches client ID metadata documents through one of its own.
 */
export { guardedDispatcher, PrivateDestinationError } from '../../runtime/ssrf.ts';

export class Tools {
  #registry: ToolRegistryEntry[] | undefined;
  #registryJson: string | undefined;
  #registryVersion = -1;
  constructor(
    private readonly ctx: ToolsContext,
    private readonly sources: SourcesContext,
  ) {}

  /** The catalog entry as the engine sees it (an imported tool: its pinned definition), or undefined when there is no such tool. */
  describe(name: string): ToolDescriptor | undefined {
    const t = catalogEntry(name);
    if (t) {
      return {
        name: t.name,
        description: t.description,
        side_effects: t.side_effects,
        ...(t.idempotent !== undefined ? { idempotent: t.idempotent } : {}),
        parameters: t.parameters,
      };
    }
    return this.sources.imported.get(name)?.descriptor;
  }

  /** True when the catalog has a tool of this name. */
  has(name: string): boolean {
    return catalogEntry(name) !== undefined || this.sources.imported.get(name) !== undefined;
  }

  /**
   * Runs a tool for `caller`. The security floor's refusals leave as
   * ServiceError `forbidden` (details.reason: egress_denied,
   * egress_private_address, data_not_granted, clearance_insufficient,
   * compartment_not_granted; for an imported tool also tool_definition_changed),
   * bad arguments as `invalid_request`, an unknown tool as `invalid_request`
   * with reason `tool_unknown`. `signal` stops the call (a tool that waits on
   * something outside aborts it; reason `cancelled`). `opts` (imported tools):
   * the graph's pin of the tool, and more of the MCP request's `_meta` (the
   * caller's `effectKey` goes there as `dev.agent-cell/effect-key`).
   */
  run(name: string, caller: ToolCaller, args: Record<string, unknown>, signal?: AbortSignal, opts?: ImportedCallOptions): Promise<unknown> {
    const t = catalogEntry(name);
    if (t) return t.run(this.ctx, caller, args, signal);
    const imported = this.sources.imported.get(name);
    if (imported) return callImported(this.sources, imported, caller, args, signal, opts);
    return Promise.reject(invalid(`no tool named ${name} in the catalog`, { reason: 'tool_unknown' }));
  }

  /** `{ tool: pin }` of every imported tool: the compiler keeps those of the tools a graph calls. */
  pins(): Readonly<Record<string, string>> {
    return this.sources.imported.pins();
  }

  /**
   * The catalog entry of an imported tool as a crew bundle carries it (bundles/crew-bundle.ts `CrewMcpTool`):
   * its source's name, the server's name of the tool, the pin and the pinned definition; undefined when the
   * catalog has no imported tool of that name.
   */
  pinnedTool(name: string): { name: string; source: string; tool: string; pin: string; definition: PinnedDefinition } | undefined {
    const t = this.sources.imported.get(name);
    return t && { name: t.name, source: t.source.name, tool: t.pin.tool, pin: t.pin.pin, definition: t.pin.definition };
  }

  /** The catalog's public view (GET /admin/ai/tool-registry), built again when the imported tools change. Never mutate it. */
  registry(): ToolRegistryEntry[] {
    const v = this.sources.imported.version;
    if (this.#registry === undefined || this.#registryVersion !== v) {
      this.#registry = [
        ...toolRegistryView(),
        ...this.sources.imported.tools().map((t) => ({
          name: t.name,
          description: t.descriptor.description,
          side_effects: t.descriptor.side_effects,
          read_only: !t.descriptor.side_effects,
          idempotent: t.descriptor.idempotent ?? false,
          parameters: t.descriptor.parameters,
          source: t.source.name,
          pin: t.pin.pin,
        })),
      ];
      this.#registryJson = undefined;
      this.#registryVersion = v;
    }
    return this.#registry;
  }

  /** The whole catalog as a JSON array, serialised once per version (the body of a tool-registry page that holds every tool). */
  registryJson(): string {
    const all = this.registry();
    this.#registryJson ??= JSON.stringify(all);
    return this.#registryJson;
  }

  /** Lends the stored secrets (the AI module, once): a source's client credentials are one. */
  useSecrets(secrets: SourceSecrets): void {
    if (this.sources.secrets !== undefined) throw new TypeError('the stored secrets are lent by one module');
    this.sources.secrets = secrets;
  }

  /** Registers another module's users of catalog tools: a source whose tools they name is not deleted, nor a pin removed (409 in_use). */
  onToolUsers(hook: ToolUsersHook): void {
    this.sources.userHooks.push(hook);
  }

  /** Registers another module's agents granted catalog tools: a change of a source or a pin must cover them. */
  onToolReach(hook: ToolReachHook): void {
    this.sources.reachHooks.push(hook);
  }

  /** The sources whose client credentials send the stored secret (it is not deleted while one does). */
  sourcesUsingSecret(db: Reader, secretId: string): Promise<string[]> {
    return sourcesUsingSecret(db, secretId);
  }
}
