/**
 * One run, live: its facts, the formation graph drawn with each step coloured
 * by its state as the journal grows (snapshot from `GET .../journal`, then
 * every new record from the SSE stream, resumed with Last-Event-ID), the
 * approvals it waits for, tokens per seat against budgets, refusals with
 * their reasons, the selected step's records with inputs and outputs, and
 * the journal verified in this browser after every change.
 *
 * The graph is the crew's compiled graph (`GET .../formations/{id}/graph`
 * bound to the crew) when its hash is the run's graph hash; otherwise (job
 * runs, or a formation changed since) a graph drawn from the journal's steps.
 */
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { ADMIN, ApiError, call, describeError, seg, TEAMS } from '../api.ts';
import { can } from '../auth/session.ts';
import { GraphView } from '../graph/GraphView.tsx';
import {
  formatDuration,
  journalGraph,
  liveRunState,
  nodeOfStep,
  nodeStates,
  refusalsOf,
  tokensBySeat,
  type GraphLike,
} from '../run-model.ts';
import { ago, useLiveness } from '../liveness.ts';
import { triage } from '../triage.ts';
import { href } from '../router.ts';
import { follow } from '../sse.ts';
import { LiveAnswers } from '../../../core/engine/live-answers.ts';
import type { StepDelta } from '../../../core/engine/types.ts';
import { Confirm, ErrorNote, Json, Section, StateBadge, Time, useApp, useLoad, Who } from '../ui.tsx';
import { buildExport, type CarriedParent } from '../carry.ts';
import { cellKeys, checkAttestation, verifyRunJournal, type AttestationCheck, type Verification } from '../verify.ts';
import type { PendingApproval } from '../approval-model.ts';
import { ApprovalCard } from './approval-card.tsx';
import { DecisionLine, DecisionList, type DecisionLike } from './decision-list.tsx';
import { JobOutput } from './job-output.tsx';
import { ToolCalls, toolCallsOf } from './tool-calls.tsx';
import { OutcomePanel, Resolutions, type UnknownOutcome } from './outcome-panel.tsx';
import {
  FailurePanel,
  JournalTable,
  RefusalList,
  StepDetails,
  Timeline,
  TokensTable,
  VerificationBanner,
  type FullRecord,
} from './run-parts.tsx';

interface RunStatus {
  run_id: string;
  kind: string;
  job_type: string | null;
  crew_id: string | null;
  workspace_id: string | null;
  requester: string;
  state: string;
  graph_hash: string | null;
  spec: unknown;
  output: unknown;
  error: { code: string; message: string; reason?: string; details?: Record<string, unknown> } | null;
  flags: Record<string, unknown>;
  created_at: string;
  finished_at: string | null;
  source?: string;
  stalled?: boolean;
  pending_approvals?: PendingApproval[];
  /** Every decision of the run, decided steps included (crew runs and agent job runs). */
  decisions?: DecisionLike[];
  forked_from?: { run_id: string; seq: number; record_hash: string } | null;
  forks?: { run_id: string; seq: number; by: string; at: string }[];
  /** While the run waits `outcome_unknown`: the side-effecting call whose outcome was lost. */
  unknown_outcome?: UnknownOutcome | null;
}
interface CrewRunStatus {
  formation_id: string | null;
  input: unknown;
  tokens_used: number;
  max_tokens: number | null;
  investigate: unknown;
  pending_approvals: PendingApproval[];
}

/** Records a fork may start at (cell/runs/fork.ts FORK_KINDS). */
const FORKABLE = new Set(['step', 'decision', 'intent', 'attempt', 'refusal', 'waiting', 'run_finished']);

type StreamState = 'loading' | 'live' | 'reconnecting' | 'ended' | 'error';

