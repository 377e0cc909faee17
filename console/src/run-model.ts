/**
 * What the run view shows, computed from the run's journal alone (pure, no
 * DOM, no I/O; tested in test/console/run-model.test.ts):
 *
 * - `nodeStates`: the state of every graph node (pending, running, waiting,
 *   completed, refused, failed, cancelled, skipped) from the records that name
 *   it. A record names node `n` when its step id is `n` or starts with `n/`,
 *   `n[` or `n#` (core/engine/types.ts lists the step ids);
 * - `journalGraph`: a graph for runs the cell shows none for (job runs): one
 *   node per top-level step, in journal order;
 * - `tokensBySeat`: model tokens spent per seat and agent (the `usage` of the
 *   model-call records);
 * - `refusalsOf`: every refusal with its reason (refusal records, gate
 *   decisions that refused, a refused run's end);
 * - `failingStep`: the step a run ended badly at (why, in words: ./triage.ts);
 * - `timelineOf`: a Gantt of the run, a step the run ended in lasting until its end.
 */

/** The fields of a journal record the console reads (core/journal/record.ts has the full format). */
export interface RecordLike {
  seq: number;
  step_id: string;
  kind: string;
  at: number;
  input_hash: string;
  output_hash: string;
  data?: Record<string, unknown>;
}

export interface GraphNodeLike {
  id: string;
  kind: string;
  seat?: string;
  config?: Record<string, unknown>;
}
export interface GraphEdgeLike {
  from: string;
  to: string;
  when?: string;
}
export interface GraphLike {
  nodes: GraphNodeLike[];
  edges: GraphEdgeLike[];
  entry?: string;
  seats?: Record<string, SeatLike>;
}
export interface SeatLike {
  billet_id?: string;
  role_label?: string;
  agent_id?: string | null;
  authority?: { budget_ceiling?: number | null };
}

export type NodeState = 'pending' | 'running' | 'waiting' | 'completed' | 'refused' | 'failed' | 'cancelled' | 'skipped';

export const NODE_STATE_LABEL: Readonly<Record<NodeState, string>> = {
  pending: 'pending',
  running: 'running',
  waiting: 'waiting',
  completed: 'completed',
  refused: 'refused',
  failed: 'failed',
  cancelled: 'cancelled',
  skipped: 'not run',
};

const TERMINAL = new Set(['completed', 'failed', 'refused', 'cancelled']);
const DONE_KINDS = new Set(['step', 'decision']);
/** Decisions that end the step without passing it (gate refusals, approval rejections and timeouts). */
const REFUSING_DECISIONS = new Set(['refuse', 'reject', 'timeout']);

/** The graph node a step id belongs to: the longest node id that is the step id or prefixes it at a separator. */
export function nodeOfStep(stepId: string, nodeIds: readonly string[]): string | null {
  let best: string | null = null;
  for (const id of nodeIds) {
    if (stepId === id || stepId.startsWith(id + '/') || stepId.startsWith(id + '[') || stepId.startsWith(id + '#')) {
      if (best === null || id.length > best.length) best = id;
    }
  }
  return best;
}

/** The run's end record, if the journal has it. */
export function finishedRecord(records: readonly RecordLike[]): RecordLike | undefined {
  for (let i = records.length - 1; i >= 0; i--) if (records[i]!.kind === 'run_finished') return records[i];
  return undefined;
}

/**
 * The step a run failed or was refused at: the error's `step_id` (or its end record's), else its last refusal
 * record's, else the call it ended in.
 */
export function failingStep(records: readonly RecordLike[], details: Record<string, unknown> = {}): string | null {
  const named = details['step_id'] ?? finishedRecord(records)?.data?.['step_id'];
  if (typeof named === 'string' && named) return named;
  for (let i = records.length - 1; i >= 0; i--) {
    const r = records[i]!;
    if (r.kind === 'refusal' && r.step_id !== 'run') return r.step_id;
  }
  // The last call that started and never recorded its step: the run ended inside it.
  const done = new Set(records.filter((r) => r.kind === 'step' || r.kind === 'decision').map((r) => r.step_id));
  for (let i = records.length - 1; i >= 0; i--) {
    const r = records[i]!;
    if (r.step_id === 'run' || r.step_id.startsWith('run/')) continue;
    if (r.kind === 'intent' && !done.has(r.step_id)) return r.step_id;
  }
  return null;
}

/**
 * The state of every node of `graph` after `records`, given the run's state
 * (`runState`: queued, running, waiting or a terminal state).
 */
