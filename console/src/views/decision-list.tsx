/**
 * The decisions a run's steps received, kept after the step is decided (issue 43 §1): who decided
 * (and, through an exchanged token, the actors of its chain), approve or reject, when, and the
 * comment. Comments and names are bidirectionally isolated (`<bdi>`), so a right-to-left override
 * in a comment cannot reorder what is shown beside it.
 */
import { Time, Who, WhoList } from '../ui.tsx';

export interface DecisionLike {
  step_id?: string;
  principal: string;
  /** The principal, then the actors of the token it decided with (older cells: absent). */
  chain?: string[];
  decision: string;
  comment?: string | null;
  at: string;
}

/** "approved" / "rejected" (or the cell's word for a decision this console does not know). */
export function decided(d: { decision: string }): string {
  return d.decision === 'approve' ? 'approved' : d.decision === 'reject' ? 'rejected' : d.decision;
}

/** One decision: who (through whom), what, when, why. */
export function DecisionLine({ d, step }: { d: DecisionLike; step?: boolean }) {
  const through = (d.chain ?? []).filter((p) => p !== d.principal);
  return (
    <>
      <Who id={d.principal} />
      {through.length > 0 ? (
        <span class="muted">
          {' '}
          (through <WhoList ids={through} />)
        </span>
      ) : null}{' '}
      <span class={d.decision === 'reject' ? 'bad-text' : ''}>{decided(d)}</span>
      {step && d.step_id ? (
        <>
          {' '}
          <code>
            <bdi>{d.step_id}</bdi>
          </code>
        </>
      ) : null}{' '}
      <Time at={d.at} />
      {d.comment ? (
        <blockquote class="decision-comment">
          <bdi>{d.comment}</bdi>
        </blockquote>
      ) : null}
    </>
  );
}

/** Every decision of a run, oldest first. */
export function DecisionList({ decisions, label }: { decisions: DecisionLike[]; label: string }) {
  return (
    <ul class="decisions" aria-label={label}>
      {decisions.map((d) => (
        <li key={`${d.step_id ?? ''}:${d.principal}:${d.at}`}>
          <DecisionLine d={d} step />
        </li>
      ))}
    </ul>
  );
}
