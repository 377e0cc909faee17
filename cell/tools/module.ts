/**
 * The tools module: the governed tool catalog (cell/tools/catalog.ts) and
 * the kv tools' workspace storage. It has no routes of its own (the AI
 * module serves the catalog's view); other modules call tools through its
 * API (`tools`). It owns the network floor's dispatcher and closes it on stop.
 */
import type { CellCore } from '../context.ts';
import type { CellModule } from '../module.ts';
import { guardedDispatcher } from './ssrf.ts';
import type { ToolsContext } from './catalog.ts';
import { Tools } from './api.ts';

export interface ToolsModule extends CellModule {
  tools: Tools;
}

export async function createToolsModule(core: CellCore, deps: { delegation?: ToolsContext['delegation'] } = {}): Promise<ToolsModule> {
  const dispatcher = guardedDispatcher(core.config.egressAllowPrivate);
  const tools = new Tools({
    store: core.store,
    clock: core.clock,
    allowPrivate: core.config.egressAllowPrivate,
    dispatcher,
    ...(deps.delegation ? { delegation: deps.delegation } : {}),
  });
  return {
    name: 'tools',
    tools,
    async stop() {
      await dispatcher.close();
    },
  };
}
