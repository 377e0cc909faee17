/**
 * The jobs module's face (docs/architecture.md, "Faces"): what another module of cell/ may use of
 * it: the graph of a job run (the receipts module's attestations name it), and published endpoints
 * for the MCP endpoint (cell/mcp), which offers each as a tool: which a caller may call, and the
 * invocation itself, the same implementation as the HTTP invoke route (invoke.ts). Job runs,
 * definitions and the scheduler stay behind the module's routes, and the runs they make are the
 * runs module's.
 */
import type { CredentialLimits } from '../../runtime/gateway.ts';
import type { AuthContext } from '../context.ts';
import type { DriveResult, Run } from '../runs/api.ts';
import type { JobsContext } from './context.ts';
import type { Endpoint } from './endpoints.ts';
import { callableEndpoints, endpointOr404, endpointRefusal, invokeEndpoint } from './invoke.ts';
import { cancelJobRun } from './runner.ts';

export type { Endpoint };
export { jobGraph } from './graph.ts';

/** Published endpoints as another module uses them. */
export class JobEndpoints {
  constructor(private readonly ctx: JobsContext) {}

  /** The endpoints the caller may call now (what the invoke route would accept from it), oldest first. */
  callable(auth: AuthContext, max?: number): Promise<Endpoint[]> {
    return callableEndpoints(this.ctx, auth, max);
  }

  /** A published endpoint; not_found when it is unknown or unpublished. */
  get(endpointId: string): Promise<Endpoint> {
    return endpointOr404(this.ctx, endpointId);
  }

  /**
   * Calls the endpoint as the caller: the invoke route's checks (publisher active, required scopes),
   * then its budget, input schema and submission. The caller's own rpm is the way in's to take.
   */
  async invoke(
    auth: AuthContext,
    limits: CredentialLimits,
    e: Endpoint,
    input: unknown,
  ): Promise<{ run: Run; done: Promise<DriveResult> }> {
    const refusal = await endpointRefusal(this.ctx, auth, e);
    if (refusal) throw refusal;
    const r = await invokeEndpoint(this.ctx, auth, limits, e, input);
    return { run: r.run, done: r.done };
  }

  /** Cancels a run as the caller (the cancel route's implementation): idempotent, audited when it changed the run. */
  cancel(auth: AuthContext, runId: string): Promise<Run> {
    return cancelJobRun(this.ctx, auth, runId);
  }
}
