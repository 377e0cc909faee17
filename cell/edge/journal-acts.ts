/**
 * Re-judging the built-in tool calls of a journal carried back from a device (docs/edge.md, "Journal
 * import"). The device key signs whatever it is given, and the replay (core/engine/replay.ts) reuses
 * every recorded step without judging it: a forged journal could record a call the seat was never
 * granted, a POST to an origin its allowlist names only for GET, or a kv.put above its clearance, and
 * still verify and replay. So each recorded tool call (a `step` record under a call's step id) is judged
 * again here against the bundle the device held, the graph of the journal's graph hash (each seat's
 * authority as the bundle carried it) and the crew's workspace (the named crew's, when it binds the graph's
 * seats to the graph's agents), with the device's catalog's own code (core/catalog/builtin.ts's kv tools
 * over the journal's own storage; runtime/http-*.ts's judgeHttpGet and judgeHttpRequest, everything the
 * HTTP tools check before they send):
 *   - the seat's grant (`allowed_tools`; a seatless call only the tool its step names) and its
 *     permission mode (`plan` runs no tool; `ask`, or `auto-read` for a side-effecting tool, only
 *     with recorded approvals, which the approvals re-judging checks);
 *   - `http.get` and `http.request`: their arguments (headers included) and the URL on the seat's egress
 *     allowlist with the method;
 *   - `kv.get`: a data grant for the workspace, and, for an entry this journal wrote, the clearance
 *     and compartments it needs; `kv.put`: egress to the workspace's storage, a classification not
 *     above the seat's clearance, compartments the seat holds (an overwrite of an entry this journal
 *     wrote, that entry's too).
 * Arguments a tool would have refused as bad (they go back to the model: no act) must have the
 * bad-arguments answer as their recorded result. What the cell cannot know is not judged: the
 * device's private ranges (its own configuration) and entries in its storage written by other runs.
 * Refusals happen on the device before a `step` record (only an `intent` precedes them), so an honest
 * journal's refused call is not judged again. Tools outside the built-in catalog are left to their
 * own re-judging (MCP pins).
 */
import { BUILTIN_TOOLS, toolAuthorityOf, type KvStorage } from '../../core/catalog/builtin.ts';
import { ServiceError } from '../../core/errors.ts';
import type { Graph, GraphNode, LeafSpec, SeatAuthority } from '../../core/engine/types.ts';
import type { JournalRecord } from '../../core/journal/record.ts';
import type { Reason } from '../../core/reasons.ts';
import { HTTP_GET, judgeHttpGet } from '../../runtime/http-call.ts';
import { HTTP_REQUEST, judgeHttpRequest } from '../../runtime/http-request.ts';

/** The built-in tools a device runs, by name: whether each has side effects. */
const SIDE_EFFECTS: ReadonlyMap<string, boolean> = new Map(
  [...BUILTIN_TOOLS.values(), HTTP_GET, HTTP_REQUEST].map((t) => [t.name, t.side_effects]),
);

/** A tool call's step id: an agent's (`N/tool/R.I`), a tool step's (`N/call`), a skill's (`N/tool`, `N/K/tool`). */
const CALL_STEP = /\/(?:tool\/\d+\.\d+|call|tool)$/;

/**
 * Whether a record is a tool call's: a `step` under a call's step id, or one that names a tool and no executor
 * (the console shows such a record as a call, so it is judged as one: under another step id it is refused).
 */
function isCallRecord(r: JournalRecord): boolean {
  if (r.kind !== 'step') return false;
  return CALL_STEP.test(r.step_id) || (typeof r.data?.['tool'] === 'string' && r.data['executor'] === undefined);
}

/** A recorded act the device was not entitled to: the record, the tool, the seat and why. */
export interface UnentitledAct {
  seq: number;
  step_id: string;
  tool: string;
  seat: string | null;
  why: Reason;
  problem: string;
}

/** What the judge needs of a journal: its records and its values by hash. */
export interface JournalActs {
  records: readonly JournalRecord[];
  values: Readonly<Record<string, unknown>>;
}

