/**
 * Re-judging the built-in tool calls of a journal carried back from a device (docs/edge.md, "Journal
 * import"). The device key signs whatever it is given, and the replay (core/engine/replay.ts) reuses
 * every recorded step without judging it: a forged journal could record a call the seat was never
 * granted, a POST to an origin its allowlist names only for GET, or a kv.put above its clearance, and
 * still verify and replay. So each recorded tool call (a `step` record under a call's step id) is judged
 * again here against the bundle the device held, the graph of the journal's graph hash (each seat's
 * authority as the bundle carried it) and the crew's workspace (the named crew's, when it binds the graph's
 * seats to the graph's agents), with the same rules the device's
 * catalog applies (edge/tools.ts: core/catalog/builtin.ts, runtime/http-*.ts, core/authority/egress.ts):
 *   - the seat's grant (`allowed_tools`; a seatless call only the tool its step names) and its
 *     permission mode (`plan` runs no tool; `ask`, or `auto-read` for a side-effecting tool, only
 *     with recorded approvals, which the approvals re-judging checks);
 *   - `http.get` and `http.request`: the URL on the seat's egress allowlist with the method;
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
import type { EgressMethod } from '../../core/authority/egress-entry.ts';
import { EGRESS_METHODS } from '../../core/authority/egress-entry.ts';
import { egressAllowed } from '../../core/authority/egress.ts';
import { BUILTIN_TOOLS } from '../../core/catalog/builtin.ts';
import type { Graph, GraphNode, LeafSpec, SeatAuthority } from '../../core/engine/types.ts';
import type { JournalRecord } from '../../core/journal/record.ts';
import type { Reason } from '../../core/reasons.ts';
import { HTTP_GET } from '../../runtime/http-call.ts';
import { HTTP_REQUEST } from '../../runtime/http-request.ts';

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

function validUrl(v: unknown): URL | null {
  if (typeof v !== 'string' || v.length === 0 || v.length > 2048) return null;
  try {
    const u = new URL(v);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u : null;
  } catch {
    return null;
  }
}

function compartmentsOf(v: unknown): string[] | null {
  if (v === undefined || v === null) return [];
  return Array.isArray(v) && v.every((x) => typeof x === 'string') ? [...new Set(v as string[])].sort() : null;
}

function dataGranted(grants: readonly string[], ws: string | null): boolean {
  return grants.some((g) => g === '*' || g === 'kv:*' || (ws !== null && g === `kv:${ws}`));
}

/** Whether `authority` held `labels` (the missing ones, sorted). */
function missing(labels: readonly string[], held: readonly string[]): string[] {
  const have = new Set(held);
  return labels.filter((l) => !have.has(l));
}

/**
 * The floor of one built-in call (what the device's port judges), or null when it holds. `args` are the
 * recorded arguments, `out` the recorded result; `written` the kv entries earlier calls of this journal wrote.
 */
function floorOf(
  tool: string,
  args: Record<string, unknown>,
  out: unknown,
  a: SeatAuthority | null,
  ws: string | null,
  written: Written,
): { why: Reason; problem: string } | null {
  const egress = a?.egress_allowlist ?? [];
  const clearance = a?.clearance_level ?? 0;
  const held = a?.compartments ?? [];
  // A call the tool answered as bad arguments did not act (each tool checks its arguments before its floor).
  if (badArgumentsAnswer(out)) return null;
  const bad = (what: string) => ({ why: 'tool_bad_arguments' as Reason, problem: `${what}, yet the call records a result` });
  if (tool === 'http.get' || tool === 'http.request') {
    const method = tool === 'http.get' ? 'GET' : args['method'];
    if (typeof method !== 'string' || !(EGRESS_METHODS as readonly string[]).includes(method))
      return bad('the method is not one the tool takes');
    const url = validUrl(args['url']);
    if (url === null) return bad('the URL is not an http or https URL');
    if (!egressAllowed(egress, url.href, method as EgressMethod))
      return { why: 'egress_denied', problem: `${method} to ${url.origin} is not on the seat's egress allowlist` };
    return null;
  }
  if (tool === 'kv.get' || tool === 'kv.put') {
    const key = args['key'];
    if (typeof key !== 'string' || key.length === 0 || key.length > 200) return bad('the key is not a key');
    if (tool === 'kv.get') {
      if (!dataGranted(a?.data_grant_ids ?? [], ws)) return { why: 'data_not_granted', problem: `no data grant covers kv:${ws ?? '?'}` };
      const e = written.get(key);
      if (e === undefined || !isObject(out) || out['found'] !== true) return null;
      if (e.classification > clearance)
        return { why: 'clearance_insufficient', problem: `it read ${key}, classified ${e.classification}, above clearance ${clearance}` };
      const lacking = missing(e.compartments, held);
      if (lacking.length) return { why: 'compartment_not_granted', problem: `it read ${key}, labelled ${lacking.join(', ')}, not held` };
      return null;
    }
    if (ws === null || !egressAllowed(egress, `kv:${ws}`))
      return { why: 'egress_denied', problem: `egress to kv:${ws ?? '?'} is not on the seat's allowlist` };
    const cls = args['classification'] ?? 0;
    const labels = compartmentsOf(args['compartments']);
    if (typeof cls !== 'number' || !Number.isInteger(cls) || cls < 0 || labels === null) return bad('the arguments are not a kv.put');
    if (cls > clearance) return { why: 'clearance_insufficient', problem: `it wrote classification ${cls} above clearance ${clearance}` };
    const lacking = missing([...labels, ...(written.get(key)?.compartments ?? [])], held);
    if (lacking.length)
      return { why: 'compartment_not_granted', problem: `it wrote ${key} needing ${[...new Set(lacking)].join(', ')}, not held` };
    written.set(key, { classification: cls, compartments: labels });
    return null;
  }
  return null;
}

/**
 * The first recorded tool call of `journal` its seat was not entitled to under `graph` (the bundle's) and the
 * crew's workspace `ws` (null: unknown), or null when every one holds.
 */
export function unentitledAct(graph: Graph, ws: string | null, journal: JournalActs): UnentitledAct | null {
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
    const f = floorOf(tool, input['args'], out, a, ws, written);
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
  const bad = unentitledAct(g, workspaceOf(g, await crewOf(journal.run.crew_id)), journal);
  if (bad === null) return;
  await refuse(
    'journal_act_not_entitled',
    `record ${bad.seq} of the journal calls ${bad.tool}, which its seat was not entitled to (${bad.why}): ${bad.problem}`,
    'forbidden',
    { run_id: runId, seq: bad.seq, step_id: bad.step_id, tool: bad.tool, seat: bad.seat, act_reason: bad.why },
  );
}