/** The journal of a run: the snapshot, then live records over SSE until the run ends. */
function useJournal(runId: string) {
  const { session, refused } = useApp();
  const [records, setRecords] = useState<FullRecord[]>([]);
  const [stream, setStream] = useState<StreamState>('loading');
  const [error, setError] = useState<unknown>(null);
  const [epoch, setEpoch] = useState(0);
  // Live tokens: the answers so far of model steps in flight, from `delta` frames (not journal records).
  const live = useRef(new LiveAnswers());
  const [liveTick, setLiveTick] = useState(0);
  useEffect(() => {
    const ac = new AbortController();
    live.current = new LiveAnswers();
    setLiveTick((t) => t + 1);
    setStream('loading');
    (async () => {
      const j = await call<{ records: FullRecord[]; finished: boolean }>(session, 'GET', `${ADMIN}/jobs/runs/${seg(runId)}/journal`, {
        signal: ac.signal,
      });
      if (ac.signal.aborted) return;
      setRecords(j.records);
      if (j.finished) {
        setStream('ended');
        return;
      }
      const last = j.records[j.records.length - 1]?.seq ?? 0;
      let gap = false;
      await follow({
        signal: ac.signal,
        lastEventId: String(last),
        open: (lastId, signal) =>
          session.request('GET', `${ADMIN}/jobs/runs/${seg(runId)}/events/sse`, {
            headers: { accept: 'text/event-stream', ...(lastId ? { 'last-event-id': lastId } : {}) },
            signal,
          }),
        onOpen: () => setStream('live'),
        onEvent(ev) {
          if (ev.event === 'delta') {
            try {
              live.current.apply(JSON.parse(ev.data) as StepDelta);
            } catch {
              return undefined;
            }
            setLiveTick((t) => t + 1);
            return undefined;
          }
          let rec: FullRecord;
          try {
            rec = JSON.parse(ev.data) as FullRecord;
          } catch {
            return undefined;
          }
          // The step's record carries its whole answer: its live text is done.
          if (rec.kind !== 'intent' && live.current.size > 0) {
            live.current.end(rec.step_id);
            if (rec.kind === 'run_finished') live.current = new LiveAnswers();
            setLiveTick((t) => t + 1);
          }
          setRecords((rs) => {
            const tail = rs[rs.length - 1]?.seq ?? 0;
            if (rec.seq <= tail) return rs;
            if (rec.seq !== tail + 1) gap = true;
            return [...rs, rec];
          });
          if (gap) {
            setEpoch((e) => e + 1);
            return 'stop';
          }
          return ev.event === 'run_finished' ? 'stop' : undefined;
        },
        onError(e) {
          setError(e);
          setStream('error');
        },
      });
      if (!ac.signal.aborted) setStream((s) => (s === 'error' ? s : 'ended'));
    })().catch((e: unknown) => {
      if (ac.signal.aborted) return;
      if (e instanceof ApiError && e.status === 401) refused();
      setError(e);
      setStream('error');
    });
    return () => ac.abort();
  }, [runId, session, epoch]);
  const answers = useMemo(() => liveAnswersOf(live.current.catchUp()), [liveTick]);
  return { records, stream, error, answers, reload: () => setEpoch((e) => e + 1) };
}

interface LiveAnswer {
  step_id: string;
  role_label: string;
  text: string;
  calls: { index: number; name: string; text: string }[];
}

/** The answers so far, one per step in flight (its text and tool calls), for display. */
function liveAnswersOf(parts: StepDelta[]): LiveAnswer[] {
  const by = new Map<string, LiveAnswer>();
  for (const d of parts) {
    let a = by.get(d.step_id);
    if (!a) {
      a = { step_id: d.step_id, role_label: d.role_label, text: '', calls: [] };
      by.set(d.step_id, a);
    }
    if (d.tool_call) a.calls.push({ index: d.tool_call.index, name: d.tool_call.name ?? '?', text: d.text });
    else a.text = d.text;
  }
  return [...by.values()];
}

