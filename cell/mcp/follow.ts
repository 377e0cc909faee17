/**
 * Following a run an MCP call started, until the call can answer: the run
 * ends, or it waits and the client cannot (or does not) answer what it waits
 * for. On the way:
 *
 * - progress: each journal record (and, when the provider streams, each
 *   model fragment) is a progress notification, if the client sent a
 *   progressToken;
 * - approvals: a step waiting for a human approval is asked of the client's
 *   user (`elicitation/create`, when the client declared it and the caller
 *   holds agent_teams.approve); the answer is a decision by the caller's
 *   principal through the approval route's own function
 *   (Teams.decideApproval), under all of its rules. `accept` carries the
 *   decision, `decline` rejects, `cancel` (dismissed) decides nothing and the
 *   call answers `waiting`; so does a refused decision (with why), a client
 *   without elicitation, and a step already asked in this call that still
 *   waits for other approvers;
 * - cancellation: the client's `notifications/cancelled` cancels the run
 *   (the cancel route's function) and ends the call;
 * - the credential: judged again while the call follows the run, as a run's
 *   event stream judges it (on a change of the tables that may revoke it, and
 *   every `credentialRecheckMs`), and before a decision is recorded, which is
 *   made with the authority it has then. Refused (revoked, expired, its
 *   principal archived): the call ends with the refusal, and the run goes on
 *   as it would without the call (nothing decided, nothing cancelled).
 * A wait on a timer (a retry's backoff, a timer stage) is waited out.
 */
import { grants } from '../../core/authority/scopes.ts';
import { type ErrorCode, isServiceError, ServiceError } from '../../core/errors.ts';
import type { JournalRecord } from '../../core/journal/record.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import type { ToolCallContext } from '../../runtime/mcp/types.ts';
import { credentialWatch, type PendingApproval, type Run } from '../runs/api.ts';
import type { McpCaller, McpContext } from './context.ts';
import { MCP } from './settings.ts';

/** Where a followed run stands when the call answers. */
export interface Followed {
  run: Run;
  /** The last journal record seen (the receipt's head). */
  head: JournalRecord | undefined;
  /** Why the call answers a run that has not ended. */
  note?: string;
}

/** How a followed run is approved or cancelled (crew runs), or only cancelled (job runs). */
export interface RunControl {
  /** A decision by the caller, through the approval route's function; absent: the run's approvals are not the call's to answer. */
  decide?: (stepId: string, decision: 'approve' | 'reject', comment: string | undefined) => Promise<unknown>;
  /** Cancels the run (the cancel route's function). */
  cancel(): Promise<unknown>;
  /** Resolves when this cell no longer drives the run (a run left waiting: once its state says so). */
  settled(): Promise<void>;
  /** A short name of what runs, for the approval question. */
  what: string;
  /** The permission the caller must still hold while the call follows the run (the tool's). */
  permission?: string;
}

const TERMINAL = 'run_finished';

class Aborted extends Error {}

