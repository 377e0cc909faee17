/**
 * `tools/call` on the cell: each tool runs through the function its HTTP
 * route runs (crews: Teams.startCrewRunAs; endpoints: JobEndpoints.invoke;
 * approvals: Teams.decideApproval), as the caller, then answers the run with
 * a signed receipt (receipt.ts). A name that is not a tool of this cell is
 * the JSON-RPC error -32602; a refusal of the call (a permission, a seat
 * beyond the caller, a refused start) is a result with `isError` and the
 * service's error envelope, as the route would have answered.
 */
import { isServiceError, notFound, ServiceError } from '../../core/errors.ts';
import { grants } from '../../core/authority/scopes.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import { inputProblems } from '../../core/input-schema/problems.ts';
import { verifyJournal } from '../../core/journal/verify.ts';
import { recordHash } from '../../core/journal/hash.ts';
import { invalidArguments, refusalResult, structuredResult, unknownTool } from '../../runtime/mcp/results.ts';
import type { CallToolResult, ToolCallContext } from '../../runtime/mcp/types.ts';
import type { AuthContext } from '../context.ts';
import { RUN_ID_PATTERN } from '../../core/run-id.ts';
import type { Run } from '../runs/api.ts';
import type { McpCaller, McpContext } from './context.ts';
import { followRun, type Followed } from './follow.ts';
import { receiptFor } from './receipt.ts';
import { APPROVAL_DECIDE, CREW_TOOL, ENDPOINT_TOOL, JOURNAL_VERIFY, readsRuns, RUN_STATUS, toolInput } from './tools.ts';

const ID = /^[a-z]{2,8}_[0-9a-f]{20}$/;
const FAILED = new Set(['failed', 'refused', 'cancelled']);

/** Runs tool `name` for the caller. */
export async function callTool(
  ctx: McpContext,
  caller: McpCaller,
  name: string,
  args: Record<string, unknown>,
  call: ToolCallContext,
): Promise<CallToolResult> {
  const { auth } = caller;
  try {
    if (name.startsWith(CREW_TOOL)) return await callCrew(ctx, caller, name.slice(CREW_TOOL.length), args, call);
    if (name.startsWith(ENDPOINT_TOOL)) return await callEndpoint(ctx, caller, name.slice(ENDPOINT_TOOL.length), args, call);
    if (name === RUN_STATUS) return await runStatus(ctx, auth, args);
    if (name === JOURNAL_VERIFY) return await journalVerify(ctx, auth, args);
    if (name === APPROVAL_DECIDE) return await approvalDecide(ctx, auth, args);
  } catch (e) {
    // A run a client cancelled ends the call with nothing to answer.
    if (call.signal.aborted) throw e;
    return refusalResult(e);
  }
  throw unknownTool(name);
}

/** The answer to a followed run: its state and output or error, pending approvals, and the receipt. */
async function runResult(ctx: McpContext, f: Followed, pending: unknown[] = []): Promise<CallToolResult> {
  const { run } = f;
  const output = run.state === 'completed' ? (run.output ?? null) : null;
  const receipt = await receiptFor(ctx, run, f.head, output);
  return structuredResult(
    {
      run_id: run.run_id,
      state: run.state,
      output,
      error: run.error ?? null,
      ...(pending.length ? { pending_approvals: pending } : {}),
      ...(f.note ? { note: f.note } : {}),
      ...(receipt ? { receipt } : {}),
    },
    FAILED.has(run.state),
  );
}

/** The run's pending approvals as the run routes show them (crew runs), when it waits. */
async function pendingOf(ctx: McpContext, run: Run): Promise<unknown[]> {
  if (run.state !== 'waiting' && run.state !== 'running') return [];
  return run.kind === 'crew' ? (await ctx.teams.runView(run)).pending_approvals : await ctx.runs.pendingApprovalsView(run);
}

async function callCrew(ctx: McpContext, caller: McpCaller, crewId: string, args: Record<string, unknown>, call: ToolCallContext) {
  const { auth } = caller;
  if (!ID.test(crewId)) throw unknownTool(`${CREW_TOOL}${crewId}`);
  const { crew, formation } = await ctx.teams.crewAndFormation(crewId).catch((e: unknown) => {
    if (isServiceError(e) && e.code === 'not_found') throw unknownTool(`${CREW_TOOL}${crewId}`);
    throw e;
  });
  const input = toolInput(formation.input_schema).input(args);
  const run = await ctx.teams.startCrewRunAs(auth, crewId, { input });
  await call.log('info', { run_id: run.run_id, crew_id: crewId, state: run.state });
  const f = await followRun(ctx, caller, run.run_id, call, {
    what: `Crew ${crew.name}`,
    permission: PERMISSIONS.teamsWrite,
    // A decision is made with the authority the caller holds when it is made, not when the call began.
    decide: async (stepId, decision, comment) =>
      ctx.teams.decideApproval(await caller.credential.recheck(), crewId, run.run_id, stepId, decision, comment),
    cancel: async () => ctx.teams.cancelCrewRun(await caller.credential.recheck(), crewId, run.run_id),
    settled: () => ctx.teams.settled(run.run_id),
  });
  return runResult(ctx, f, await pendingOf(ctx, f.run));
}