/** Model steps answering now: the text grows as the tokens arrive. */
function AnsweringNow({ answers }: { answers: LiveAnswer[] }) {
  return (
    <Section title="Answering now" id="live-answers">
      {answers.map((a) => (
        <div class="live-answer" key={a.step_id} data-step={a.step_id}>
          <p>
            <strong>
              <bdi>{a.role_label}</bdi>
            </strong>{' '}
            <code>{a.step_id}</code>
          </p>
          {a.text ? (
            <pre class="live-text" aria-live="polite">
              {a.text}
            </pre>
          ) : null}
          {a.calls.map((c) => (
            <p class="live-call" key={c.index}>
              calls <code>{c.name}</code> <code>{c.text}</code>
            </p>
          ))}
        </div>
      ))}
    </Section>
  );
}

async function loadStatus(
  session: ReturnType<typeof useApp>['session'],
  runId: string,
  signal: AbortSignal,
): Promise<{ run: RunStatus; crew: CrewRunStatus | null; crewName: string | null }> {
  let run: RunStatus;
  if (can(session, 'system.orchestration.admin.read')) {
    const r = await call<RunStatus | { state: 'unknown' }>(session, 'GET', `${ADMIN}/jobs/runs/${seg(runId)}`, { signal });
    if (r.state === 'unknown') throw new ApiError(404, 'not_found', 'no such run on this cell', { reason: 'unknown_run' });
    run = r as RunStatus;
  } else {
    const list = await call<{ runs: (RunStatus & CrewRunStatus)[] }>(session, 'GET', `${TEAMS}/runs?limit=1000`, { signal });
    const found = list.runs.find((x) => x.run_id === runId);
    if (!found) throw new ApiError(404, 'not_found', 'no such crew run', { reason: 'unknown_run' });
    run = found;
  }
  let crew: CrewRunStatus | null = null;
  let crewName: string | null = null;
  if (run.kind === 'crew' && run.crew_id && can(session, 'agent_teams.read')) {
    const [c, named] = await Promise.all([
      call<CrewRunStatus>(session, 'GET', `${TEAMS}/crews/${seg(run.crew_id)}/runs/${seg(runId)}`, { signal }),
      call<{ name?: string | null }>(session, 'GET', `${TEAMS}/crews/${seg(run.crew_id)}`, { signal }).catch(() => null),
    ]);
    crew = c;
    crewName = named?.name ?? null;
  }
  return { run, crew, crewName };
}

