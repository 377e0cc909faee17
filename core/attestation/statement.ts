/**
 * A run's attestation: an in-toto Statement v1 (github.com/in-toto/attestation,
 * spec/v1/statement.md) whose subjects are the run's journal head and graph
 * (both SHA-256 digests) and whose predicate, of this project's type
 * `PREDICATE_TYPE`, is what an auditor asks of a run: who asked (requester)
 * and who acted (agents at their seats, the cells or device that wrote the
 * journal, the principals who approved), the crew and formation version, every
 * journal record's step, seat and input/output hashes, the models and tools
 * with their pins, the approvals with who decided and what the records say was
 * approved, the period and the outcome. Step values (inputs, outputs) are in
 * it only when the caller may read them (`values`).
 *
 * Pure: the cell and the edge hand it what they hold (docs/receipts.md lists
 * every field and the record-keeping duty it answers).
 */
import { isoTime } from '../iso-time.ts';
import { recordHash } from '../journal/hash.ts';
import type { JournalRecord, JsonObject } from '../journal/record.ts';
import type { Graph } from '../engine/types.ts';

/** The in-toto Statement type, version 1. */
export const STATEMENT_TYPE = 'https://in-toto.io/Statement/v1';

/** This project's predicate type for a run's record (a URN: a URI that names, and never resolves to someone else's page). */
export const PREDICATE_TYPE = 'urn:agent-cell:predicate:run:v1';

/** Everything the predicate is built from; the host (cell or edge) gathers it. */
export interface RunEvidence {
  run: {
    run_id: string;
    /** `crew`, `job`, or `edge` (a device's run). */
    kind: string;
    state: string;
    reason: string | null;
    requester: string;
    /** The credential the run was started with, when the host records it (e.g. an RFC 8693 `act` chain). */
    act?: unknown;
    job_type?: string | null;
    workspace_id?: string | null;
    source?: string | null;
    created_at: number;
    finished_at: number | null;
  };
  crew: { crew_id: string | null; formation_id: string | null; formation_version: number | null } | null;
  graph_hash: string;
  /** The graph the run executed, when the host kept it (seats, models, tool pins). */
  graph: Graph | null;
  /** The whole journal, seq 1 to the last record. */
  records: readonly JournalRecord[];
  /** Who issues the attestation: the cell (or device) id. */
  issuer: { id: string; kind: 'cell' | 'edge-device' };
  /** Model identities the host knows beyond the graph (the edge's signed model manifest). */
  models?: { name: string; sha256?: string; publisher_kid?: string }[];
  /** Step values by content hash, only when the caller may read them. */
  values?: Record<string, unknown>;
}

const hex = (h: string): string => (h.startsWith('sha256:') ? h.slice(7) : h);

/** The two subjects of a run's statement: its journal head and its graph. */
export function runSubjects(runId: string, journalHead: string, graphHash: string): { name: string; digest: { sha256: string } }[] {
  return [
    { name: `${runId}/journal`, digest: { sha256: hex(journalHead) } },
    { name: `${runId}/graph`, digest: { sha256: hex(graphHash) } },
  ];
}

function str(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}

/** The record's data without what is not evidence (trace ids). */
function evidence(data: JsonObject | undefined): JsonObject {
  if (data === undefined) return {};
  const { traceparent: _t, ...rest } = data;
  return rest;
}

/**
 * The in-toto Statement of a finished (or still running) run. Deterministic: the same evidence
 * gives the same statement.
 * @throws TypeError when the journal is empty (a run without a record has nothing to attest).
 */