export async function followRun(
  ctx: McpContext,
  caller: McpCaller,
  runId: string,
  call: ToolCallContext,
  control: RunControl,
): Promise<Followed> {
  const { auth } = caller;
  const seen: JournalRecord[] = [];
  let wake: (() => void) | null = null;
  let head: JournalRecord | undefined;
  // The credential judged again while the call lasts; refused, the call ends (with an elicitation it waits on).
  let refusal: ServiceError | null = null;
  const revoked = new AbortController();
  const watch = credentialWatch({ ...caller.credential, permission: control.permission }, (e) => {
    refusal = new ServiceError(e.code as ErrorCode, e.message, e.details ? { details: e.details } : {});
    revoked.abort();
    wake?.();
  });
  const unwatch = ctx.core.store.onChange((ch) => caller.credential.concerns(ch) && watch.trigger());
  const every = setInterval(() => watch.trigger(), MCP.credentialRecheckMs);
  every.unref?.();
  const stopped = () => refusal;
  const onRecord = (rec: JournalRecord) => {
    seen.push(rec);
    head = rec;
    void call.progress(`${rec.kind} ${rec.step_id}`).catch(() => undefined);
    wake?.();
  };
  const onDelta = call.wantsProgress
    ? (ev: { data: { text: string } }) => {
        if (ev.data.text) void call.progress(ev.data.text).catch(() => undefined);
      }
    : undefined;
  const next = async (): Promise<JournalRecord> => {
    while (seen.length === 0) {
      if (call.signal.aborted) throw new Aborted('the call was cancelled');
      if (refusal) throw refusal;
      await new Promise<void>((res) => {
        wake = res;
      });
      wake = null;
    }
    return seen.shift()!;
  };
  const onAbort = () => wake?.();
  call.signal.addEventListener('abort', onAbort);
  const unsubscribe = await ctx.runs.subscribe(runId, 0, onRecord, onDelta);
  const asked = new Set<string>();
  const now = async (note?: string): Promise<Followed> => {
    // A run that waits: its `waiting` record is written before its row says so; the drive ends then.
    if (note) await control.settled();
    const run = await ctx.runs.getRun(runId);
    if (!run) throw new TypeError(`followRun: run ${runId} vanished`);
    if (refusal) throw refusal;
    return { run, head, ...(note ? { note } : {}) };
  };
  try {
    for (;;) {
      const rec = await next();
      if (rec.kind === TERMINAL) return await now();
      if (rec.kind !== 'waiting') continue;
      const pending = await ctx.runs.pendingApprovals(runId);
      if (pending.length === 0) continue; // a timer: the run wakes by itself
      const fresh = pending.filter((p) => !asked.has(p.step_id));
      if (fresh.length === 0) return await now('the run waits for other approvers; follow it with run_status');
      if (!control.decide || !call.canElicit || !grants(auth.effective, PERMISSIONS.teamsApprove)) {
        return await now(
          'the run waits for a human approval: answer it with approval_decide (or the approval route, or the console) and follow it with run_status',
        );
      }
      for (const p of fresh) {
        asked.add(p.step_id);
        const stop = await askApproval(ctx, runId, p, call, control, { signal: revoked.signal, stopped });
        if (stop !== null) return await now(stop);
      }
    }
  } catch (e) {
    // The client cancelled the call: the run it started is cancelled with it.
    if (e instanceof Aborted) await control.cancel();
    throw e;
  } finally {
    call.signal.removeEventListener('abort', onAbort);
    clearInterval(every);
    unwatch();
    unsubscribe();
  }
}

/** Asks the client's user about one waiting step and records the answer; the note to answer `waiting` with, or null to go on. */
async function askApproval(
  ctx: McpContext,
  runId: string,
  p: PendingApproval,
  call: ToolCallContext,
  control: RunControl,
  credential: { signal: AbortSignal; stopped: () => ServiceError | null },
): Promise<string | null> {
  const due = p.due === null ? MCP.elicitationTimeoutMs : Math.max(1_000, p.due - ctx.core.clock.now());
  let answer;
  try {
    answer = await call.elicit(
      {
        message: `${control.what}, run ${runId}, waits for an approval of step "${p.step_id}"${p.prompt ? `: ${p.prompt}` : ''} (rule ${p.rule}, quorum ${p.quorum}). Approve it as yourself?`,
        requestedSchema: {
          type: 'object',
          properties: {
            decision: { type: 'string', title: 'Decision', enum: ['approve', 'reject'], description: 'Approve or reject the step' },
            comment: { type: 'string', title: 'Comment', maxLength: 1000, description: 'Why (recorded with the decision)' },
          },
          required: ['decision'],
        },
      },
      Math.min(due, MCP.elicitationTimeoutMs),
      credential.signal,
    );
  } catch (e) {
    if (call.signal.aborted) throw new Aborted('the call was cancelled');
    const refused = credential.stopped();
    if (refused) throw refused;
    ctx.core.log.info('mcp elicitation not answered', {
      run_id: runId,
      step_id: p.step_id,
      error: e instanceof Error ? e.message : String(e),
    });
    return 'the approval was not answered; the run waits: answer it with approval_decide and follow it with run_status';
  }
  if (answer.action === 'cancel')
    return 'the approval was dismissed; the run waits: answer it with approval_decide and follow it with run_status';
  const given = answer.content?.['decision'];
  const decision = answer.action === 'decline' ? 'reject' : given === 'approve' || given === 'reject' ? given : null;
  if (decision === null) return 'the answer named no decision (approve or reject); the run waits';
  const comment = typeof answer.content?.['comment'] === 'string' ? answer.content['comment'].slice(0, 1000) : undefined;
  const refused = credential.stopped();
  if (refused) throw refused;
  try {
    await control.decide!(p.step_id, decision, comment);
  } catch (e) {
    // The credential is no longer honoured (judged again for the decision): the call ends with that.
    if (!isServiceError(e) || e.code === 'unauthorized') throw e;
    return `the decision was refused (${String(e.details?.reason ?? e.code)}): ${e.message}; the run waits for another approver`;
  }
  return null;
}