/** A kv entry this journal wrote: its classification and compartments, by key. */
type Written = Map<string, { classification: number; compartments: string[] }>;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The node a step id belongs to (step.ts: the node id before the first `/`, `[` or `#`). */
function nodeOf(graph: Graph, stepId: string): GraphNode | undefined {
  const id = stepId.split(/[/[#]/)[0];
  return graph.nodes.find((n) => n.id === id);
}

/** The seat a call runs under (the node's, or its map or loop body's), and the tool a seatless step names. */
function callerOf(node: GraphNode): { seat: string | null; tool: string | null } {
  const c = node.config as unknown as Record<string, unknown>;
  const leaf: GraphNode | LeafSpec =
    (node.kind === 'map' || node.kind === 'loop') && isObject(c['body']) ? (c['body'] as unknown as LeafSpec) : node;
  const seat = 'seat' in leaf && typeof leaf.seat === 'string' ? leaf.seat : null;
  const lc = leaf.config as unknown as Record<string, unknown>;
  return { seat, tool: leaf.kind === 'tool' && typeof lc['tool'] === 'string' ? lc['tool'] : null };
}

/** True when a recorded result is the bad-arguments answer a tool gives (no act happened). */
function badArgumentsAnswer(out: unknown): boolean {
  return isObject(out) && out['error'] === 'invalid_request';
}

/** A workspace no grant names: the kv tools' workspace when the crew's is unknown (only `kv:*` and `*` reach it). */
const UNKNOWN_WORKSPACE = '\u0000unknown';

/**
 * The journal's own kv storage, as the kv tools see it when they are run again: an entry this journal wrote
 * (its labels), found only when the call recorded it found; the entries of other runs the cell cannot know.
 */
function journalKv(written: Written, found: boolean): KvStorage {
  return {
    async read(_ws, key) {
      const e = written.get(key);
      return e !== undefined && found ? { value: null, ...e } : undefined;
    },
    async write(_ws, key, check, entry) {
      check(written.get(key)?.compartments);
      written.set(key, { classification: entry.classification, compartments: entry.compartments });
    },
  };
}

/**
 * The floor of one built-in call, or null when it holds: the tool's own checks (core/catalog/builtin.ts,
 * runtime/http-*.ts: the code the device ran) run again on the recorded arguments, the kv tools over the
 * journal's own storage, the HTTP tools up to the request they would send (the seat's allowlist; the
 * device's private ranges are its own configuration). `out` is the recorded result; `written` the kv
 * entries earlier calls of this journal wrote.
 */
async function floorOf(
  tool: string,
  args: Record<string, unknown>,
  out: unknown,
  a: SeatAuthority | null,
  ws: string | null,
  agentId: string,
  written: Written,
): Promise<{ why: Reason; problem: string } | null> {
  // A call the tool answered as bad arguments did not act (each tool checks its arguments before its floor).
  if (badArgumentsAnswer(out)) return null;
  const authority = toolAuthorityOf(a);
  try {
    if (tool === 'http.get') judgeHttpGet(authority, args);
    else if (tool === 'http.request') judgeHttpRequest(authority, args);
    else {
      const kv = BUILTIN_TOOLS.get(tool);
      if (kv === undefined) return null;
      const found = isObject(out) && out['found'] === true;
      await kv.run(
        { clock: { now: () => 0 }, kv: journalKv(written, found) },
        { workspaceId: ws ?? UNKNOWN_WORKSPACE, agentId, authority },
        args,
      );
    }
    return null;
  } catch (e) {
    const reason = e instanceof ServiceError ? (e.details?.['reason'] as Reason | undefined) : undefined;
    const message = e instanceof Error ? e.message : String(e);
    if (reason === undefined || reason === 'tool_bad_arguments')
      return { why: 'tool_bad_arguments', problem: `${message}, yet the call records a result` };
    return { why: reason, problem: message };
  }
}

/**
 * The first recorded tool call of `journal` its seat was not entitled to under `graph` (the bundle's) and the
 * crew's workspace `ws` (null: unknown), or null when every one holds.
 */
export async function unentitledAct(graph: Graph, ws: string | null, journal: JournalActs): Promise<UnentitledAct | null> {
  const written: Written = new Map();
  for (const r of journal.records) {
    if (!isCallRecord(r)) continue;
    const input = journal.values[r.input_hash];
    const out = journal.values[r.output_hash];
    const named = typeof r.data?.['tool'] === 'string' ? (r.data['tool'] as string) : null;
    const tool = isObject(input) && typeof input['tool'] === 'string' ? input['tool'] : (named ?? '?');
    const node = nodeOf(graph, r.step_id);
    const caller = node === undefined ? null : callerOf(node);
    const act = (why: Reason, problem: string): UnentitledAct => ({
      seq: r.seq,
      step_id: r.step_id,
      tool,
      seat: caller?.seat ?? null,
      why,
      problem,
    });
    if (!isObject(input) || !isObject(input['args']) || named !== tool)
      return act('journal_invalid', 'the call record does not carry its tool and arguments');
    if (caller === null || !CALL_STEP.test(r.step_id)) return act('journal_invalid', `no step of the graph calls a tool at ${r.step_id}`);
    const seat = caller.seat === null ? null : graph.seats[caller.seat];
    if (caller.seat !== null && seat === undefined) return act('journal_invalid', `the graph has no seat ${caller.seat}`);
    const a = seat?.authority ?? null;
    if (a === null ? caller.tool !== tool : !a.allowed_tools.includes(tool))
      return act('tool_not_granted', `the seat was not granted ${tool}`);
    const mode = a?.permission_mode ?? 'auto';
    if (mode === 'plan') return act('tool_forbidden_by_mode', 'the seat runs in mode plan, which calls no tool');
    const sideEffects = SIDE_EFFECTS.get(tool);
    const approved = Array.isArray(r.data?.['approvals']) && (r.data['approvals'] as unknown[]).length > 0;
    if ((mode === 'ask' || (mode === 'auto-read' && sideEffects === true)) && !approved)
      return act('approval_unavailable', `the seat's mode ${mode} needs a human approval of the call, and none is recorded`);
    if (sideEffects === undefined) continue;
    const f = await floorOf(tool, input['args'], out, a, ws, seat?.agent_id ?? 'cell', written);
    if (f !== null) return act(f.why, f.problem);
  }
  return null;
}

/**
 * The workspace of the crew an export names, when that crew binds every seat of the graph to the agent the
 * graph names (the export's `crew_id` is the device's word: a crew that does not run this graph says nothing
 * of the bundle's workspace, and then only grants of every workspace, `kv:*`, hold).
 */
export function workspaceOf(graph: Graph, crew: { assignments: Record<string, string>; workspace_id: string } | undefined): string | null {
  if (crew === undefined) return null;
  const bound = Object.entries(graph.seats).every(([seat, s]) => s.agent_id === null || crew.assignments[seat] === s.agent_id);
  return bound ? crew.workspace_id : null;
}

/** How journal-import.ts refuses: audited, with the reason and the details. */
export type Refuse = (
  reason: Reason,
  message: string,
  code: 'forbidden' | 'invalid_request',
  extra?: Record<string, unknown>,
) => Promise<never>;

/**
 * Refuses (403 `journal_act_not_entitled`, naming the record's seq, step and tool and why) a journal that
 * records a tool call its seat was not entitled to under the bundle the device held: the graph of the
 * journal's graph hash (`graph`: a crew bundle of this cell carried it) and the crew's workspace. A journal
 * that records calls under a graph this cell never carried cannot be judged (400 `unknown_graph`).
 */
export async function refuseUnentitledActs(
  journal: JournalActs & { run: { run_id: string; graph_hash: string; crew_id: string } },
  graph: () => Promise<Graph | undefined>,
  crewOf: (crewId: string) => Promise<{ assignments: Record<string, string>; workspace_id: string } | undefined>,
  refuse: Refuse,
): Promise<void> {
  if (!journal.records.some(isCallRecord)) return;
  const g = await graph();
  const runId = journal.run.run_id;
  if (g === undefined)
    return refuse(
      'unknown_graph',
      'no crew bundle of this cell carried the graph of this journal, so its tool calls cannot be judged',
      'invalid_request',
      {
        run_id: runId,
        graph_hash: journal.run.graph_hash,
      },
    );
  const bad = await unentitledAct(g, workspaceOf(g, await crewOf(journal.run.crew_id)), journal);
  if (bad === null) return;
  await refuse(
    'journal_act_not_entitled',
    `record ${bad.seq} of the journal calls ${bad.tool}, which its seat was not entitled to (${bad.why}): ${bad.problem}`,
    'forbidden',
    { run_id: runId, seq: bad.seq, step_id: bad.step_id, tool: bad.tool, seat: bad.seat, act_reason: bad.why },
  );
}
