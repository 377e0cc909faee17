/**
 * The tools module: the governed tool catalog (cell/tools/catalog.ts, the
 * built-in tools; cell/tools/sources/, the tools imported from MCP servers
 * and their pins), the kv tools' workspace storage, and the routes of the
 * catalog's sources (the AI module serves the catalog's view). Other modules
 * call tools through its API (`tools`). It owns the network floor's
 * dispatcher and the sessions with the sources' servers, and closes them on stop.
 */
import type { CellCore } from '../context.ts';
import type { Iam } from '../iam/api.ts';
import type { CellModule } from '../module.ts';
import { guardedDispatcher } from '../../runtime/ssrf.ts';
import type { ToolsContext } from './catalog.ts';
import { Tools } from './api.ts';
import { syncConfigSources } from './sources/config.ts';
import { Connections } from '../../runtime/mcp-client/connect.ts';
import type { SourcesContext } from './sources/context.ts';
import { ImportedCatalog } from './sources/imported.ts';
import { sourceRoutes } from './sources/routes.ts';

export interface ToolsModule extends CellModule {
  tools: Tools;
}

export async function createToolsModule(
  core: CellCore,
  deps: {
    iam: Iam;
    delegation?: ToolsContext['delegation'];
    /** What the OAuth server trusts and is: a source's server that trusts this cell is checked against it. */
    trust?: SourcesContext['trust'];
  },
): Promise<ToolsModule> {
  const dispatcher = guardedDispatcher(core.config.egressAllowPrivate);
  const stdio = new Map(core.config.toolSources.map((s) => [s.name, s]));
  const imported = new ImportedCatalog(core.store, core.log);
  const sources: SourcesContext = {
    core,
    iam: deps.iam,
    dispatcher,
    delegation: deps.delegation,
    trust: deps.trust ?? { issuers: () => [], protectedResourceOf: () => null },
    secrets: undefined,
    imported,
    connections: new Connections({ dispatcher, log: core.log, stdio: (name) => stdio.get(name) }),
    stdio,
    tokens: new Map(),
    userHooks: [],
    reachHooks: [],
  };
  await imported.reload();
  const tools = new Tools(
    {
      store: core.store,
      clock: core.clock,
      allowPrivate: core.config.egressAllowPrivate,
      dispatcher,
      ...(deps.delegation ? { delegation: deps.delegation } : {}),
    },
    sources,
  );
  return {
    name: 'tools',
    tools,
    routes(app) {
      sourceRoutes(app, sources);
    },
    async start() {
      if (core.config.toolSources.length > 0) await syncConfigSources(sources, core.config.toolSources);
    },
    async stop() {
      imported.close();
      await sources.connections.closeAll();
      await dispatcher.close();
    },
  };
}