export function RunView({ runId }: { runId: string }) {
  const { session, config } = useApp();
  const liveness = useLiveness();
  const status = useLoad((signal) => loadStatus(session, runId, signal), [runId, session]);
  const journal = useJournal(runId);
  const run = status.data?.run;
  const crew = status.data?.crew ?? null;

  // The status (approvals, tokens, state) follows the journal: fetch it again shortly after records arrive.
  const count = journal.records.length;
  const reloadStatus = status.reload;
  const firstCount = useRef(true);
  useEffect(() => {
    if (firstCount.current) {
      firstCount.current = false;
      return undefined;
    }
    const t = setTimeout(reloadStatus, 250);
    return () => clearTimeout(t);
  }, [count]);

  const formationId = crew?.formation_id ?? null;
  // The compiled graph of a crew run; `for` names what it was loaded for, so a stale answer is never drawn.
  const wanted =
    run && run.kind === 'crew' && formationId && run.crew_id && can(session, 'agent_teams.read') ? `${formationId}/${run.crew_id}` : null;
  const compiled = useLoad(
    async (signal) => {
      if (!wanted || !run?.crew_id || !formationId) return { for: wanted, graph: null, graph_hash: null };
      const g = await call<{ graph: GraphLike; graph_hash: string }>(
        session,
        'GET',
        `${TEAMS}/formations/${seg(formationId)}/graph?crew_id=${encodeURIComponent(run.crew_id)}`,
        { signal },
      );
      return { for: wanted, graph: g.graph, graph_hash: g.graph_hash };
    },
    [wanted, session],
  );

  const current = compiled.data && compiled.data.for === wanted ? compiled.data : null;
  const graphMismatch = current?.graph_hash != null && run?.graph_hash != null && current.graph_hash !== run.graph_hash;
  const graph: GraphLike | null = useMemo(() => {
    if (!run) return null;
    if (wanted) {
      if (current?.graph && !graphMismatch) return current.graph;
      if (!current && !compiled.error) return null; // still loading the compiled graph
    }
    return journalGraph(journal.records);
  }, [run?.kind, wanted, current, compiled.error, graphMismatch, journal.records]);

  const state = run ? liveRunState(journal.records, run.state) : 'loading';
  const states = useMemo(() => (graph ? nodeStates(graph, journal.records, state) : new Map()), [graph, journal.records, state]);
  const terminal = ['completed', 'failed', 'refused', 'cancelled'].includes(state);
  const failure = run && terminal && state !== 'completed' ? triage(run, journal.records) : null;
  const failedNode =
    failure?.step_id && graph
      ? nodeOfStep(
          failure.step_id,
          graph.nodes.map((n) => n.id),
        )
      : null;
  // The failing step is selected until the operator picks another (or none).
  const [picked, setPicked] = useState<string | null | undefined>(undefined);
  const selected = picked === undefined ? failedNode : picked;
  const setSelected = setPicked;

  // Verify the journal in this browser after every change.
  const [verification, setVerification] = useState<Verification | null>(null);
  const [verifyTick, setVerifyTick] = useState(0);
  const [verifyError, setVerifyError] = useState<unknown>(null);
  useEffect(() => {
    if (journal.stream === 'loading') return undefined;
    let live = true;
    setVerification(null);
    const t = setTimeout(() => {
      verifyRunJournal(journal.records).then(
        (v) => {
          if (live) {
            setVerification(v);
            setVerifyError(null);
          }
        },
        (e: unknown) => {
          if (live) setVerifyError(e);
        },
      );
    }, 200);
    return () => {
      live = false;
      clearTimeout(t);
    };
  }, [journal.records, journal.stream === 'loading', verifyTick]);

  // The run's attestation (issue 41), checked in this browser on demand: signature, inclusion in the run log,
  // consistency with the checkpoint this browser saw before.
  const [attestation, setAttestation] = useState<AttestationCheck | 'checking' | null>(null);
  const checkRunAttestation = async () => {
    setAttestation('checking');
    try {
      const path =
        run?.kind === 'crew' && run.crew_id && !can(session, 'system.orchestration.admin.read')
          ? `${TEAMS}/crews/${seg(run.crew_id)}/runs/${seg(runId)}/attestation`
          : `${ADMIN}/jobs/runs/${seg(runId)}/attestation`;
      setAttestation(await checkAttestation(await call<unknown>(session, 'GET', path)));
    } catch (e) {
      setAttestation({ ok: false, reason: describeError(e) });
    }
  };

  const [cancelAsk, setCancelAsk] = useState(false);
  const [cancelError, setCancelError] = useState<string | null>(null);
  const cancel = async () => {
    setCancelError(null);
    try {
      await call(session, 'POST', `${ADMIN}/jobs/runs/${seg(runId)}/cancel`);
      setCancelAsk(false);
      status.reload();
    } catch (e) {
      setCancelError(describeError(e));
    }
  };

  // Fork and rerun (issue #24): a new run reusing every answer recorded before the fork point.
  const mayFork =
    run?.kind === 'crew' &&
    !!run.crew_id &&
    can(session, 'agent_teams.write') &&
    (can(session, 'agent_teams.read') || can(session, 'system.orchestration.admin.read'));
  const mayRerun = terminal && state !== 'completed' && (run?.kind === 'crew' ? mayFork : can(session, 'system.orchestration.admin.write'));
  const [forkError, setForkError] = useState<string | null>(null);
  const forkAt = async (at: number | null) => {
    if (!run) return;
    setForkError(null);
    try {
      const made =
        run.kind === 'crew' && run.crew_id
          ? await call<{ run_id: string }>(session, 'POST', `${TEAMS}/crews/${seg(run.crew_id)}/runs/${seg(runId)}/fork`, {
              body: { at: at ?? journal.records.at(-1)?.seq ?? 1 },
            })
          : await call<{ run_id: string }>(session, 'POST', `${ADMIN}/jobs/runs/${seg(runId)}/rerun`);
      window.location.hash = href('runs', made.run_id);
    } catch (e) {
      setForkError(describeError(e));
    }
  };
  /** A fork's parents, each through its fork point, for the export (what an offline verifier needs). */
  const parentsOf = async (records: readonly FullRecord[], depth = 0): Promise<CarriedParent | undefined> => {
    const from = records[0]?.kind === 'forked' ? (records[0].data?.['from'] as { run_id?: unknown; seq?: unknown } | undefined) : undefined;
    if (depth > 16 || typeof from?.run_id !== 'string' || typeof from.seq !== 'number') return undefined;
    const j = await call<{ records: FullRecord[] }>(session, 'GET', `${ADMIN}/jobs/runs/${seg(from.run_id)}/journal?limit=${from.seq}`);
    const up = await parentsOf(j.records, depth + 1);
    return { run_id: from.run_id, records: j.records, ...(up ? { parent: up } : {}) };
  };
  /** The record a "fork here" on a step forks at: the step's own record, else its last. */
  const forkPointOf = (nodeId: string): number | null => {
    const ids = graph ? graph.nodes.map((n) => n.id) : [];
    const mine = journal.records.filter((r) => nodeOfStep(r.step_id, ids) === nodeId && FORKABLE.has(r.kind));
    return (mine.find((r) => r.step_id === nodeId) ?? mine.at(-1))?.seq ?? null;
  };
  const lineage = run ? ((crew as (CrewRunStatus & Partial<RunStatus>) | null) ?? run) : null;

  // One file: the records and the public keys that signed them (verify it offline on the Verify view, or anywhere).
  const download = async () => {
    const keys = await cellKeys().catch(() => ({ keys: new Map<string, JsonWebKey>() }));
    const file = buildExport(runId, config.cell_id, journal.records, keys.keys, await parentsOf(journal.records));
    const url = URL.createObjectURL(new Blob([JSON.stringify(file, null, 1)], { type: 'application/json' }));
    const a = document.createElement('a');
    a.href = url;
    a.download = `journal-${runId}.json`;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 30_000);
  };

  const pending = crew?.pending_approvals ?? run?.pending_approvals ?? [];
  const decisions = run?.decisions ?? [];
  // A run an approver rejected says who and why: the rejecting decision (or, from the error alone, who).
  const rejection: DecisionLike | null =
    run?.error?.reason === 'approval_rejected'
      ? (decisions.find((d) => d.decision === 'reject') ??
        (typeof run.error.details?.['by'] === 'string'
          ? {
              principal: run.error.details['by'],
              decision: 'reject',
              comment: typeof run.error.details['comment'] === 'string' ? run.error.details['comment'] : null,
              at: run.finished_at ?? run.created_at,
            }
          : null))
      : null;
  const badSeq = verification && !verification.verdict.ok ? verification.verdict.seq : null;
  const tokens = useMemo(() => tokensBySeat(journal.records), [journal.records]);
  const refusals = useMemo(() => refusalsOf(journal.records), [journal.records]);
  const toolCalls = useMemo(() => toolCallsOf(journal.records, graph), [journal.records, graph]);
  const finishedAt = run?.finished_at ? Date.parse(run.finished_at) : null;

  return (
    <>
      <p class="crumbs">
        <a href={href('runs')}>Runs</a> › <code>{runId}</code>
      </p>
      <h1>
        Run <code>{runId}</code> {run ? <StateBadge state={state} /> : null}
        {run?.stalled && !terminal ? (
          <>
            {' '}
            <span class="state state-stalled" id="run-stalled">
              stalled
            </span>
          </>
        ) : null}
      </h1>
      {run?.stalled && !terminal ? (
        <p class="notice" id="stalled-note">
          Stalled: the journal has made no progress for longer than the cell expects. Its driver may have stopped; see the Cells view.
        </p>
      ) : null}
      <p class="muted" role="status" id="stream-state">
        {journal.stream !== 'ended' && !liveness.connected
          ? `Not live: the cell has not answered since ${ago(liveness.lastOk)}; the stream resumes when it does.`
          : journal.stream === 'live'
            ? "Live: following the run's event stream."
            : journal.stream === 'ended'
              ? 'The run has ended; its journal is complete.'
              : journal.stream === 'error'
                ? 'The event stream stopped.'
                : 'Loading…'}
      </p>
      <ErrorNote error={status.error} prefix="The run could not be loaded" />
      <ErrorNote error={journal.error} prefix="The journal could not be followed" />
      {run ? (
        <dl class="facts run-facts">
          <dt>Kind</dt>
          <dd>
            {run.kind}
            {run.job_type ? ` · ${run.job_type}` : ''}
          </dd>
          {run.crew_id ? (
            <>
              <dt>Crew</dt>
              <dd id="run-crew">
                {status.data?.crewName ? (
                  <>
                    <bdi>{status.data.crewName}</bdi>{' '}
                  </>
                ) : null}
                <code>{run.crew_id}</code>
                {formationId ? (
                  <>
                    {' '}
                    · formation{' '}
                    <a href={href('formations', formationId)}>
                      <code>{formationId}</code>
                    </a>
                  </>
                ) : null}
              </dd>
            </>
          ) : null}
          <dt>Requester</dt>
          <dd>
            <Who id={run.requester} />
          </dd>
          <dt>Started</dt>
          <dd>
            <Time at={run.created_at} />
          </dd>
          <dt>Finished</dt>
          <dd>
            <Time at={run.finished_at} />
          </dd>
          <dt>Duration</dt>
          <dd>
            {formatDuration((finishedAt ?? Date.now()) - Date.parse(run.created_at))}
            {finishedAt === null ? ' so far' : ''}
          </dd>
          <dt>Graph hash</dt>
          <dd>
            <code class="hash">{run.graph_hash ?? '-'}</code>
          </dd>
          {lineage?.forked_from ? (
            <>
              <dt>Forked from</dt>
              <dd id="forked-from">
                <a href={href('runs', lineage.forked_from.run_id)}>
                  <code>{lineage.forked_from.run_id}</code>
                </a>{' '}
                at record #{lineage.forked_from.seq}
              </dd>
            </>
          ) : null}
          {lineage?.forks?.length ? (
            <>
              <dt>Forks</dt>
              <dd id="run-forks">
                {lineage.forks.map((f) => (
                  <span key={f.run_id}>
                    <a href={href('runs', f.run_id)}>
                      <code>{f.run_id}</code>
                    </a>{' '}
                    (at #{f.seq}){' '}
                  </span>
                ))}
              </dd>
            </>
          ) : null}
          {crew?.investigate ? (
            <>
              <dt>Flag</dt>
              <dd class="bad-text">
                investigate: <code>{JSON.stringify(crew.investigate)}</code>
              </dd>
            </>
          ) : null}
          {run.error ? (
            <>
              <dt>Error</dt>
              <dd class="bad-text">
                <code>{run.error.code}</code>
                {run.error.reason ? (
                  <>
                    {' '}
                    · <code>{run.error.reason}</code>
                  </>
                ) : null}
                : <bdi>{run.error.message}</bdi>
                {rejection ? (
                  <div id="run-rejection">
                    <DecisionLine d={rejection} step />
                  </div>
                ) : null}
              </dd>
            </>
          ) : null}
        </dl>
      ) : null}
      {run && !terminal && can(session, 'system.orchestration.admin.write') ? (
        <div class="buttons">
          {cancelAsk ? (
            <Confirm
              question="Cancel this run?"
              act="Confirm cancel"
              cls="danger"
              id="cancel-confirm"
              keep="Keep running"
              onConfirm={cancel}
              onKeep={() => setCancelAsk(false)}
            />
          ) : (
            <button type="button" id="cancel-run" onClick={() => setCancelAsk(true)}>
              Cancel run
            </button>
          )}
          {cancelError ? (
            <p class="error" role="alert">
              {cancelError}
            </p>
          ) : null}
        </div>
      ) : null}

      {mayRerun ? (
        <div class="buttons">
          <button type="button" id="rerun-run" onClick={() => void forkAt(null)}>
            Rerun from the failure
          </button>
        </div>
      ) : null}
      {forkError ? (
        <p class="error" role="alert" id="fork-error">
          {forkError}
        </p>
      ) : null}

      {failure ? <FailurePanel t={failure} state={state} graph={graph} node={failedNode} onSelect={(id) => setPicked(id)} /> : null}

      {run?.unknown_outcome && !terminal ? (
        <OutcomePanel
          run={run}
          unknown={run.unknown_outcome}
          records={journal.records}
          onResolved={status.reload}
          onSelect={() =>
            graph &&
            setPicked(
              nodeOfStep(
                run.unknown_outcome!.step_id,
                graph.nodes.map((n) => n.id),
              ),
            )
          }
        />
      ) : terminal && journal.records.some((r) => r.kind === 'outcome_resolved') ? (
        <Section title="Lost outcomes" id="outcome-history">
          <Resolutions records={journal.records} />
        </Section>
      ) : null}

      {journal.answers.length > 0 && !terminal ? <AnsweringNow answers={journal.answers} /> : null}

      <Section title="Graph" id="graph">
        {badSeq !== null ? (
          <p class="error">
            The journal fails verification from record #{badSeq}: step states drawn from that record on cannot be trusted.
          </p>
        ) : null}
        {graphMismatch ? (
          <p class="notice">
            The formation changed since this run started (graph hash differs): the diagram is drawn from the run's journal.
          </p>
        ) : null}
        {graph ? (
          <>
            <GraphView
              graph={graph}
              states={states}
              selected={selected}
              onSelect={(id) => setSelected(id === selected ? null : id)}
              label={`Execution graph of run ${runId}: ${graph.nodes.length} steps. Select a step for its records.`}
            />
            {selected ? (
              <StepDetails runId={runId} nodeId={selected} graph={graph} records={journal.records}>
                {mayFork && forkPointOf(selected) !== null ? (
                  <div class="buttons">
                    <button type="button" id="fork-here" onClick={() => void forkAt(forkPointOf(selected))}>
                      Fork here
                    </button>{' '}
                    <span class="muted">a new run that reuses every answer before this step and runs it again</span>
                  </div>
                ) : null}
              </StepDetails>
            ) : (
              <p class="muted">Select a step (click, or Tab then Enter) to see its records, inputs and outputs.</p>
            )}
          </>
        ) : (
          <p role="status">Loading the graph…</p>
        )}
      </Section>

      {graph ? (
        <Section title="Timeline" id="timeline-section">
          <Timeline
            graph={graph}
            records={journal.records}
            states={states}
            live={!terminal}
            endedIn={
              failure?.step_id && failure.deadline?.started_at != null
                ? { step_id: failure.step_id, started_at: failure.deadline.started_at }
                : null
            }
            onSelect={(id) => setPicked(id)}
          />
        </Section>
      ) : null}

      {decisions.length > 0 ? (
        <Section title="Decisions" id="run-decisions">
          <DecisionList decisions={decisions} label="Decisions of this run" />
        </Section>
      ) : null}

      {pending.length > 0 && run ? (
        <Section title="Waiting for approval" id="run-approvals">
          {pending.map((a) => (
            <ApprovalCard
              key={a.step_id}
              approval={a}
              run={{ ...run, ...(crew ? { input: crew.input } : {}) }}
              onDecided={status.reload}
              crewName={status.data?.crewName}
            />
          ))}
        </Section>
      ) : null}

      <Section
        title="Journal"
        id="journal"
        actions={
          <button type="button" id="download-journal" onClick={download} disabled={journal.records.length === 0}>
            Download journal with keys
          </button>
        }
      >
        {verifyError ? (
          <ErrorNote error={verifyError} prefix="The journal could not be verified" />
        ) : (
          <VerificationBanner v={verification} pending={verification === null} onVerify={() => setVerifyTick((t) => t + 1)} />
        )}
        {terminal ? <AttestationBanner check={attestation} onCheck={checkRunAttestation} /> : null}
        <JournalTable records={journal.records} badSeq={badSeq} graph={graph} />
      </Section>

      {run?.kind !== 'job' || tokens.length > 0 ? (
        <Section title="Tokens and budgets" id="tokens">
          <TokensTable tokens={tokens} graph={graph} max={crew?.max_tokens ?? null} />
        </Section>
      ) : null}

      {toolCalls.length > 0 ? (
        <Section title="Tool calls" id="tool-calls-section">
          <ToolCalls runId={runId} calls={toolCalls} graph={graph} />
        </Section>
      ) : null}

      {run?.kind !== 'job' || refusals.length > 0 ? (
        <Section title="Refusals" id="refusals-section">
          <RefusalList refusals={refusals} />
        </Section>
      ) : null}

      {run ? (
        <Section title="Input and output" id="io">
          <h3>Input</h3>
          <Json value={crew ? crew.input : run.spec} label="Run input" />
          <h3>Output</h3>
          {run.output === null || run.output === undefined ? (
            <p class="muted" id="no-output">
              {!terminal
                ? 'No output yet.'
                : state === 'completed'
                  ? 'The run completed without an output.'
                  : `No output: the run ${state}.`}
            </p>
          ) : (
            <JobOutput value={run.output} jobType={run.kind === 'job' ? run.job_type : null} />
          )}
        </Section>
      ) : null}
    </>
  );
}

