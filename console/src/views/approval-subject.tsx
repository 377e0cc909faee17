/**
 * What a waiting step will do once approved (issue 43 §4), on its approval card: for a tool call under
 * `ask`, the tool and its exact arguments, read from the model answer that asked for it and checked
 * against the digest a decision approves; for a human_approval step, the input it passes on (the run's
 * input, or the value of the record that produced it, checked against the digest). Reading values needs
 * system.orchestration.admin.read; without it the card says what it cannot show.
 */
import { ADMIN, call, describeError, seg } from '../api.ts';
import { can } from '../auth/session.ts';
import { approvedToolCall, toolCallOrigin, type ApprovalRun, type PendingApproval } from '../approval-model.ts';
import { Json, useApp, useLoad } from '../ui.tsx';
import { valueMatches } from '../verify.ts';

interface Rec {
  step_id: string;
  kind: string;
  input_hash: string;
  output_hash: string;
}

type Subject =
  | { kind: 'tool'; tool: string; args: unknown; matches: boolean }
  | { kind: 'input'; value: unknown; matches: boolean; from: 'run' | 'step' }
  | { kind: 'unknown'; why: string };

/** The input of a run as the approval card shows it: a crew run's input, an agent job's `spec.input`. */
export function runInputOf(run: ApprovalRun): unknown {
  if (run.input !== undefined) return run.input;
  const spec = run.spec as { input?: unknown } | null | undefined;
  return spec && typeof spec === 'object' ? (spec.input ?? null) : null;
}

async function loadSubject(
  session: ReturnType<typeof useApp>['session'],
  run: ApprovalRun,
  a: PendingApproval,
  signal: AbortSignal,
): Promise<Subject> {
  const origin = a.kind === 'tool_call' ? toolCallOrigin(a.step_id) : null;
  const input = runInputOf(run);
  if (a.kind !== 'tool_call' && a.input_hash && valueMatches(input, a.input_hash))
    return { kind: 'input', value: input, matches: true, from: 'run' };
  if (!can(session, 'system.orchestration.admin.read'))
    return { kind: 'unknown', why: 'Showing it needs system.orchestration.admin.read (it reads the run’s recorded values).' };
  const j = await call<{ records: Rec[] }>(session, 'GET', `${ADMIN}/jobs/runs/${seg(run.run_id)}/journal`, { signal });
  const value = async (hash: string) =>
    (await call<{ value: unknown }>(session, 'GET', `${ADMIN}/jobs/runs/${seg(run.run_id)}/values/${seg(hash)}`, { signal })).value;
  if (origin) {
    const asked = [...j.records].reverse().find((r) => r.step_id === origin.modelStep && r.kind === 'step');
    if (!asked) return { kind: 'unknown', why: 'The model answer that asked for this call is not in the journal.' };
    const answer = await value(asked.output_hash);
    if (!valueMatches(answer, asked.output_hash)) return { kind: 'unknown', why: 'The model answer does not match its signed record.' };
    const tc = approvedToolCall(answer, origin.index, a.input_hash);
    return tc ? { kind: 'tool', ...tc } : { kind: 'unknown', why: 'The model answer names no such call.' };
  }
  const made = a.input_hash ? j.records.find((r) => r.output_hash === a.input_hash || r.input_hash === a.input_hash) : undefined;
  if (!made || !a.input_hash) return { kind: 'unknown', why: 'The step input is not among the run’s recorded values.' };
  const v = await value(a.input_hash);
  return { kind: 'input', value: v, matches: valueMatches(v, a.input_hash), from: 'step' };
}

/** The card's "will do" block. */
export function ApprovalSubject({ run, approval }: { run: ApprovalRun; approval: PendingApproval }) {
  const { session } = useApp();
  const s = useLoad((signal) => loadSubject(session, run, approval, signal), [run.run_id, approval.step_id, approval.input_hash, session]);
  const tool = approval.kind === 'tool_call' ? /^tool (.+)$/.exec(approval.prompt ?? '')?.[1] : undefined;
  return (
    <div class="will-do">
      {s.error ? (
        <p class="muted">What it approves could not be read: {describeError(s.error)}</p>
      ) : !s.data ? (
        <p class="muted" role="status">
          Reading what it approves…
        </p>
      ) : s.data.kind === 'tool' ? (
        <>
          <p class="will-do-tool">
            Calls the tool <code class="tool-name">{s.data.tool}</code> with these arguments
            {s.data.matches ? (
              <span class="ok-text"> (exactly the call a decision approves: its digest matches)</span>
            ) : (
              <span class="bad-text"> (they do NOT match the digest a decision approves)</span>
            )}
            :
          </p>
          <Json value={s.data.args} label={`Arguments of the call to ${s.data.tool}`} />
        </>
      ) : s.data.kind === 'input' ? (
        s.data.from === 'run' ? (
          <p class="will-do-input">On approval the run goes on with its input (above); on rejection it is refused.</p>
        ) : (
          <>
            <p class="will-do-input">
              On approval the run goes on with this input
              {s.data.matches ? <span class="ok-text"> (the one a decision approves: its digest matches)</span> : null}; on rejection it is
              refused:
            </p>
            <Json value={s.data.value} label="The step input a decision approves" />
          </>
        )
      ) : (
        <p class="muted">
          {tool ? (
            <>
              Calls the tool <code class="tool-name">{tool}</code>.{' '}
            </>
          ) : null}
          {s.data.why}
        </p>
      )}
    </div>
  );
}