export function runStatement(ev: RunEvidence): {
  _type: string;
  subject: ReturnType<typeof runSubjects>;
  predicateType: string;
  predicate: JsonObject;
} {
  const records = ev.records;
  const last = records[records.length - 1];
  if (last === undefined) throw new TypeError('runStatement: the journal is empty');
  const head = recordHash(last);
  const seats = ev.graph?.seats ?? {};
  const steps: JsonObject[] = new Array(records.length);
  const cells = new Map<string, Set<number>>();
  const signers = new Set<string>();
  const versions = new Set<number>();
  const models = new Map<string, { seat: string; agent_id: string | null; model: string | null; calls: number; tokens: number }>();
  const tools = new Map<string, number>();
  const approvals: JsonObject[] = [];
  const approvers = new Set<string>();
  for (let i = 0; i < records.length; i++) {
    const r = records[i]!;
    const data = r.data;
    const seat = str(data?.['seat']);
    steps[i] = {
      seq: r.seq,
      step_id: r.step_id,
      kind: r.kind,
      seat,
      input_hash: r.input_hash,
      output_hash: r.output_hash,
      at: isoTime(r.at),
    };
    signers.add(r.signer_kid);
    versions.add(r.v);
    if (r.v === 2) {
      const e = cells.get(r.cell_id) ?? new Set<number>();
      e.add(r.epoch);
      cells.set(r.cell_id, e);
    }
    if (r.kind === 'step' && r.step_id.includes('/model/') && seat !== null) {
      const m = models.get(seat) ?? { seat, agent_id: str(data?.['agent_id']), model: seats[seat]?.model ?? null, calls: 0, tokens: 0 };
      m.calls++;
      m.tokens += typeof data?.['usage'] === 'number' ? data['usage'] : 0;
      models.set(seat, m);
    }
    const tool = str(data?.['tool']);
    if (tool !== null && (r.kind === 'step' || r.kind === 'intent')) tools.set(tool, (tools.get(tool) ?? 0) + (r.kind === 'step' ? 1 : 0));
    if (r.kind === 'approval_received') {
      const by = str(data?.['by']);
      if (by !== null) approvers.add(by);
      approvals.push({ seq: r.seq, step_id: r.step_id, at: isoTime(r.at), ...evidence(data) });
    } else if (r.kind === 'decision' && data?.['executor'] === 'human_approval') {
      const by = data['approved_by'];
      if (Array.isArray(by)) for (const p of by) if (typeof p === 'string') approvers.add(p);
      approvals.push({ seq: r.seq, step_id: r.step_id, at: isoTime(r.at), settled: true, ...evidence(data) });
    }
  }
  const pins = (ev.graph as unknown as { tool_pins?: Record<string, unknown> } | null)?.tool_pins ?? null;
  const finished = last.kind === 'run_finished' ? last : null;
  const actors: JsonObject[] = [
    { type: 'principal', role: 'requester', id: ev.run.requester, ...(ev.run.act !== undefined ? { act: ev.run.act } : {}) },
  ];
  for (const [id, s] of Object.entries(seats).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    if (s.agent_id !== null) actors.push({ type: 'agent', role: 'seat', id: s.agent_id, seat: id });
  }
  for (const p of [...approvers].sort()) actors.push({ type: 'principal', role: 'approver', id: p });
  for (const [id, epochs] of [...cells.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    actors.push({
      type: ev.issuer.kind === 'edge-device' ? 'edge-device' : 'cell',
      role: 'journal_writer',
      id,
      epochs: [...epochs].sort((a, b) => a - b),
    });
  }
  const predicate: JsonObject = {
    issuer: { ...ev.issuer },
    run: {
      run_id: ev.run.run_id,
      kind: ev.run.kind,
      job_type: ev.run.job_type ?? null,
      workspace_id: ev.run.workspace_id ?? null,
      source: ev.run.source ?? null,
    },
    period: { started_at: isoTime(ev.run.created_at), finished_at: ev.run.finished_at === null ? null : isoTime(ev.run.finished_at) },
    requester: { principal: ev.run.requester, ...(ev.run.act !== undefined ? { act: ev.run.act } : {}) },
    actors,
    crew:
      ev.crew === null
        ? null
        : {
            crew_id: ev.crew.crew_id,
            formation_id: ev.crew.formation_id,
            formation_version: ev.crew.formation_version,
            formation_hash: ev.graph?.formation_hash ?? null,
            policy: ev.graph?.policy ?? null,
          },
    graph: { hash: ev.graph_hash, kept: ev.graph !== null },
    journal: {
      records: records.length,
      head,
      format_versions: [...versions].sort((a, b) => a - b),
      signer_kids: [...signers].sort(),
      first_at: isoTime(records[0]!.at),
      last_at: isoTime(last.at),
    },
    seats: Object.entries(seats)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([id, s]) => ({
        seat: id,
        role_label: s.role_label,
        agent_id: s.agent_id,
        model: s.model,
        permission_mode: s.authority.permission_mode,
        allowed_tools: [...s.authority.allowed_tools],
        clearance_level: s.authority.clearance_level,
      })),
    models: [
      ...[...models.values()].sort((a, b) => (a.seat < b.seat ? -1 : a.seat > b.seat ? 1 : 0)).map((m) => ({ ...m })),
      ...(ev.models ?? []).map((m) => ({ ...m })),
    ],
    tools: [...tools.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([name, calls]) => ({ name, calls, pin: pins?.[name] ?? null })),
    tool_pins: pins,
    steps,
    approvals,
    outcome: {
      state: ev.run.state,
      reason: ev.run.reason,
      finished: finished !== null,
      output_hash: finished?.output_hash ?? null,
    },
    values_included: ev.values !== undefined,
    ...(ev.values !== undefined ? { values: ev.values } : {}),
  };
  return { _type: STATEMENT_TYPE, subject: runSubjects(ev.run.run_id, head, ev.graph_hash), predicateType: PREDICATE_TYPE, predicate };
}