export function nodeStates(graph: GraphLike, records: readonly RecordLike[], runState: string): Map<string, NodeState> {
  const ids = graph.nodes.map((n) => n.id);
  const touched = new Set<string>();
  const done = new Set<string>();
  const refused = new Set<string>();
  const waiting = new Set<string>();
  for (const r of records) {
    const n = nodeOfStep(r.step_id, ids);
    if (n === null) continue;
    touched.add(n);
    const refusing = r.kind === 'decision' && REFUSING_DECISIONS.has(String(r.data?.['decision']));
    // Waiting (an approval, a tool call under `ask`, a timer) until the node records anything else.
    if (r.kind === 'waiting') waiting.add(n);
    else if (r.kind !== 'approval_received') waiting.delete(n);
    if (r.step_id === n && DONE_KINDS.has(r.kind) && !refusing) done.add(n);
    else if (r.kind === 'refusal' || refusing) refused.add(n);
  }
  const end = finishedRecord(records);
  const outcome = end ? String(end.data?.['outcome'] ?? runState) : runState;
  const terminal = end !== undefined || TERMINAL.has(runState);
  const err = end?.data?.['error'] as { details?: Record<string, unknown> } | undefined;
  const failedStep = end ? failingStep(records, err?.details ?? {}) : null;
  const failedNode = failedStep === null ? null : nodeOfStep(failedStep, ids);
  const preds = new Map<string, string[]>();
  for (const e of graph.edges) preds.set(e.to, [...(preds.get(e.to) ?? []), e.from]);

  // Which edges are live, as the engine decides (core/engine/run.ts): the source ran and the edge
  // has no `when`, or its `when` is the route the source recorded (conditional, delegate).
  const routeOf = new Map<string, string>();
  for (const r of records) {
    if (DONE_KINDS.has(r.kind) && typeof r.data?.['route'] === 'string') routeOf.set(r.step_id, r.data['route']);
  }
  const out = new Map<string, NodeState>();
  const skipped = new Set<string>();
  // Nodes are listed in the engine's execution order, so predecessors are decided first.
  for (const id of ids) {
    let s: NodeState;
    const p = preds.get(id) ?? [];
    const settled = p.every((x) => done.has(x) || skipped.has(x));
    const live = graph.edges.some((e) => e.to === id && done.has(e.from) && (e.when === undefined || e.when === routeOf.get(e.from)));
    if (done.has(id)) s = 'completed';
    else if (refused.has(id)) s = 'refused';
    else if (terminal) {
      if (outcome === 'failed' && (failedNode === id || (failedNode === null && touched.has(id)))) s = 'failed';
      else if (outcome === 'cancelled' && (failedNode === id || touched.has(id))) s = 'cancelled';
      else if (outcome === 'refused' && touched.has(id)) s = 'refused';
      else s = 'skipped';
    } else if (waiting.has(id)) s = 'waiting';
    else if (touched.has(id)) s = 'running';
    else if (p.length > 0 && settled && !live) s = 'skipped';
    else {
      const ready = p.length === 0 ? graph.entry === undefined || graph.entry === id : settled;
      s = ready && runState === 'running' ? 'running' : 'pending';
    }
    if (s === 'skipped') skipped.add(id);
    out.set(id, s);
  }
  return out;
}

/**
 * A graph for a run the cell shows no compiled graph for (job runs): one node
 * per top-level step id (the part before `/`, `[` or `#`), in order of first
 * appearance, chained. `run` and `run/end` are left out.
 */
