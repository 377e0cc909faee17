/**
 * Parts of the run view: the journal verification verdict, the journal table
 * (the failing record marked), the selected step's records with their
 * inputs and outputs (each checked against the hash its signed record names),
 * tokens per seat against the seat ceilings and agents' ledgers, and the
 * refusals with their reasons.
 */
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { ADMIN, call, describeError, seg, TEAMS } from '../api.ts';
import { can } from '../auth/session.ts';
import { recordHash } from '../../../core/journal/hash.ts';
import type { JournalRecord } from '../../../core/journal/record.ts';
import {
  formatDuration,
  nodeOfStep,
  timelineOf,
  type GraphLike,
  type NodeState,
  type RecordLike,
  type Refusal,
  type SeatTokens,
} from '../run-model.ts';
import { CopyButton, Json, Time, useApp, useLoad, Who } from '../ui.tsx';
import type { Triage } from '../triage.ts';
import { valueMatches, type Verification } from '../verify.ts';
import { DecisionLine, type DecisionLike } from './decision-list.tsx';

export interface FullRecord extends RecordLike {
  signer_kid: string;
  prev_hash: string;
  sig: string;
  run_id: string;
  graph_hash: string;
  v: number;
}

export function VerificationBanner({ v, pending, onVerify }: { v: Verification | null; pending: boolean; onVerify(): void }) {
  let body;
  if (!v)
    body = (
      <p class="verify verify-pending" id="journal-verdict" data-verdict="pending" role="status">
        Verifying the journal…
      </p>
    );
  else if (v.verdict.ok) {
    body = (
      <p class="verify verify-ok" id="journal-verdict" data-verdict="ok" role="status">
        <span aria-hidden="true">✔ </span>Journal verified in this browser: {v.count} record{v.count === 1 ? '' : 's'}, the hash chain and
        every Ed25519 signature hold (signed by{' '}
        {v.signers.map((k) => (
          <code title={k}>{k.slice(0, 12)}…</code>
        ))}{' '}
        of the cell's published keys).
      </p>
    );
  } else {
    body = (
      <p class="verify verify-bad" id="journal-verdict" data-verdict="bad" data-seq={v.verdict.seq} role="alert">
        <span aria-hidden="true">✘ </span>Journal verification failed at record{' '}
        <a
          href={`#journal-seq-${v.verdict.seq}`}
          onClick={(e) => {
            e.preventDefault();
            document.getElementById(`journal-seq-${v.verdict.ok ? 0 : v.verdict.seq}`)?.focus();
          }}
        >
          #{v.verdict.seq}
        </a>
        : {v.verdict.reason}. Records from #{v.verdict.seq} on cannot be trusted.
      </p>
    );
  }
  return (
    <div class="verify-wrap">
      {body}
      <button type="button" id="verify-again" onClick={onVerify} disabled={pending}>
        Verify again
      </button>
    </div>
  );
}

/** The role label of a node's seat, when it has one. */
function roleOf(graph: GraphLike | null, node: string): string | undefined {
  const n = graph?.nodes.find((x) => x.id === node);
  return n?.seat ? graph?.seats?.[n.seat]?.role_label : undefined;
}

export function JournalTable({ records, badSeq, graph }: { records: FullRecord[]; badSeq: number | null; graph: GraphLike | null }) {
  const ids = graph?.nodes.map((n) => n.id) ?? [];
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: the journal scrolls: reached with Tab (axe: scrollable-region-focusable).
    <section class="table-wrap journal" tabIndex={0} aria-label="Journal records (scrolls)">
      <table id="journal-table">
        <caption class="sr-only">Journal records in order</caption>
        <thead>
          <tr>
            <th scope="col">#</th>
            <th scope="col">Step</th>
            <th scope="col">Kind</th>
            <th scope="col">At</th>
            <th scope="col">Data</th>
            <th scope="col">Check</th>
          </tr>
        </thead>
        <tbody>
          {records.map((r) => {
            const bad = badSeq !== null && r.seq >= badSeq;
            const node = nodeOfStep(r.step_id, ids);
            return (
              <tr
                key={r.seq}
                id={`journal-seq-${r.seq}`}
                tabIndex={-1}
                class={bad ? (r.seq === badSeq ? 'bad first-bad' : 'bad') : ''}
                data-seq={r.seq}
              >
                <th scope="row" data-label="#">
                  {r.seq}
                </th>
                <td data-label="Step">
                  <code>{r.step_id}</code>
                  {node && node !== r.step_id ? (
                    <span class="muted">
                      {' '}
                      (<bdi>{roleOf(graph, node) ?? node}</bdi>)
                    </span>
                  ) : null}
                </td>
                <td data-label="Kind">{r.kind}</td>
                <td data-label="At">
                  <Time at={r.at} />
                </td>
                <td data-label="Data" class="data">
                  {r.data ? <code>{JSON.stringify(r.data).slice(0, 160)}</code> : <span class="muted">-</span>}
                </td>
                <td data-label="Check">
                  {badSeq === null ? (
                    <span class="ok-text">ok</span>
                  ) : r.seq === badSeq ? (
                    <strong class="bad-text">fails</strong>
                  ) : bad ? (
                    <span class="bad-text">untrusted</span>
                  ) : (
                    <span class="ok-text">ok</span>
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </section>
  );
}

/** A run's values by content hash, when the view already holds them (an imported edge journal carries its own). */
export type ValuesByHash = ReadonlyMap<string, unknown>;

export function ValueButton({ runId, hash, what, values }: { runId: string; hash: string; what: string; values?: ValuesByHash }) {
  const { session } = useApp();
  const [state, setState] = useState<{ value: unknown; ok: boolean } | { error: string } | null>(null);
  const show = async () => {
    try {
      const value =
        values !== undefined
          ? values.get(hash)
          : (await call<{ value: unknown }>(session, 'GET', `${ADMIN}/jobs/runs/${seg(runId)}/values/${seg(hash)}`)).value;
      setState({ value, ok: valueMatches(value, hash) });
    } catch (e) {
      setState({ error: describeError(e) });
    }
  };
  if (!state)
    return (
      <button type="button" class="small" onClick={show}>
        Show {what}
      </button>
    );
  if ('error' in state)
    return (
      <p class="error" role="alert">
        {what}: {state.error}
      </p>
    );
  return (
    <div class="value">
      <p class={state.ok ? 'ok-text' : 'bad-text'}>
        {what} {state.ok ? '(matches the hash in the signed record)' : '(does NOT match the hash in the signed record)'}
      </p>
      <Conversation value={state.value} />
      <Json value={state.value} label={what} />
    </div>
  );
}

export function StepDetails({
  runId,
  nodeId,
  graph,
  records,
  children,
}: {
  runId: string;
  nodeId: string;
  graph: GraphLike;
  records: FullRecord[];
  children?: ComponentChildren;
}) {
  const node = graph.nodes.find((n) => n.id === nodeId);
  const ids = graph.nodes.map((n) => n.id);
  const mine = records.filter((r) => nodeOfStep(r.step_id, ids) === nodeId);
  // Attempts of the step's calls under a retry policy (`attempt` records).
  const attempts = mine.filter((r) => r.kind === 'attempt');
  const seat = node?.seat ? graph.seats?.[node.seat] : undefined;
  return (
    <div id="step-details">
      <h3>
        Step <code>{nodeId}</code> <span class="muted">({node?.kind ?? 'step'})</span>
      </h3>
      {seat ? (
        <p>
          Seat{' '}
          <strong>
            <bdi>{seat.role_label}</bdi>
          </strong>
          , agent <code>{seat.agent_id ?? 'unbound'}</code>
        </p>
      ) : null}
      {attempts.length ? (
        <p id="step-attempts">
          Attempts:{' '}
          {attempts.map((a) => (
            <span key={a.seq} class={a.data?.['outcome'] === 'ok' ? 'good-text' : 'bad-text'}>
              #{String(a.data?.['attempt'] ?? '?')} {String(a.data?.['outcome'] ?? '')}
              {typeof a.data?.['reason'] === 'string' ? ` (${a.data['reason']})` : ''}
              {typeof a.data?.['retry_at'] === 'number' ? (
                <>
                  , retry at <Time at={a.data['retry_at']} />
                </>
              ) : null}{' '}
            </span>
          ))}
        </p>
      ) : null}
      {children}
      {node?.config && Object.keys(node.config).length ? (
        <details>
          <summary>Configuration</summary>
          <Json value={node.config} label="Step configuration" />
        </details>
      ) : null}
      {mine.length === 0 ? (
        <p class="muted">No record yet: the step has not started.</p>
      ) : (
        <ol class="step-records">
          {mine.map((r) => (
            <li key={r.seq}>
              <p>
                <strong>#{r.seq}</strong> <code>{r.step_id}</code> · {r.kind} · <Time at={r.at} />
                {typeof r.data?.['seat'] === 'string' ? (
                  <>
                    {' '}
                    · seat <bdi>{graph.seats?.[r.data['seat']]?.role_label ?? r.data['seat']}</bdi>
                  </>
                ) : null}
                {typeof r.data?.['usage'] === 'number' ? (
                  <>
                    {' '}
                    · <span class="tokens-call">{r.data['usage'].toLocaleString()} tokens</span>
                  </>
                ) : null}
              </p>
              {r.data ? <Json value={r.data} label={`Data of record ${r.seq}`} /> : null}
              <div class="io">
                <ValueButton runId={runId} hash={r.input_hash} what="input" />
                <ValueButton runId={runId} hash={r.output_hash} what="output" />
              </div>
              <Seal r={r} />
            </li>
          ))}
        </ol>
      )}
    </div>
  );
}

interface Ledger {
  budget_limit: number;
  spent: number;
  reserved: number;
  available: number;
}

/** The agent's ledger across all its runs; fetched again when this run's spend changes. */
function LedgerCell({ agentId, spent }: { agentId: string | null; spent: number }) {
  const { session } = useApp();
  const l = useLoad(
    async (signal) =>
      agentId && can(session, 'agent_teams.read')
        ? call<Ledger>(session, 'GET', `${TEAMS}/agents/${seg(agentId)}/budget-ledger`, { signal })
        : null,
    [agentId, session, spent],
  );
  if (!agentId) return <span class="muted">-</span>;
  if (l.error) return <span class="muted">unavailable</span>;
  if (!l.data) return <span class="muted">…</span>;
  return (
    <span>
      {l.data.spent.toLocaleString()} spent of {l.data.budget_limit.toLocaleString()} ({l.data.available.toLocaleString()} left)
    </span>
  );
}

export function TokensTable({ tokens, graph, max }: { tokens: SeatTokens[]; graph: GraphLike | null; max: number | null }) {
  const seats = Object.values(graph?.seats ?? {});
  const rows = seats.length
    ? seats.map(
        (s) => tokens.find((t) => t.seat === s.billet_id) ?? { seat: s.billet_id ?? '', agent_id: s.agent_id ?? null, tokens: 0, calls: 0 },
      )
    : tokens;
  return (
    <>
      <p>
        Run total, from the journal's model-call records:{' '}
        <strong id="tokens-total">{tokens.reduce((a, t) => a + t.tokens, 0).toLocaleString()}</strong> tokens
        {max !== null ? <> of a run budget of {max.toLocaleString()}</> : <> (no run token budget)</>}.
      </p>
      <div class="table-wrap">
        <table id="tokens-table">
          <caption class="sr-only">Tokens spent per seat</caption>
          <thead>
            <tr>
              <th scope="col">Seat</th>
              <th scope="col">Agent</th>
              <th scope="col">Model calls</th>
              <th scope="col">Tokens this run</th>
              <th scope="col">Seat ceiling</th>
              <th scope="col">Agent ledger</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((t) => {
              const seat = graph?.seats?.[t.seat];
              const ceiling = seat?.authority?.budget_ceiling ?? null;
              const over = ceiling !== null && t.tokens > ceiling;
              return (
                <tr key={t.seat}>
                  <th scope="row" data-label="Seat">
                    <bdi>{seat?.role_label ?? t.seat}</bdi>
                  </th>
                  <td data-label="Agent">
                    <code>{t.agent_id ?? seat?.agent_id ?? '-'}</code>
                  </td>
                  <td data-label="Model calls">{t.calls}</td>
                  <td data-label="Tokens this run" class={over ? 'bad-text' : ''}>
                    {t.tokens.toLocaleString()}
                  </td>
                  <td data-label="Seat ceiling">
                    {ceiling === null ? (
                      <span class="muted">none</span>
                    ) : (
                      `${ceiling.toLocaleString()}${ceiling ? ` (${Math.round((t.tokens / ceiling) * 100)}%)` : ''}`
                    )}
                  </td>
                  <td data-label="Agent ledger">
                    <LedgerCell agentId={t.agent_id ?? seat?.agent_id ?? null} spent={t.tokens} />
                  </td>
                </tr>
              );
            })}
            {rows.length === 0 ? (
              <tr>
                <td colSpan={6} class="muted">
                  No model call yet.
                </td>
              </tr>
            ) : null}
          </tbody>
        </table>
      </div>
    </>
  );
}

export function RefusalList({ refusals }: { refusals: Refusal[] }) {
  if (refusals.length === 0) return <p class="muted">No refusal.</p>;
  return (
    <ul class="refusals" id="refusals">
      {refusals.map((r) => (
        <li key={r.seq}>
          <strong class="bad-text">
            <bdi>{r.reason}</bdi>
          </strong>{' '}
          at <code>{r.step_id}</code> (record #{r.seq})
          <Json value={r.data} label={`Refusal ${r.seq}`} />
        </li>
      ))}
    </ul>
  );
}

/** Headlines of the failure panel, per kind of failure. */
const HEADLINE: Record<Triage['kind'], string> = {
  model: 'The model call failed',
  budget: 'Refused by a budget',
  policy: 'Refused by a rule of the cell',
  job: 'The job step failed',
  timeout: 'The step ran past its timeout',
  approval_rejected: 'An approver rejected the step',
  approval_timeout: 'The approval timed out',
  cancelled: 'The run was cancelled',
  storage: 'A storage limit was reached',
  outcome: "A call's outcome was lost, and an operator failed the run",
  other: 'The run ended badly',
};

/** A clock time with milliseconds (step deadlines are short), UTC on hover. */
function At({ ms }: { ms: number | null }) {
  if (ms === null) return <span class="muted">unknown</span>;
  const d = new Date(ms);
  return (
    <time dateTime={d.toISOString()} title={d.toISOString()}>
      {d.toLocaleTimeString(undefined, { hour12: false })}.{String(d.getMilliseconds()).padStart(3, '0')}
    </time>
  );
}

/**
 * Why the run ended badly, for every kind of failure (../triage.ts): the error's code, reason and the
 * registry's sentence; the step (a button that selects it in the graph) and its seat; then what that
 * kind needs: the provider's answer and the attempts of the retry policy, the limits of a refusal, the
 * failing statement or cell, the deadline, who rejected (with the comment) or when the approval timed
 * out, who cancelled.
 */
export function FailurePanel({
  t,
  state,
  graph,
  onSelect,
  node,
}: {
  t: Triage;
  state: string;
  graph: GraphLike | null;
  onSelect(id: string): void;
  node: string | null;
}) {
  const up = t.upstream;
  const seatId = t.seat ?? (node ? graph?.nodes.find((n) => n.id === node)?.seat : undefined) ?? null;
  const seat = seatId ? graph?.seats?.[seatId] : undefined;
  const a = t.attempts;
  return (
    <section class="panel failure" aria-labelledby="failure-title" id="failure" data-kind={t.kind}>
      <h2 id="failure-title">Why it {state === 'refused' ? 'was refused' : state === 'cancelled' ? 'was cancelled' : 'failed'}</h2>
      <p class="failure-headline" id="failure-headline">
        <strong>{HEADLINE[t.kind]}</strong>
        {t.step_id ? (
          <>
            {' '}
            at step <code class="wrap">{t.step_id}</code>
          </>
        ) : null}
        {seat?.role_label || seatId ? (
          <>
            {' '}
            (seat <bdi class="seat">{seat?.role_label ?? seatId}</bdi>)
          </>
        ) : null}
        .
      </p>
      <dl class="facts">
        <dt>Error</dt>
        <dd>
          <code id="failure-code">{t.code}</code>
          {t.reason ? (
            <>
              {' '}
              · <code id="failure-reason">{t.reason}</code>
            </>
          ) : null}
          {t.message ? (
            <span class="muted">
              {' '}
              — <bdi>{t.message}</bdi>
            </span>
          ) : null}
        </dd>
        {t.sentence ? (
          <>
            <dt>What it means</dt>
            <dd id="failure-sentence">{t.sentence}</dd>
          </>
        ) : null}
        {t.step_id ? (
          <>
            <dt>Step</dt>
            <dd>
              {node ? (
                <button type="button" class="link" onClick={() => onSelect(node)}>
                  <code id="failure-step" class="wrap">
                    {t.step_id}
                  </code>
                </button>
              ) : (
                <code id="failure-step" class="wrap">
                  {t.step_id}
                </code>
              )}
              {seat?.role_label || seatId ? (
                <span class="muted">
                  {' '}
                  · seat <bdi id="failure-seat">{seat?.role_label ?? seatId}</bdi>
                </span>
              ) : null}
            </dd>
          </>
        ) : null}
        {up ? (
          <>
            <dt>Model provider</dt>
            <dd id="failure-upstream">
              {up.provider_status !== undefined ? (
                <>
                  answered <strong>HTTP {up.provider_status}</strong>
                </>
              ) : (
                'gave no HTTP answer'
              )}
              {up.reason ? (
                <>
                  {' '}
                  (<code>{up.reason}</code>)
                </>
              ) : null}
              {up.message ? `: ${up.message}` : ''}
            </dd>
          </>
        ) : null}
        {a ? (
          <>
            <dt>Attempts</dt>
            <dd id="failure-attempts">
              {a.n} attempt{a.n === 1 ? '' : 's'} under the step's retry policy, {a.failed === a.n ? 'all failed' : `${a.failed} failed`}
              {a.reasons.length ? ` (${a.reasons.join(', ')})` : ''}
              {up?.attempts !== undefined && up.attempts > 1 ? `; the provider was asked ${up.attempts} times for the last` : ''}
            </dd>
          </>
        ) : up?.attempts !== undefined ? (
          <>
            <dt>Attempts</dt>
            <dd id="failure-attempts">
              {up.attempts} attempt{up.attempts === 1 ? '' : 's'}
              {up.attempts === 1 ? ' (the provider allows no retry: max_retries 0, or the error is not retried)' : ', all failed'}
            </dd>
          </>
        ) : null}
        {t.deadline ? (
          <>
            <dt>Deadline</dt>
            <dd id="failure-deadline">
              {t.deadline.timeout_ms.toLocaleString()} ms after the call started at <At ms={t.deadline.started_at} />: due{' '}
              <At ms={t.deadline.due_at} />, stopped <At ms={t.deadline.stopped_at} />
            </dd>
          </>
        ) : null}
        {t.rejected ? (
          <>
            <dt>Rejected by</dt>
            <dd id="failure-rejected">
              <DecisionLine
                d={{
                  principal: t.rejected.by,
                  chain: t.rejected.chain,
                  decision: 'reject',
                  comment: t.rejected.comment,
                  at: t.rejected.at === null ? '' : new Date(t.rejected.at).toISOString(),
                }}
              />
            </dd>
          </>
        ) : null}
        {t.timedOut ? (
          <>
            <dt>Timed out</dt>
            <dd id="failure-timed-out">
              due <At ms={t.timedOut.due} />, decided at <At ms={t.timedOut.at} />, after waiting since <At ms={t.timedOut.since} />;{' '}
              {t.timedOut.approved ?? 0} of {t.timedOut.quorum ?? '?'} approval{t.timedOut.quorum === 1 ? '' : 's'} came in time
            </dd>
          </>
        ) : null}
        {t.cell ? (
          <>
            <dt>Notebook cell</dt>
            <dd id="failure-cell">
              cell {t.cell.index + 1} ({t.cell.type})
              {t.cell.source !== null ? <SourceBlock text={t.cell.source} label={`Source of cell ${t.cell.index + 1}`} /> : null}
            </dd>
          </>
        ) : null}
        {t.statement ? (
          <>
            <dt>Statement</dt>
            <dd id="failure-statement">
              statement {t.statement.index + 1}
              {t.statement.sql !== null ? <SourceBlock text={t.statement.sql} label={`SQL of statement ${t.statement.index + 1}`} /> : null}
            </dd>
          </>
        ) : null}
        {t.facts.map((f) => (
          <>
            <dt>{f.label}</dt>
            <dd class="failure-fact" data-fact={f.label}>
              <bdi>{f.value}</bdi>
            </dd>
          </>
        ))}
        {t.resolvedBy ? (
          <>
            <dt>Failed by</dt>
            <dd id="failure-resolved-by">
              <Who id={t.resolvedBy} />
            </dd>
          </>
        ) : null}
        {t.cancelledBy ? (
          <>
            <dt>Cancelled by</dt>
            <dd id="failure-cancelled-by">
              <Who id={t.cancelledBy} />
            </dd>
          </>
        ) : null}
      </dl>
    </section>
  );
}

/** Source code (a SQL statement, a cell's script) as it was given, bidi-isolated, scrolling when long. */
export function SourceBlock({ text, label }: { text: string; label: string }) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling block is reached with Tab (axe: scrollable-region-focusable).
    // biome-ignore lint/a11y/useAriaPropsSupportedByRole: the label names the block for screen readers that announce it.
    <pre class="source" tabIndex={0} aria-label={label}>
      <bdi>{text}</bdi>
    </pre>
  );
}

/** An `approval_received` record as a decision: who (through which chain), what, when, the comment. */
function decisionOf(r: RecordLike): DecisionLike {
  const d = r.data ?? {};
  const chain = Array.isArray(d['chain']) ? d['chain'].filter((p): p is string => typeof p === 'string') : undefined;
  return {
    principal: String(d['by'] ?? ''),
    ...(chain ? { chain } : {}),
    decision: String(d['decision'] ?? ''),
    comment: typeof d['comment'] === 'string' ? d['comment'] : null,
    at: new Date(r.at).toISOString(),
  };
}

/** The run as a Gantt from the journal's times: one bar per step, waiting time hatched; also written out for screen readers. */
export function Timeline({
  graph,
  records,
  states,
  live,
  endedIn,
  onSelect,
}: {
  graph: GraphLike;
  records: FullRecord[];
  states: ReadonlyMap<string, NodeState>;
  live: boolean;
  /** The step the run ended in and its call's start, when the failure names them (triage.ts `deadline`). */
  endedIn?: { step_id: string; started_at: number } | null;
  onSelect(id: string): void;
}) {
  const t = timelineOf(graph, records, states, live ? Date.now() : (records[records.length - 1]?.at ?? Date.now()), endedIn);
  if (t.bars.length === 0) return <p class="muted">No step has started.</p>;
  const pct = (ms: number) => `${((ms / t.span) * 100).toFixed(2)}%`;
  // The decisions a step received (its `approval_received` records), shown on its row with their comments.
  const decisionsAt = (node: string) =>
    records.filter((r) => r.kind === 'approval_received' && (r.step_id === node || r.step_id.startsWith(`${node}/`)));
  const labelOf = (id: string) => {
    const n = graph.nodes.find((x) => x.id === id);
    return (n?.seat ? graph.seats?.[n.seat]?.role_label : undefined) ?? id;
  };
  return (
    <div class="timeline" id="timeline">
      <p class="muted small">0 → {formatDuration(t.span)} from the first record; hatched: waiting.</p>
      <ol class="plain">
        {t.bars.map((b) => {
          const waited = b.waits.reduce((a, w) => a + (w.end - w.start), 0);
          return (
            <li key={b.node} class="tl-row" data-node={b.node}>
              <button type="button" class="link tl-label" onClick={() => onSelect(b.node)}>
                <bdi>{labelOf(b.node)}</bdi>
              </button>
              <span class="tl-track" aria-hidden="true">
                <span
                  class={`tl-bar state-${states.get(b.node) ?? 'pending'}`}
                  style={{ left: pct(b.start), width: pct(Math.max(b.end - b.start, t.span / 200)) }}
                />
                {b.waits.map((w) => (
                  <span class="tl-wait" style={{ left: pct(w.start), width: pct(Math.max(w.end - w.start, t.span / 200)) }} />
                ))}
              </span>
              <span class="tl-text small">
                +{formatDuration(b.start)}, {formatDuration(b.end - b.start)}
                {b.open ? ' so far' : ''}
                {waited > 0 ? `, waited ${formatDuration(waited)} (${[...new Set(b.waits.map((w) => w.for))].join(', ')})` : ''}
              </span>
              {decisionsAt(b.node).map((r) => (
                <span class="tl-decision small" key={r.seq}>
                  <DecisionLine d={decisionOf(r)} />
                </span>
              ))}
            </li>
          );
        })}
      </ol>
    </div>
  );
}

/** A record's seal: its hash, the previous record's, its signer and signature, each copyable. */
export function Seal({ r }: { r: FullRecord }) {
  const hash = recordHash(r as unknown as JournalRecord);
  const rows: [string, string][] = [
    ['Record hash', hash],
    ['Previous hash', r.prev_hash],
    ['Signer', r.signer_kid],
    ['Signature', r.sig],
  ];
  return (
    <details class="seal">
      <summary>Seal of record #{r.seq}</summary>
      <dl class="facts">
        {rows.map(([k, v]) => (
          <>
            <dt>{k}</dt>
            <dd>
              <code class="hash">{v}</code> <CopyButton text={v} label={`Copy the ${k.toLowerCase()} of record ${r.seq}`} />
            </dd>
          </>
        ))}
      </dl>
    </details>
  );
}

interface Msg {
  role?: string;
  content?: unknown;
  tool_calls?: { id?: string; name?: string; arguments?: unknown; function?: { name?: string; arguments?: unknown } }[];
  tool_call_id?: string;
}

/** A model call's messages, or its answer, as a conversation; null when the value is neither. */
export function Conversation({ value }: { value: unknown }) {
  const v = value as { messages?: unknown; content?: unknown; tool_calls?: unknown; usage?: unknown } | null;
  if (typeof v !== 'object' || v === null) return null;
  const msgs: Msg[] = Array.isArray(v.messages)
    ? (v.messages as Msg[])
    : 'content' in v || Array.isArray(v.tool_calls)
      ? [
          {
            role: 'assistant',
            content: v.content,
            tool_calls: (Array.isArray(v.tool_calls) ? v.tool_calls : []) as NonNullable<Msg['tool_calls']>,
          },
        ]
      : [];
  if (msgs.length === 0) return null;
  return (
    <ol class="conversation plain">
      {msgs.map((m, i) => (
        <li key={i} class={`msg msg-${m.role ?? 'other'}`}>
          <strong class="msg-role">{m.role ?? 'message'}</strong>
          {m.tool_call_id ? <span class="muted small"> (result of {m.tool_call_id})</span> : null}
          {typeof m.content === 'string' && m.content !== '' ? (
            <p class="msg-text">
              <bdi>{m.content}</bdi>
            </p>
          ) : null}
          {(m.tool_calls ?? []).map((c) => (
            <p class="msg-tool">
              calls <code>{c.name ?? c.function?.name}</code>{' '}
              <code class="small">{JSON.stringify(c.arguments ?? c.function?.arguments ?? {}).slice(0, 300)}</code>
            </p>
          ))}
        </li>
      ))}
    </ol>
  );
}
