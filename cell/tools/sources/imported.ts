/**
 * The catalog's imported tools, held in memory: every source and every pin,
 * read from the store at start and read again whenever `tool_sources` or
 * `tool_pins` change (this cell's writes at once, the group's others when
 * their change notification arrives). The catalog is asked synchronously
 * (the engine's `describe`, the authoring checks of `allowed_tools`), so it
 * answers from this copy; what it answers for a tool is the pinned
 * definition, never what a server says now.
 */
import { pinnedDescriptor } from '../../../core/catalog/pin.ts';
import type { ToolDescriptor } from '../../../core/engine/types.ts';
import type { Logger } from '../../context.ts';
import type { Store } from '../../store/types.ts';
import { allSourcesAndPins } from './repository.ts';
import type { PinRow, SourceRow } from './types.ts';

/** An imported tool as the catalog knows it. */
export interface ImportedTool {
  name: string;
  source: SourceRow;
  pin: PinRow;
  descriptor: ToolDescriptor;
}

const TABLES = ['tool_sources', 'tool_pins'];

/** The engine's view of a pin (core/catalog/pin.ts `pinnedDescriptor`, shared with a device's catalog). */
export function descriptorOf(p: PinRow): ToolDescriptor {
  return pinnedDescriptor(p.name, p.definition);
}

export class ImportedCatalog {
  #byName = new Map<string, ImportedTool>();
  #sources = new Map<string, SourceRow>();
  #pins: Record<string, string> = {};
  #started = 0;
  /** Changes each time a new copy is taken (the tool registry's view is rebuilt then). */
  version = 0;
  readonly #unsubscribe: () => void;

  constructor(
    private readonly store: Store,
    log: Logger,
  ) {
    this.#unsubscribe = store.onChange((c) => {
      if (c.gap === 'lost') return;
      if (c.gap === 'resumed' || TABLES.some((t) => c.tables.has(t)))
        this.reload().catch((e: unknown) => log.warn('tools: the imported catalog could not be read again', { error: e }));
    });
  }

  /** Reads every source and pin again; an older read finishing after a newer one is dropped. */
  async reload(): Promise<void> {
    const mine = ++this.#started;
    const { sources, pins } = await allSourcesAndPins(this.store);
    if (mine !== this.#started) return;
    const bySource = new Map(sources.map((s) => [s.source_id, s]));
    const byName = new Map<string, ImportedTool>();
    const pinMap: Record<string, string> = {};
    for (const p of pins) {
      const source = bySource.get(p.source_id);
      if (source === undefined) continue;
      byName.set(p.name, { name: p.name, source, pin: p, descriptor: descriptorOf(p) });
      pinMap[p.name] = p.pin;
    }
    this.#byName = byName;
    this.#sources = bySource;
    this.#pins = pinMap;
    this.version++;
  }

  get(name: string): ImportedTool | undefined {
    return this.#byName.get(name);
  }

  /** Every imported tool, by catalog name. */
  tools(): ImportedTool[] {
    return [...this.#byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** The source, as last read. */
  source(sourceId: string): SourceRow | undefined {
    return this.#sources.get(sourceId);
  }

  /** `{ tool: pin }` of every imported tool (the compiler takes those of the tools a graph calls). */
  pins(): Readonly<Record<string, string>> {
    return this.#pins;
  }

  close(): void {
    this.#unsubscribe();
  }
}
