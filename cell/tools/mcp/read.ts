/**
 * One catalog read of a source's server: a session of its own, opened with
 * the reading principal's identity (./identity.ts `catalogIdentity`), the
 * whole tool list read, the session closed. Registration, review and re-pin
 * read this way; calls use the pooled sessions (./call.ts).
 */
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ServiceError } from '../../../core/errors.ts';
import { toolRefusal } from '../catalog.ts';
import { isPrivateRefusal } from '../../../runtime/ssrf.ts';
import {
  listTools,
  openClient,
  StdioNotConfigured,
  withCredentials,
  type Listing,
  type Session,
} from '../../../runtime/mcp-client/connect.ts';
import type { SourcesContext } from '../sources/context.ts';
import { catalogIdentity } from './identity.ts';
import type { SourceRow } from '../sources/types.ts';

/** The server's tool list now, read for `principalId`; 503 source_unreachable when it cannot be read. */
export async function readListing(ctx: SourcesContext, source: SourceRow, principalId: string): Promise<Listing> {
  const identity = await catalogIdentity(ctx, source, principalId);
  return withCredentials(identity.credentials, async () => {
    let session: Session | undefined;
    try {
      session = await openClient(source, { dispatcher: ctx.dispatcher, log: ctx.core.log, stdio: (n) => ctx.stdio.get(n) });
      return await listTools(session.client, { timeout: source.timeout_ms });
    } catch (e) {
      throw readFailure(e, source);
    } finally {
      await session?.close();
    }
  });
}

function readFailure(e: unknown, source: SourceRow): unknown {
  if (e instanceof ServiceError) return e;
  if (isPrivateRefusal(e))
    return toolRefusal(
      'egress_private_address',
      'the source resolves to a loopback, private or link-local address the operator did not allow',
      {
        source: source.name,
      },
    );
  if (e instanceof StdioNotConfigured)
    return new ServiceError('service_unavailable', e.message, { details: { reason: 'source_not_configured', source: source.name } });
  const status = e instanceof StreamableHTTPError ? e.code : undefined;
  return new ServiceError('service_unavailable', `the MCP server of ${source.name} could not be read`, {
    details: { reason: 'source_unreachable', source: source.name, ...(status !== undefined && status > 0 ? { status } : {}) },
    retryable: true,
  });
}