async function callEndpoint(ctx: McpContext, caller: McpCaller, endpointId: string, args: Record<string, unknown>, call: ToolCallContext) {
  if (!ID.test(endpointId)) throw unknownTool(`${ENDPOINT_TOOL}${endpointId}`);
  const e = await ctx.endpoints.get(endpointId).catch((err: unknown) => {
    if (isServiceError(err) && err.code === 'not_found') throw unknownTool(`${ENDPOINT_TOOL}${endpointId}`);
    throw err;
  });
  const input = toolInput(e.input_schema).input(args);
  const { run } = await ctx.endpoints.invoke(caller.auth, caller.limits, e, input);
  const f = await followRun(ctx, caller, run.run_id, call, {
    what: `Endpoint ${e.name}`,
    cancel: async () => ctx.endpoints.cancel(await caller.credential.recheck(), run.run_id),
    settled: async () => undefined,
  });
  return runResult(ctx, f);
}

/** The run_id argument of the read tools, checked as the run routes check it. */
function runIdArg(args: Record<string, unknown>): string {
  const problems = inputProblems(
    { type: 'object', required: ['run_id'], properties: { run_id: { type: 'string', maxLength: 100 } } },
    args,
  );
  if (problems.length) throw invalidArguments('run_id is required', problems);
  const id = args['run_id'] as string;
  if (!RUN_ID_PATTERN.test(id)) throw notFound('run');
  return id;
}

const readRefusal = () =>
  new ServiceError('forbidden', `the credential lacks the permission ${PERMISSIONS.teamsRead}`, {
    details: { required_permission: PERMISSIONS.teamsRead },
  });

async function runStatus(ctx: McpContext, auth: AuthContext, args: Record<string, unknown>) {
  if (!readsRuns(auth)) throw readRefusal();
  const run = await ctx.runs.getRun(runIdArg(args));
  if (!run) throw notFound('run');
  return runResult(ctx, { run, head: undefined }, await pendingOf(ctx, run));
}

async function journalVerify(ctx: McpContext, auth: AuthContext, args: Record<string, unknown>) {
  if (!grants(auth.effective, PERMISSIONS.jobsRead)) {
    throw new ServiceError('forbidden', `the credential lacks the permission ${PERMISSIONS.jobsRead}`, {
      details: { required_permission: PERMISSIONS.jobsRead },
    });
  }
  const runId = runIdArg(args);
  if (!(await ctx.runs.getRun(runId))) throw notFound('run');
  const records = await ctx.runs.readJournal(runId, 0, 10_000_000);
  const keys = new Map((await ctx.iam.groupIdentityKeys()).map((k) => [k.kid, k.jwk]));
  const v = await verifyJournal(records, (kid) => keys.get(kid));
  const head = records.at(-1);
  return structuredResult({
    run_id: runId,
    ok: v.ok,
    records: records.length,
    journal_seq: head?.seq ?? null,
    journal_head: head ? recordHash(head) : null,
    graph_hash: head?.graph_hash ?? null,
    problem: v.ok ? null : { seq: v.seq, reason: v.reason },
  });
}

async function approvalDecide(ctx: McpContext, auth: AuthContext, args: Record<string, unknown>) {
  const problems = inputProblems(
    {
      type: 'object',
      required: ['run_id', 'step_id', 'decision'],
      properties: {
        run_id: { type: 'string', maxLength: 100 },
        step_id: { type: 'string', minLength: 1, maxLength: 300 },
        decision: { type: 'string', enum: ['approve', 'reject'] },
        comment: { type: 'string', maxLength: 1000 },
      },
      additionalProperties: false,
    },
    args,
  );
  if (problems.length) throw invalidArguments('run_id, step_id and decision (approve or reject) are required', problems);
  if (!grants(auth.effective, PERMISSIONS.teamsApprove)) {
    throw new ServiceError('forbidden', `the credential lacks the permission ${PERMISSIONS.teamsApprove}`, {
      details: { required_permission: PERMISSIONS.teamsApprove },
    });
  }
  const run = await ctx.runs.getRun(runIdArg(args));
  if (run?.kind !== 'crew' || run.crew_id === null) throw notFound('run');
  const after = await ctx.teams.decideApproval(
    auth,
    run.crew_id,
    run.run_id,
    args['step_id'] as string,
    args['decision'] as 'approve' | 'reject',
    args['comment'] as string | undefined,
  );
  return runResult(ctx, { run: after, head: undefined }, await pendingOf(ctx, after));
}
