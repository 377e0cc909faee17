/**
 * The cell speaks MCP (docs/mcp.md): `/mcp`, Streamable HTTP with the
 * reference SDK (runtime/mcp/endpoint.ts, shared with the edge), whose tools
 * are the crews and published endpoints the caller may run, and a few read
 * tools; every result that answers a run carries a receipt signed with the
 * cell's identity key.
 */
import { McpEndpoint } from '../../runtime/mcp/endpoint.ts';
import type { CellCore } from '../context.ts';
import type { Iam } from '../iam/api.ts';
import type { JobEndpoints } from '../jobs/api.ts';
import type { CellModule } from '../module.ts';
import type { OAuthApi } from '../oauth/api.ts';
import type { Runs } from '../runs/api.ts';
import type { Teams } from '../teams/api.ts';
import { callTool } from './calls.ts';
import type { McpCaller, McpContext } from './context.ts';
import { mcpRoutes } from './routes.ts';
import { MCP } from './settings.ts';
import { toolsFor } from './tools.ts';

export interface McpDeps {
  iam: Iam;
  oauth: OAuthApi;
  teams: Teams;
  endpoints: JobEndpoints;
  runs: Runs;
}

export interface McpModule extends CellModule {
  /** The endpoint (tests: its sessions). */
  endpoint: McpEndpoint<McpCaller>;
}

/** The version the server names itself with in `initialize`. */
export const SERVER_VERSION = '0.1.0';

export function createMcpModule(core: CellCore, deps: McpDeps): McpModule {
  const ctx: McpContext = { core, iam: deps.iam, teams: deps.teams, endpoints: deps.endpoints, runs: deps.runs };
  const endpoint = new McpEndpoint<McpCaller>(
    {
      serverInfo: { name: 'agent-cell', title: `agent-cell ${core.config.cellId}`, version: SERVER_VERSION },
      instructions:
        'Each crew_* tool runs a crew of this cell as you, each endpoint_* tool a published job endpoint; results carry a receipt signed with the cell key published at /.well-known/cell-keys.json (verify it offline). run_status follows a run, journal_verify checks its journal, approval_decide answers a step waiting for approval.',
      log: core.log,
      binding: (c) => `${c.auth.principal.id} ${c.auth.credential.clientId ?? ''}`,
      listTools: (c) => toolsFor(ctx, c.auth),
      callTool: (c, name, args, call) => callTool(ctx, c, name, args, call),
    },
    {
      // The cell's own public origin (the URL its clients use): any other browser origin is refused (DNS rebinding).
      origins: () => [new URL(deps.oauth.publicBase()).origin],
      maxPerCaller: MCP.sessionsPerCaller,
      maxSessions: MCP.maxSessions,
      idleMs: MCP.sessionIdleMs,
      eventsPerSession: MCP.eventsPerSession,
      now: () => core.clock.now(),
    },
  );
  return {
    name: 'mcp',
    endpoint,
    routes: (app) => mcpRoutes(app, endpoint),
    async stop() {
      await endpoint.close();
    },
  };
}