/** The run's attestation as this browser checked it (a button until asked). */
function AttestationBanner({ check, onCheck }: { check: AttestationCheck | 'checking' | null; onCheck(): void }) {
  let body = null;
  if (check === 'checking')
    body = (
      <p class="verify verify-pending" id="attestation-verdict" data-verdict="pending" role="status">
        Checking the attestation…
      </p>
    );
  else if (check?.ok)
    body = (
      <p
        class="verify verify-ok"
        id="attestation-verdict"
        data-verdict="ok"
        data-leaf={check.leaf_index}
        data-size={check.tree_size}
        role="status"
      >
        <span aria-hidden="true">✔ </span>Attestation verified in this browser: the in-toto statement is signed by{' '}
        <code title={check.keyid}>{check.keyid.slice(0, 12)}…</code>, and the run is in the run log <code>{check.origin}</code> at leaf{' '}
        {check.leaf_index} of {check.tree_size} (signed checkpoint, inclusion proof)
        {check.consistent_with === null ? '.' : `; the log extends the checkpoint of ${check.consistent_with} this browser saw before.`}
      </p>
    );
  else if (check)
    body = (
      <p class="verify verify-bad" id="attestation-verdict" data-verdict="bad" role="alert">
        <span aria-hidden="true">✘ </span>Attestation refused: {check.reason}
      </p>
    );
  return (
    <div class="verify-wrap">
      {body}
      <button type="button" id="check-attestation" onClick={onCheck} disabled={check === 'checking'}>
        Verify attestation and run log
      </button>
    </div>
  );
}