export function journalGraph(records: readonly RecordLike[]): GraphLike {
  const ids: string[] = [];
  for (const r of records) {
    const top = r.step_id.split(/[/[#]/)[0]!;
    if (top === 'run' || top === '' || ids.includes(top)) continue;
    ids.push(top);
  }
  const kindOf = (id: string) => {
    const rec = records.find((r) => r.step_id === id && DONE_KINDS.has(r.kind));
    return typeof rec?.data?.['executor'] === 'string' ? String(rec.data['executor']) : 'step';
  };
  return {
    nodes: ids.map((id) => ({ id, kind: kindOf(id) })),
    edges: ids.slice(1).map((id, i) => ({ from: ids[i]!, to: id })),
    ...(ids[0] !== undefined ? { entry: ids[0] } : {}),
  };
}

export interface SeatTokens {
  seat: string;
  agent_id: string | null;
  tokens: number;
  calls: number;
}

/** Tokens (input + output) spent per seat, from the model-call records, in first-seen order. */
export function tokensBySeat(records: readonly RecordLike[]): SeatTokens[] {
  const by = new Map<string, SeatTokens>();
  for (const r of records) {
    const d = r.data;
    if (!d || typeof d['usage'] !== 'number' || typeof d['seat'] !== 'string') continue;
    const seat = d['seat'];
    const cur = by.get(seat) ?? { seat, agent_id: typeof d['agent_id'] === 'string' ? d['agent_id'] : null, tokens: 0, calls: 0 };
    cur.tokens += d['usage'];
    cur.calls += 1;
    by.set(seat, cur);
  }
  return [...by.values()];
}

export interface Refusal {
  seq: number;
  step_id: string;
  reason: string;
  data: Record<string, unknown>;
}

/**
 * Every refusal the journal records, in order, with its reason: refusal
 * records; refusing decisions (a rejected or timed-out approval, a gate that
 * refused) unless a refusal record of the same step says it; a refused run's
 * end when nothing else did.
 */
export function refusalsOf(records: readonly RecordLike[]): Refusal[] {
  const refusedSteps = new Set(records.filter((r) => r.kind === 'refusal').map((r) => r.step_id));
  const out: Refusal[] = [];
  for (const r of records) {
    const d = r.data ?? {};
    const decision = String(d['decision']);
    const isRefusal =
      r.kind === 'refusal' ||
      (r.kind === 'decision' && REFUSING_DECISIONS.has(decision) && !refusedSteps.has(r.step_id)) ||
      (r.kind === 'run_finished' && d['outcome'] === 'refused' && out.length === 0);
    if (!isRefusal) continue;
    const reason =
      typeof d['reason'] === 'string'
        ? d['reason']
        : decision === 'reject'
          ? 'approval_rejected'
          : decision === 'timeout'
            ? 'approval_timeout'
            : 'refused';
    out.push({ seq: r.seq, step_id: r.step_id, reason, data: d });
  }
  return out;
}

/**
 * The run's state as its journal tells it, ahead of the last status fetch: the
 * end record's outcome, `waiting` after a waiting record, `running` after any
 * other record of a run that has not ended; otherwise the fetched state.
 */
export function liveRunState(records: readonly RecordLike[], fetched: string): string {
  const end = finishedRecord(records);
  if (end) return String(end.data?.['outcome'] ?? fetched);
  if (TERMINAL.has(fetched)) return fetched;
  const last = records[records.length - 1];
  if (!last) return fetched;
  // A run waiting on an operator for a lost outcome (its waiting record is `for: outcome`) is `outcome_unknown`.
  if (last.kind === 'waiting') return last.data?.['for'] === 'outcome' ? 'outcome_unknown' : 'waiting';
  return 'running';
}

/** "1.2 s", "3 min 4 s", "2 h 5 min": a duration for people. */
export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms) || ms < 0) return '-';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${Math.round(s % 60)} s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ${m % 60} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

export interface TimelineBar {
  node: string;
  /** Milliseconds from the run's first record. */
  start: number;
  end: number;
  /** Intervals spent waiting (an approval, a timer, a tool call under `ask`), from a waiting record to the next record of the step. */
  waits: { start: number; end: number; for: string }[];
  /** True while the step has not ended (the bar runs to `now`). */
  open: boolean;
}

/**
 * A Gantt of the run from the journal's times: per graph node, from its first
 * record to its last (to `now` while the run is live and the node unfinished),
 * with the time it waited. Nodes with no record are left out.
 */
export function timelineOf(
  graph: GraphLike,
  records: readonly RecordLike[],
  states: ReadonlyMap<string, NodeState>,
  now: number,
  /** The step the run ended in and when its call started, when the failure names it (a model call writes no intent record). */
  endedIn?: { step_id: string; started_at: number } | null,
): { t0: number; span: number; bars: TimelineBar[] } {
  const ids = graph.nodes.map((n) => n.id);
  const t0 = records[0]?.at ?? now;
  const by = new Map<string, RecordLike[]>();
  for (const r of records) {
    const n = nodeOfStep(r.step_id, ids);
    if (n !== null) by.set(n, [...(by.get(n) ?? []), r]);
  }
  const ended = finishedRecord(records);
  const bars: TimelineBar[] = [];
  // The call the run ended in, named by the failure: it may have left no record of its own.
  const endedNode = endedIn ? nodeOfStep(endedIn.step_id, ids) : null;
  if (endedIn && endedNode !== null && !by.get(endedNode)?.length && ended)
    by.set(endedNode, [
      { seq: ended.seq, step_id: endedIn.step_id, kind: 'call_started', at: endedIn.started_at, input_hash: '', output_hash: '' },
    ]);
  for (const id of ids) {
    const rs = by.get(id);
    if (!rs?.length) continue;
    const s = states.get(id);
    const open = !ended && (s === 'running' || s === 'waiting');
    const last = rs[rs.length - 1]!.at;
    const waits: TimelineBar['waits'] = [];
    for (let i = 0; i < rs.length; i++) {
      const r = rs[i]!;
      if (r.kind !== 'waiting') continue;
      const next = records.find((x) => x.seq > r.seq && nodeOfStep(x.step_id, ids) === id && x.kind !== 'approval_received');
      const until = next?.at ?? (ended ? ended.at : now);
      waits.push({ start: r.at - t0, end: until - t0, for: String(r.data?.['for'] ?? r.data?.['reason'] ?? 'waiting') });
    }
    // A step the run ended in (failed or cancelled mid-call: its last record is the call's intent) lasted
    // until the run's end, not until that record.
    const endedIn = ended !== undefined && (s === 'failed' || s === 'cancelled');
    const endAt = open ? now : Math.max(last, ...waits.map((w) => w.end + t0), endedIn ? ended.at : last);
    bars.push({ node: id, start: rs[0]!.at - t0, end: endAt - t0, waits, open });
  }
  const tEnd = ended?.at ?? now;
  return { t0, span: Math.max(1, tEnd - t0, ...bars.map((b) => b.end)), bars };
}
