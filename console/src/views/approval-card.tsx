/**
 * One step waiting for human approval: its prompt, its rule (quorum of k, or
 * the two-person rule), who approved, who is still needed, when it times out,
 * and, for a principal who may decide it, Approve and Reject.
 *
 * The buttons follow the rules the cell applies (../approval-model.ts): the
 * session needs agent_teams.approve; named approvers only; one decision per
 * principal; under the two-person rule never the run's requester. When the
 * console does not know who the session is (an API key on a cell without
 * `/admin/whoami`), it shows the buttons and the cell decides.
 */
import { useState } from 'preact/hooks';
import { ADMIN, ApiError, call, describeError, seg, TEAMS } from '../api.ts';
import { can, knowsPermissions } from '../auth/session.ts';
import { href } from '../router.ts';
import { Json, Time, useApp, Who, WhoList } from '../ui.tsx';
import { ApprovalSubject, runInputOf } from './approval-subject.tsx';
import { approvalStatus, requesterActors, whyNot, type ApprovalRun, type PendingApproval } from '../approval-model.ts';
import { DecisionLine } from './decision-list.tsx';

function approvalPath(run: ApprovalRun, stepId: string): string {
  return run.kind === 'crew' && run.crew_id
    ? `${TEAMS}/crews/${seg(run.crew_id)}/runs/${seg(run.run_id)}/approvals/${seg(stepId)}`
    : `${ADMIN}/jobs/runs/${seg(run.run_id)}/approvals/${seg(stepId)}`;
}

export function ApprovalCard({
  approval,
  run,
  onDecided,
  showRun,
  crewName,
}: {
  approval: PendingApproval;
  run: ApprovalRun;
  onDecided(): void;
  showRun?: boolean;
  /** The crew's name, when the session may read crews. */
  crewName?: string | null | undefined;
}) {
  const { session } = useApp();
  const [comment, setComment] = useState('');
  const [busy, setBusy] = useState(false);
  const [confirmReject, setConfirmReject] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const st = approvalStatus(approval, run.requester, requesterActors(run));
  const blocked = whyNot(approval, run, session.principal.id, can(session, 'agent_teams.approve'), knowsPermissions(session));
  const cid = `appr-${run.run_id}-${approval.step_id}`.replace(/[^A-Za-z0-9_-]/g, '_');

  const decide = async (decision: 'approve' | 'reject') => {
    setBusy(true);
    setError(null);
    try {
      await call(session, 'POST', approvalPath(run, approval.step_id), {
        body: { decision, ...(comment.trim() ? { comment: comment.trim() } : {}) },
      });
      setDone(decision === 'approve' ? 'Approved.' : 'Rejected.');
      setComment('');
      setConfirmReject(false);
      onDecided();
    } catch (e) {
      // The step no longer waits: another approver decided (or it timed out) since this card was drawn.
      if (e instanceof ApiError && (e.status === 404 || e.status === 409) && !/permission/.test(e.reason ?? '')) {
        setError('Already decided: this step no longer waits for a decision (someone else decided, or it timed out).');
        onDecided();
      } else setError(describeError(e));
    } finally {
      setBusy(false);
    }
  };

  return (
    <article class="approval" aria-labelledby={`${cid}-title`} data-run={run.run_id} data-step={approval.step_id}>
      <h3 id={`${cid}-title`}>
        {showRun ? (
          <>
            <a href={href('runs', run.run_id)}>
              <code>{run.run_id}</code>
            </a>{' '}
            ·{' '}
          </>
        ) : null}
        Step <code>{approval.step_id}</code> <span class="muted">({approval.kind})</span>
      </h3>
      {approval.prompt ? (
        <p class="prompt">
          <bdi>{approval.prompt}</bdi>
        </p>
      ) : null}
      <dl class="facts">
        {run.crew_id ? (
          <>
            <dt>Crew</dt>
            <dd class="crew">
              {crewName ? (
                <>
                  <bdi>{crewName}</bdi>{' '}
                </>
              ) : null}
              <code>{run.crew_id}</code>
            </dd>
          </>
        ) : null}
        <dt>Run input</dt>
        <dd class="run-input">
          <Json value={runInputOf(run)} label={`Input of run ${run.run_id}`} />
        </dd>
        <dt>Will do</dt>
        <dd>
          <ApprovalSubject run={run} approval={approval} />
        </dd>
        <dt>Rule</dt>
        <dd class="rule">
          {approval.rule === 'two_person'
            ? 'Two-person rule: two distinct people, neither the requester'
            : `Quorum: ${st.need} approval${st.need === 1 ? '' : 's'}${approval.approvers.length ? ` from the ${approval.approvers.length} named approvers` : ' from anyone who may approve'}`}
        </dd>
        <dt>Requested by</dt>
        <dd>
          <Who id={run.requester} />
        </dd>
        <dt>Approved</dt>
        <dd class="tally">
          <strong>
            {st.approvedBy.length} of {st.need}
          </strong>
          {st.approvedBy.length ? (
            <>
              {' '}
              · by <WhoList ids={st.approvedBy} />
            </>
          ) : null}
        </dd>
        <dt>Still needed</dt>
        <dd class="needed">
          {st.stillNeeded === 0 ? (
            'none'
          ) : (
            <>
              {st.stillNeeded} more
              {st.waitingOn ? (
                <>
                  {' '}
                  · from <WhoList ids={st.waitingOn} />
                </>
              ) : null}
            </>
          )}
        </dd>
        {st.rejectedBy.length ? (
          <>
            <dt>Rejected by</dt>
            <dd>
              <WhoList ids={st.rejectedBy} />
            </dd>
          </>
        ) : null}
        <dt>Times out</dt>
        <dd>
          <Time at={approval.due} />
        </dd>
      </dl>
      {approval.decisions.length ? (
        <ul class="decisions" aria-label="Decisions so far">
          {approval.decisions.map((d) => (
            <li key={`${d.principal}:${d.at}`}>
              <DecisionLine d={d} />
            </li>
          ))}
        </ul>
      ) : null}
      {blocked ? (
        <p class="muted blocked">{blocked}</p>
      ) : (
        <div class="decide">
          <label for={`${cid}-comment`}>Comment (optional)</label>
          <textarea
            id={`${cid}-comment`}
            rows={2}
            maxLength={2000}
            value={comment}
            onInput={(e) => setComment((e.target as HTMLTextAreaElement).value)}
          />
          <div class="buttons">
            <button
              type="button"
              class="primary approve"
              disabled={busy}
              onClick={() => decide('approve')}
              aria-label={`Approve step ${approval.step_id} of run ${run.run_id}`}
            >
              Approve
            </button>
            {confirmReject ? (
              <>
                <span>Reject? The run will be refused.</span>
                <button type="button" class="danger reject-confirm" disabled={busy} onClick={() => decide('reject')}>
                  Confirm reject
                </button>
                <button type="button" onClick={() => setConfirmReject(false)}>
                  Cancel
                </button>
              </>
            ) : (
              <button
                type="button"
                class="reject"
                disabled={busy}
                onClick={() => setConfirmReject(true)}
                aria-label={`Reject step ${approval.step_id} of run ${run.run_id}`}
              >
                Reject
              </button>
            )}
          </div>
        </div>
      )}
      {done ? (
        <p role="status" class="ok">
          {done}
        </p>
      ) : null}
      {error ? (
        <p role="alert" class="error">
          {error}
        </p>
      ) : null}
    </article>
  );
}
