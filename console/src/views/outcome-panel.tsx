/**
 * A run waiting `outcome_unknown` (issue 43 §5, docs/engine.md "Effect keys and the crash rule"): a
 * side-effecting call not declared idempotent was in flight when its driver stopped, or got no answer
 * after its request left, so the cell does not issue it again. The panel names the call (its step,
 * tool, seat, effect key, attempt, since when), then, for a session that may resolve it, the three
 * resolutions the cell takes (`POST …/outcomes/{step_id}`): retry with the same effect key, record
 * the result the operator found at the service, or fail the run; with a comment. Every resolution the
 * run's journal holds (`outcome_resolved` records) is listed with who resolved it and why.
 */
import { useState } from 'preact/hooks';
import { ADMIN, call, describeError, seg, TEAMS } from '../api.ts';
import { can } from '../auth/session.ts';
import type { RecordLike } from '../run-model.ts';
import { Time, useApp, Who } from '../ui.tsx';

export interface UnknownOutcome {
  step_id: string;
  tool: string;
  seat: string | null;
  effect_key: string;
  attempt: number;
  since: string;
}

type Resolution = 'retry' | 'record' | 'fail';

/** The route that resolves a run's lost outcome: the crew's for a crew run, the jobs' otherwise. */
function outcomePath(run: { run_id: string; kind: string; crew_id: string | null }, stepId: string): string {
  return run.kind === 'crew' && run.crew_id
    ? `${TEAMS}/crews/${seg(run.crew_id)}/runs/${seg(run.run_id)}/outcomes/${seg(stepId)}`
    : `${ADMIN}/jobs/runs/${seg(run.run_id)}/outcomes/${seg(stepId)}`;
}

/** Who may resolve: what the route needs (the cell checks the run's authority too). */
function mayResolve(session: ReturnType<typeof useApp>['session'], run: { kind: string }): boolean {
  return can(session, run.kind === 'crew' ? 'agent_teams.write' : 'system.orchestration.admin.write');
}

/** The resolutions a journal recorded, oldest first. */
export function Resolutions({ records }: { records: readonly RecordLike[] }) {
  const rs = records.filter((r) => r.kind === 'outcome_resolved');
  if (rs.length === 0) return null;
  return (
    <ul class="plain resolutions" aria-label="Resolutions of lost outcomes">
      {rs.map((r) => (
        <li key={r.seq} data-resolution={String(r.data?.['resolution'] ?? '')}>
          <Who id={typeof r.data?.['by'] === 'string' ? r.data['by'] : null} /> chose{' '}
          <strong>{String(r.data?.['resolution'] ?? '?')}</strong> for <code>{r.step_id}</code> (attempt{' '}
          {String(r.data?.['attempt'] ?? '?')}), <Time at={r.at} />
          {typeof r.data?.['comment'] === 'string' ? (
            <blockquote class="decision-comment">
              <bdi>{r.data['comment']}</bdi>
            </blockquote>
          ) : null}
        </li>
      ))}
    </ul>
  );
}

export function OutcomePanel({
  run,
  unknown,
  records,
  onResolved,
  onSelect,
}: {
  run: { run_id: string; kind: string; crew_id: string | null };
  unknown: UnknownOutcome;
  records: readonly RecordLike[];
  onResolved(): void;
  onSelect(): void;
}) {
  const { session } = useApp();
  const [comment, setComment] = useState('');
  const [result, setResult] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const resolve = async (resolution: Resolution) => {
    setError(null);
    let parsed: unknown;
    if (resolution === 'record') {
      try {
        parsed = JSON.parse(result);
      } catch {
        setError('The result must be JSON (what the service says the call did).');
        return;
      }
    }
    setBusy(true);
    try {
      await call(session, 'POST', outcomePath(run, unknown.step_id), {
        body: {
          resolution,
          ...(resolution === 'record' ? { result: parsed } : {}),
          ...(comment.trim() ? { comment: comment.trim() } : {}),
        },
      });
      setDone(
        resolution === 'retry' ? 'Retried with the same effect key.' : resolution === 'record' ? 'Result recorded.' : 'The run is failed.',
      );
      onResolved();
    } catch (e) {
      setError(describeError(e));
    } finally {
      setBusy(false);
    }
  };
  const id = 'outcome';
  return (
    <section class="panel failure outcome" aria-labelledby={`${id}-title`} id={id}>
      <h2 id={`${id}-title`}>Outcome unknown: an operator decides</h2>
      <p>
        A side-effecting call was in flight when its driver stopped, or got no answer after its request left: the service may have acted.
        The cell does not issue it again by itself. Check the service (by the effect key it saw), then retry, record what it did, or fail
        the run.
      </p>
      <dl class="facts">
        <dt>Step</dt>
        <dd>
          <button type="button" class="link" onClick={onSelect}>
            <code id="outcome-step">{unknown.step_id}</code>
          </button>
        </dd>
        <dt>Tool</dt>
        <dd>
          <code id="outcome-tool">{unknown.tool}</code>
          {unknown.seat ? (
            <span class="muted">
              {' '}
              · seat <code>{unknown.seat}</code>
            </span>
          ) : null}
        </dd>
        <dt>Effect key</dt>
        <dd>
          <code class="hash" id="outcome-effect-key">
            {unknown.effect_key}
          </code>{' '}
          <span class="muted">(the service saw it as Idempotency-Key, or in MCP _meta)</span>
        </dd>
        <dt>Attempt</dt>
        <dd id="outcome-attempt">{unknown.attempt}</dd>
        <dt>Since</dt>
        <dd>
          <Time at={unknown.since} />
        </dd>
      </dl>
      <Resolutions records={records} />
      {mayResolve(session, run) ? (
        <div class="decide">
          <label for="outcome-result">Result the service reports (JSON; for "Record the result")</label>
          <textarea id="outcome-result" rows={2} value={result} onInput={(e) => setResult((e.target as HTMLTextAreaElement).value)} />
          <label for="outcome-comment">Comment (optional)</label>
          <textarea
            id="outcome-comment"
            rows={2}
            maxLength={2000}
            value={comment}
            onInput={(e) => setComment((e.target as HTMLTextAreaElement).value)}
          />
          <div class="buttons">
            <button type="button" class="primary outcome-retry" disabled={busy} onClick={() => void resolve('retry')}>
              Retry with the same effect key
            </button>
            <button type="button" class="outcome-record" disabled={busy || result.trim() === ''} onClick={() => void resolve('record')}>
              Record the result
            </button>
            <button type="button" class="danger outcome-fail" disabled={busy} onClick={() => void resolve('fail')}>
              Fail the run
            </button>
          </div>
        </div>
      ) : (
        <p class="muted">
          Your credential cannot resolve it ({run.kind === 'crew' ? 'agent_teams.write' : 'system.orchestration.admin.write'}).
        </p>
      )}
      {done ? (
        <p role="status" class="ok">
          {done}
        </p>
      ) : null}
      {error ? (
        <p role="alert" class="error" id="outcome-error">
          {error}
        </p>
      ) : null}
    </section>
  );
}
