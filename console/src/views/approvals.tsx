/**
 * Approvals: every step waiting for a human decision, those the signed-in
 * principal may decide first. Sources: waiting crew runs
 * (`GET /admin/agent-teams/runs?state=waiting`, agent_teams.read) and waiting
 * agent job runs (`GET /admin/jobs/runs`, job_type agent), each with its
 * `pending_approvals` and the decisions so far; and the runs waiting on an
 * operator for a call whose outcome was lost (`state=outcome_unknown`), each
 * resolved on its run's page. Fetched again every few seconds, and at once
 * after a decision. While the cell does not answer, the counts are "unknown".
 */
import { ADMIN, call, TEAMS } from '../api.ts';
import { can, knowsPermissions } from '../auth/session.ts';
import { ago, useLiveness } from '../liveness.ts';
import { ErrorNote, Section, Time, useApp, useLoad } from '../ui.tsx';
import { href } from '../router.ts';
import type { UnknownOutcome } from './outcome-panel.tsx';
import { whyNot, type ApprovalRun, type PendingApproval } from '../approval-model.ts';
import { ApprovalCard } from './approval-card.tsx';

interface WaitingRun extends ApprovalRun {
  state: string;
  job_type?: string | null;
  pending_approvals?: PendingApproval[];
  unknown_outcome?: UnknownOutcome | null;
}

export function ApprovalsView() {
  const { session } = useApp();
  const liveness = useLiveness();
  const data = useLoad(
    async (signal) => {
      const runs: WaitingRun[] = [];
      const lost: WaitingRun[] = [];
      const problems: unknown[] = [];
      if (can(session, 'agent_teams.read')) {
        try {
          const r = await call<{ runs: WaitingRun[] }>(session, 'GET', `${TEAMS}/runs?state=waiting&limit=1000`, { signal });
          runs.push(...r.runs);
        } catch (e) {
          problems.push(e);
        }
      }
      if (can(session, 'system.orchestration.admin.read')) {
        try {
          const first = await call<{ items: WaitingRun[]; total: number }>(session, 'GET', `${ADMIN}/jobs/runs?kind=job&limit=2000`, {
            signal,
          });
          runs.push(...first.items.filter((r) => r.job_type === 'agent' && r.state === 'waiting'));
        } catch (e) {
          problems.push(e);
        }
      }
      // Runs that wait on an operator for a call whose outcome was lost (any kind of run).
      try {
        if (can(session, 'system.orchestration.admin.read'))
          lost.push(
            ...(
              await call<{ items: WaitingRun[] }>(session, 'GET', `${ADMIN}/jobs/runs?kind=all&state=outcome_unknown&limit=200`, { signal })
            ).items,
          );
        else if (can(session, 'agent_teams.read'))
          lost.push(
            ...(await call<{ runs: WaitingRun[] }>(session, 'GET', `${TEAMS}/runs?state=outcome_unknown&limit=200`, { signal })).runs,
          );
      } catch (e) {
        problems.push(e);
      }
      return { runs, lost, problems };
    },
    [session],
    4000,
  );

  // Crew names for the cards, where the session may read crews.
  const crews = useLoad(
    async (signal) =>
      can(session, 'agent_teams.read')
        ? (await call<{ crews: { crew_id: string; name: string | null }[] }>(session, 'GET', `${TEAMS}/crews?limit=1000`, { signal })).crews
        : [],
    [session],
    60_000,
  );
  const crewName = (id: string | null) => (id ? ((crews.data ?? []).find((c) => c.crew_id === id)?.name ?? null) : null);
  const items = (data.data?.runs ?? []).flatMap((run) => (run.pending_approvals ?? []).map((a) => ({ run, a })));
  const me = session.principal.id;
  const mine = items.filter(({ run, a }) => whyNot(a, run, me, can(session, 'agent_teams.approve'), knowsPermissions(session)) === null);
  const others = items.filter((x) => !mine.includes(x));
  const cardOf = ({ run, a }: { run: WaitingRun; a: PendingApproval }) => (
    <ApprovalCard
      key={`${run.run_id}/${a.step_id}`}
      approval={a}
      run={run}
      onDecided={data.reload}
      showRun
      crewName={crewName(run.crew_id)}
    />
  );
  // "Nothing waits" only from an answer the cell just gave: never from data it could not confirm.
  const fresh = liveness.connected && !data.error && !(data.data?.problems.length ?? 0);
  const stale = <p class="notice stale">Unknown: the cell has not answered since {ago(liveness.lastOk)}.</p>;

  return (
    <>
      <h1>Approvals</h1>
      {!can(session, 'agent_teams.approve') && knowsPermissions(session) ? (
        <p class="notice" id="no-approve-permission">
          You can see what waits for approval, but your credential lacks the permission <code>agent_teams.approve</code>: you cannot decide.
        </p>
      ) : null}
      {data.data?.problems.map((p) => (
        <ErrorNote error={p} prefix="Some approvals could not be loaded" />
      ))}
      <ErrorNote error={data.error} prefix="Approvals could not be loaded" />
      {!data.data && data.loading ? <p role="status">Loading approvals…</p> : null}
      {data.data ? (
        <>
          <Section title={`Waiting for you (${fresh ? mine.length : 'unknown'})`} id="approvals-mine">
            {mine.length === 0 ? fresh ? <p class="muted">Nothing waits for your decision.</p> : stale : null}
            {mine.map(cardOf)}
          </Section>
          {data.data.lost.length > 0 ? (
            <Section title={`Lost outcomes (${fresh ? data.data.lost.length : 'unknown'})`} id="approvals-lost">
              <ul class="plain">
                {data.data.lost.map((r) => (
                  <li key={r.run_id} data-run={r.run_id} class="lost-outcome">
                    <a href={href('runs', r.run_id)}>
                      <code>{r.run_id}</code>
                    </a>{' '}
                    {r.unknown_outcome ? (
                      <>
                        · <code>{r.unknown_outcome.tool}</code> at <code>{r.unknown_outcome.step_id}</code>, effect key{' '}
                        <code class="hash">{r.unknown_outcome.effect_key}</code>, since <Time at={r.unknown_outcome.since} />
                      </>
                    ) : null}
                  </li>
                ))}
              </ul>
              <p class="muted">Each waits for an operator to retry the call, record its result or fail the run, on its page.</p>
            </Section>
          ) : null}
          <Section title={`Waiting for others (${fresh ? others.length : 'unknown'})`} id="approvals-others">
            {others.length === 0 ? fresh ? <p class="muted">None.</p> : stale : null}
            {others.map(cardOf)}
          </Section>
        </>
      ) : null}
    </>
  );
}
