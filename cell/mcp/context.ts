/**
 * What every function of the MCP module works with: the cell core and the
 * faces of the modules its tools reach. One per module instance.
 */
import type { CredentialLimits } from '../../runtime/gateway.ts';
import type { AuthContext, CellCore } from '../context.ts';
import type { Iam } from '../iam/api.ts';
import type { JobEndpoints } from '../jobs/api.ts';
import type { Runs, StreamCredential } from '../runs/api.ts';
import type { Teams } from '../teams/api.ts';

export interface McpContext {
  readonly core: CellCore;
  readonly iam: Iam;
  readonly teams: Teams;
  readonly endpoints: JobEndpoints;
  readonly runs: Runs;
}

/**
 * The caller of an MCP request: its authority as the gateway established it, the cell's rpm
 * limiter, and its credential judged again later (a call that follows a run, and a decision made
 * in it, go on only while the credential is honoured: the gateway's CredentialCheck).
 */
export interface McpCaller {
  auth: AuthContext;
  limits: CredentialLimits;
  credential: Pick<StreamCredential, 'recheck' | 'concerns'>;
}
