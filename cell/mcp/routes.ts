/**
 * `/mcp`: POST (JSON-RPC messages), GET (the session's stream of server
 * messages), DELETE (ends a session), behind the gateway like the API:
 * rate budget (429), authentication (401, with `WWW-Authenticate` naming the
 * protected resource metadata of `/mcp`), the JSON body gate, then the
 * credential's own rpm (429, `requires(null)`: any authenticated caller).
 * What each tool may do is decided per call (tools.ts, calls.ts).
 */
import type { OpenAPIHono } from '@hono/zod-openapi';
import type { McpEndpoint } from '../../runtime/mcp/endpoint.ts';
import type { AppEnv } from '../context.ts';
import type { Change } from '../store/types.ts';
import { requires } from '../http/authorize.ts';
import type { McpCaller } from './context.ts';

export const MCP_PATH = '/mcp';

export function mcpRoutes(app: OpenAPIHono<AppEnv>, endpoint: McpEndpoint<McpCaller>): void {
  app.on(['POST', 'GET', 'DELETE'], MCP_PATH, requires(null), async function mcp(c) {
    const body = c.req.method === 'POST' ? await c.req.text() : undefined;
    const check = c.get('credentialCheck');
    const credential = { recheck: () => check.recheck(c), concerns: (ch: Change) => check.concerns(ch) };
    return endpoint.handle(c.req.raw, { auth: c.get('auth'), limits: c.get('credentialLimits'), credential }, body);
  });
}
