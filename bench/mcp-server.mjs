// The MCP server of bench/mcp.bench.ts, in a process of its own: the reference SDK's McpServer on its
// Streamable HTTP transport (stateful sessions, SSE answers), no authentication, one read-only tool
// `lookup` that answers at once. Prints `listening <port>`.
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

const transports = new Map();
function build() {
  const s = new McpServer({ name: 'bench', version: '1.0.0' });
  s.registerTool(
    'lookup',
    { description: 'Look up a customer by id.', inputSchema: { id: z.string() }, annotations: { readOnlyHint: true } },
    async ({ id }) => ({ content: [{ type: 'text', text: `customer ${id}` }] }),
  );
  return s;
}
const http = createServer(async (req, res) => {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
  const sid = req.headers['mcp-session-id'];
  let t = typeof sid === 'string' ? transports.get(sid) : undefined;
  if (!t) {
    if (req.method !== 'POST' || !isInitializeRequest(body)) {
      res.writeHead(typeof sid === 'string' ? 404 : 400).end();
      return;
    }
    const created = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => transports.set(id, created),
    });
    t = created;
    await build().connect(t);
  }
  await t.handleRequest(req, res, body);
});
http.listen(0, '127.0.0.1', () => console.log(`listening ${http.address().port}`));
