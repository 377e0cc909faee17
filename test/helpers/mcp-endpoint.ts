/**
 * The reference SDK's MCP client against a cell: in process (its fetch is the
 * app's `request`) or over the network (a cell process), with a bearer
 * credential, optional elicitation, and the cell's published identity keys
 * for verifying receipts.
 *
 * @example
 * const c = await mcpClient(inProcessFetch(t), 'http://cell/mcp', t.adminKey);
 * const r = await c.callTool({ name: 'crew_crw_…', arguments: { input: 'go' } });
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema, type ElicitResult } from '@modelcontextprotocol/sdk/types.js';
import type { InProcess } from './inproc.ts';

export type FetchLike = (url: string | URL, init?: RequestInit) => Promise<Response>;

/** A fetch that answers from the in-process app (no socket), as from 127.0.0.1. */
export function inProcessFetch(t: InProcess, ip = '127.0.0.1'): FetchLike {
  return async (url, init) => t.app.request(String(url), init, { incoming: { socket: { remoteAddress: ip } } } as never);
}

export interface McpClientOptions {
  /** Answers `elicitation/create` (declares the capability); absent: the client declares none. */
  onElicit?: (params: { message: string; requestedSchema: unknown }) => ElicitResult | Promise<ElicitResult>;
  name?: string;
}

/** A connected SDK client presenting `token` as a bearer credential. */
export async function mcpClient(fetchFn: FetchLike, url: string, token: string, o: McpClientOptions = {}): Promise<Client> {
  const client = new Client(
    { name: o.name ?? 'agent-cell-tests', version: '1.0.0' },
    { capabilities: o.onElicit ? { elicitation: { form: {} } } : {} },
  );
  if (o.onElicit) {
    const answer = o.onElicit;
    client.setRequestHandler(ElicitRequestSchema, async (req) => answer(req.params as { message: string; requestedSchema: unknown }));
  }
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    fetch: fetchFn as typeof fetch,
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  return client;
}

/** The published identity keys of a cell (/.well-known/cell-keys.json), as a lookup by kid. */
export async function publishedKeys(fetchFn: FetchLike, base: string): Promise<(kid: string) => JsonWebKey | undefined> {
  const doc = (await (await fetchFn(`${base}/.well-known/cell-keys.json`)).json()) as { keys: { kid: string; jwk: JsonWebKey }[] };
  const keys = new Map(doc.keys.map((k) => [k.kid, k.jwk]));
  return (kid) => keys.get(kid);
}
