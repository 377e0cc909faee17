/**
 * What the catalog-source tests share: an in-process cell that may reach loopback (the servers of the
 * tests), its clock running from now (a server checks the cell's tokens against its own clock), beside a
 * real MCP server (test/fixtures/mcp-server.ts); and the wait for a job run to end.
 */
import type { CellConfig } from '../../cell/config.ts';
import { manualClock } from '../../cell/context.ts';
import { startMcpServer, type McpFixture } from '../fixtures/mcp-server.ts';
import { inProcessCell, type InProcess } from './inproc.ts';
import { A, ok, type Api } from './teams.ts';
import { until } from './until.ts';

export const SOURCES = `${A}/catalog/sources`;

export interface McpCell {
  t: InProcess;
  mcp: McpFixture;
  /** The owner's API. */
  api: Api;
  close(): Promise<void>;
}

/** The cell and an MCP server (no auth unless `server` says so). */
export async function mcpCell(
  opts: { config?: Partial<CellConfig>; server?: Parameters<typeof startMcpServer>[0] } = {},
): Promise<McpCell> {
  const t = await inProcessCell({ config: { egressAllowPrivate: ['127.0.0.1/32'], ...opts.config }, clock: manualClock(Date.now()) });
  const mcp = await startMcpServer(opts.server);
  return {
    t,
    mcp,
    api: { request: t.request, token: t.adminKey },
    async close() {
      await t.close();
      await mcp.close();
    },
  };
}

/** The job run once it ended (completed, failed, refused or cancelled). */
export function jobEnded(api: Api, runId: string): Promise<any> {
  return until(`run ${runId} to end`, async () => {
    const v = await ok(api, 'GET', `${A}/jobs/runs/${runId}`);
    return ['completed', 'failed', 'refused', 'cancelled'].includes(v.state) ? v : null;
  });
}
