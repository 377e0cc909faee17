/**
 * The formation compiler: formation + billets (+ the crew's agents) -> execution
 * graph, deterministically. Pure: no clock, no randomness, no I/O; the graph and
 * both hashes are identical on every run, every cell and the edge.
 *
 * Checks (errors are values with codes, see CompileErrorCode): fields valid,
 * billet ids unique, reports_to names a billet of the formation, no cycles,
 * exactly one root for manager-delegates, every child billet's authority_cap
 * inside its parent's (core/authority/envelope isSubset; over_authority names
 * the fields), every expression of the stages valid, every seat bound when a
 * crew is given.
 *
 * Shapes (node ids in brackets; seats are billet ids):
 * - sequential: [agent:<b>] for each billet in seat order, chained by data edges;
 * - parallel: [fanout] (parallel) -> each [agent:<b>] -> [join];
 * - consensus: [fanout] -> each [agent:<b>] -> [consensus] (formation consensus_mode);
 * - manager-delegates: a billet with reports becomes [delegate:<b>] (its agent
 *   picks one report) -> the chosen report's subtree -> [review:<b>] (its agent
 *   reviews the result); a billet without reports is [agent:<b>]. Depth-first,
 *   reports in seat order.
 * `pre` stages run before the team ([pre:<i>]) and `post` stages after ([post:<i>]).
 * Nodes are emitted in a topological order, which is the execution order.
 * Hashes: formation hash = content hash of the projection (internal/projection.ts); graph
 * hash = see graphHashOf.
 * Pins: given the catalog's pins (`options.toolPins`, imported tools only), the graph carries
 * the pin of every pinned tool it can call (`tool_pins`, internal/tool-pins.ts), and so does
 * its hash; a graph that calls no pinned tool has neither, exactly as before pins existed.
 */
import { hashJson, sortedKeys, type Sha256 } from '../json-hash.ts';
import { contractsOf, intersectAuthority, isSubset, type AuthorityEnvelope } from '../authority/envelope.ts';
import { validateGraph } from '../engine/validate.ts';
import { GRAPH_FORMAT_VERSION, type Graph, type GraphEdge, type GraphNode, type SeatAuthority, type SeatSpec } from '../engine/types.ts';
import { CompileError, parseAuthority, project, seatOrder, type ProjectedBillet, type Projection } from './internal/projection.ts';
import { graphToolPins } from './internal/tool-pins.ts';

/** Every tool a compiled graph can call, with its seat (a crew bundle's issuer and a device judge a crew's tools by it). */
export { graphToolUses } from './internal/tool-pins.ts';
import { seatToolChoiceProblem } from '../engine/tool-choice.ts';
import type { BilletInput, CompileResult, FormationInput, SeatBinding, StageSpec } from './types.ts';

const REVIEW_PROMPT = 'Your report has returned the result below. Review it and give the final answer to the task.';

function seatAuthority(e: AuthorityEnvelope): SeatAuthority {
  return {
    allowed_tools: e.allowed_tools ?? [],
    clearance_level: e.clearance_level ?? 0,
    permission_mode: e.permission_mode ?? 'ask',
    data_grant_ids: e.data_grant_ids ?? [],
    egress_allowlist: e.egress_allowlist ?? [],
    compartments: e.compartments ?? [],
    governing_contract_ids: contractsOf(e),
    budget_ceiling: e.budget_ceiling !== undefined && Number.isFinite(e.budget_ceiling) ? e.budget_ceiling : null,
  };
}

function checkHierarchy(p: Projection): Map<string, ProjectedBillet[]> {
  const byId = new Map(p.billets.map((b) => [b.id, b]));
  for (const b of p.billets) {
    if (b.reports_to !== null && !byId.has(b.reports_to)) {
      throw new CompileError('unknown_reports_to', `billet ${b.id} reports to ${b.reports_to}, which is not a billet of this formation`, {
        billet: b.id,
        reports_to: b.reports_to,
      });
    }
  }
  // Cycles: follow reporting lines; 1 = on the current path, 2 = known to reach a root.
  const state = new Map<string, number>();
  for (const start of p.billets) {
    const path: string[] = [];
    let cur: string | null = start.id;
    while (cur !== null && state.get(cur) !== 2) {
      if (state.get(cur) === 1) {
        const cycle = path.slice(path.indexOf(cur));
        throw new CompileError('reports_to_cycle', `reporting lines form a cycle: ${cycle.join(' -> ')} -> ${cur}`, { cycle });
      }
      state.set(cur, 1);
      path.push(cur);
      cur = byId.get(cur)!.reports_to;
    }
    for (const id of path) state.set(id, 2);
  }
  for (const b of p.billets) {
    if (b.reports_to === null) continue;
    const parent = byId.get(b.reports_to)!;
    if (b.authority_cap === parent.authority_cap) continue; // the same normalized cap object
    const sub = isSubset(b.authority_cap, parent.authority_cap);
    if (!sub.ok) {
      throw new CompileError('over_authority', `billet ${b.id} has authority beyond its manager ${parent.id}: ${sub.fields.join(', ')}`, {
        billet: b.id,
        parent: parent.id,
        fields: sub.fields,
      });
    }
  }
  const children = new Map<string, ProjectedBillet[]>();
  for (const b of seatOrder(p.billets)) {
    if (b.reports_to === null) continue;
    const list = children.get(b.reports_to);
    if (list === undefined) children.set(b.reports_to, [b]);
    else list.push(b);
  }
  return children;
}

function stageNode(s: StageSpec, id: string): GraphNode {
  const seat = 'seat' in s && typeof s.seat === 'string' ? { seat: s.seat } : {};
  return { id, kind: s.kind, config: s.config, ...seat } as unknown as GraphNode;
}

function build(
  p: Projection,
  children: Map<string, ProjectedBillet[]>,
): { nodes: GraphNode[]; edges: GraphEdge[]; entry: string; exit: string } {
  const nodes: GraphNode[] = [];
  const edges: GraphEdge[] = [];
  const agentConfig = p.prompt !== null ? { prompt: p.prompt } : {};
  // A billet's step policy (timeout_ms, retry) rides on its agent steps' configs.
  const policyOf = (b: ProjectedBillet) => ({
    ...(b.timeout_ms !== undefined ? { timeout_ms: b.timeout_ms } : {}),
    ...(b.retry !== undefined ? { retry: b.retry } : {}),
  });
  // The billet's tool_choice binds its agent step's first model call (core/engine/tool-choice.ts); not a review's.
  const agentNode = (b: ProjectedBillet): GraphNode => ({
    id: `agent:${b.id}`,
    kind: 'agent',
    seat: b.id,
    config: { ...agentConfig, ...policyOf(b), ...(b.tool_choice !== undefined ? { tool_choice: b.tool_choice } : {}) },
  });
  const order = seatOrder(p.billets);
  let entry: string;
  let exit: string;
  switch (p.coordination_policy) {
    case 'sequential': {
      for (const b of order) nodes.push(agentNode(b));
      for (let i = 1; i < nodes.length; i++) edges.push({ from: nodes[i - 1]!.id, to: nodes[i]!.id });
      entry = nodes[0]!.id;
      exit = nodes[nodes.length - 1]!.id;
      break;
    }
    case 'parallel':
    case 'consensus': {
      nodes.push({ id: 'fanout', kind: 'parallel', config: {} });
      for (const b of order) nodes.push(agentNode(b));
      const sink: GraphNode =
        p.coordination_policy === 'parallel'
          ? { id: 'join', kind: 'join', config: { mode: 'object' } }
          : { id: 'consensus', kind: 'consensus', config: { mode: p.consensus_mode } };
      for (const b of order) edges.push({ from: 'fanout', to: `agent:${b.id}` });
      for (const b of order) edges.push({ from: `agent:${b.id}`, to: sink.id });
      nodes.push(sink);
      entry = 'fanout';
      exit = sink.id;
      break;
    }
    case 'manager-delegates': {
      const roots = order.filter((b) => b.reports_to === null);
      if (roots.length !== 1)
        throw new CompileError('root_count', `manager-delegates needs exactly one billet without reports_to, found ${roots.length}`, {
          roots: roots.map((r) => r.id),
        });
      const entryOf = new Map<string, string>();
      const exitOf = new Map<string, string>();
      const stack: { b: ProjectedBillet; phase: 'enter' | 'exit' }[] = [{ b: roots[0]!, phase: 'enter' }];
      while (stack.length > 0) {
        const { b, phase } = stack.pop()!;
        const reports = children.get(b.id) ?? [];
        if (phase === 'enter') {
          if (reports.length === 0) {
            const n = agentNode(b);
            nodes.push(n);
            entryOf.set(b.id, n.id);
            exitOf.set(b.id, n.id);
            continue;
          }
          nodes.push({ id: `delegate:${b.id}`, kind: 'delegate', seat: b.id, config: { seat: b.id, reports: reports.map((r) => r.id) } });
          entryOf.set(b.id, `delegate:${b.id}`);
          stack.push({ b, phase: 'exit' });
          for (let i = reports.length - 1; i >= 0; i--) stack.push({ b: reports[i]!, phase: 'enter' });
        } else {
          const review = `review:${b.id}`;
          nodes.push({ id: review, kind: 'agent', seat: b.id, config: { prompt: REVIEW_PROMPT, ...policyOf(b) } });
          for (const r of reports) edges.push({ from: `delegate:${b.id}`, to: entryOf.get(r.id)!, when: r.id });
          for (const r of reports) edges.push({ from: exitOf.get(r.id)!, to: review });
          exitOf.set(b.id, review);
        }
      }
      entry = entryOf.get(roots[0]!.id)!;
      exit = exitOf.get(roots[0]!.id)!;
      break;
    }
  }
  // Stages around the team.
  const link = (from: GraphNode, to: string) =>
    edges.push(from.kind === 'conditional' ? { from: from.id, to, when: 'then' } : { from: from.id, to });
  const pre = p.pre.map((s, i) => stageNode(s, `pre:${i}`));
  const post = p.post.map((s, i) => stageNode(s, `post:${i}`));
  for (let i = 0; i < pre.length; i++) link(pre[i]!, i + 1 < pre.length ? pre[i + 1]!.id : entry);
  let prev: GraphNode = nodes.find((n) => n.id === exit)!;
  for (const s of post) {
    link(prev, s.id);
    prev = s;
  }
  return {
    nodes: [...pre, ...nodes, ...post],
    edges,
    entry: pre[0]?.id ?? entry,
    exit: post[post.length - 1]?.id ?? exit,
  };
}

function seats(p: Projection, agents: Record<string, SeatBinding> | undefined): Record<string, SeatSpec> {
  if (agents !== undefined) {
    const missing = p.billets.filter((b) => agents[b.id] === undefined || typeof agents[b.id]!.agent_id !== 'string').map((b) => b.id);
    if (missing.length > 0)
      throw new CompileError('unbound_seat', `no agent bound to billets ${missing.slice(0, 10).join(', ')}`, {
        billets: missing.slice(0, 100),
      });
  }
  const out: Record<string, SeatSpec> = {};
  const unboundAuthority = new Map<AuthorityEnvelope, SeatAuthority>();
  for (const b of p.billets) {
    const binding = agents?.[b.id];
    const auth =
      binding?.authority !== undefined
        ? intersectAuthority(parseAuthority(binding.authority, `agents.${b.id}.authority`), b.authority_cap)
        : b.authority_cap;
    const seatAuth =
      binding?.authority !== undefined
        ? seatAuthority(auth)
        : (unboundAuthority.get(auth) ?? unboundAuthority.set(auth, seatAuthority(auth)).get(auth)!);
    // A bound agent may narrow the cap below what the billet's tool_choice needs.
    const tp = binding !== undefined ? seatToolChoiceProblem(b.tool_choice, seatAuth) : null;
    if (tp !== null)
      throw new CompileError('invalid_formation', `seat ${b.id}: ${tp}`, { billet: b.id, field: 'tool_choice', problem: tp });
    out[b.id] = {
      billet_id: b.id,
      role_label: b.role_label,
      required_skills: b.required_skills,
      reports_to: b.reports_to,
      agent_id: binding?.agent_id ?? null,
      model: binding?.model ?? null,
      system_prompt: binding?.system_prompt ?? null,
      authority: seatAuth,
    };
  }
  return out;
}

/**
 * The graph hash: the graph is a pure function of (compiler format version, formation
 * projection, seat bindings, the pins of the tools it calls), so its hash is the content
 * hash of exactly those: `{ compiler: GRAPH_FORMAT_VERSION, formation_hash, bindings }` with
 * bindings sorted by billet id ({ agent_id, authority (normalized), billet, model,
 * system_prompt }) or null when compiled without a crew, and `tool_pins` (`{ tool: pin }`)
 * only when the graph calls a pinned tool. Equal hashes mean equal graphs; any change of the
 * formation, of a binding, of a pin it uses, or of the compiler's output (which bumps the
 * version) changes it.
 */
function graphHashOf(
  formationHash: string,
  p: Projection,
  agents: Record<string, SeatBinding> | undefined,
  sha256: Sha256 | undefined,
  toolPins: Record<string, string> | undefined,
): string {
  const bindings =
    agents === undefined
      ? null
      : p.billets.map((b) => {
          const a = agents[b.id]!;
          return {
            agent_id: a.agent_id,
            authority: a.authority !== undefined ? sortedKeys(parseAuthority(a.authority, `agents.${b.id}.authority`)) : null,
            billet: b.id,
            model: a.model ?? null,
            system_prompt: a.system_prompt ?? null,
          };
        });
  return hashJson(
    toolPins === undefined
      ? { bindings, compiler: GRAPH_FORMAT_VERSION, formation_hash: formationHash }
      : { bindings, compiler: GRAPH_FORMAT_VERSION, formation_hash: formationHash, tool_pins: toolPins },
    sha256,
  );
}

/**
 * Compiles a formation. With `agents` (a crew's bindings, billet id -> agent) every seat
 * must be bound and carries the agent's authority ∩ the billet cap; without, seats are unbound
 * (the graph of GET .../formations/{id}/graph).
 * `options.sha256` may supply a native synchronous SHA-256 (the cell passes node:crypto's);
 * the hashes are the same with or without it, only faster on large formations.
 * `options.toolPins`: the catalog's pins (tool name -> pin) of its imported tools; the graph
 * and its hash carry those of the tools it can call.
 * @example const r = compileFormation({ name: 'f', coordination_policy: 'sequential' }, [{ id: 'b1', role_label: 'writer', authority_cap: {} }]); if (r.ok) r.graphHash
 */
export function compileFormation(
  formation: FormationInput,
  billets: readonly BilletInput[],
  agents?: Record<string, SeatBinding>,
  options: { sha256?: Sha256; toolPins?: Readonly<Record<string, string>> } = {},
): CompileResult {
  try {
    const p = project(formation, billets);
    const children = checkHierarchy(p);
    const shape = build(p, children);
    const formationHash = hashJson(p, options.sha256);
    const seatMap = seats(p, agents);
    let clearance = 0;
    for (const s of Object.values(seatMap)) clearance = Math.max(clearance, s.authority.clearance_level);
    const graph: Graph = {
      v: GRAPH_FORMAT_VERSION,
      formation_hash: formationHash,
      policy: p.coordination_policy,
      entry: shape.entry,
      exit: shape.exit,
      nodes: shape.nodes,
      edges: shape.edges,
      seats: seatMap,
      limits: p.limits,
      placement: { clearance, topology: p.topology },
    };
    const toolPins = graphToolPins(graph.nodes, seatMap, options.toolPins);
    if (toolPins !== undefined) graph.tool_pins = toolPins;
    const v = validateGraph(graph);
    if (!v.ok)
      return {
        ok: false,
        code: 'invalid_formation',
        message: `stage ${v.node ?? ''}: ${v.problem}`,
        details: { node: v.node, problem: v.problem },
      };
    return { ok: true, graph, graphHash: graphHashOf(formationHash, p, agents, options.sha256, toolPins), formationHash };
  } catch (e) {
    if (e instanceof CompileError) return { ok: false, code: e.code, message: e.message, details: e.details };
    if (e instanceof TypeError)
      return { ok: false, code: 'invalid_formation', message: 'formation is not plain JSON or has invalid values', details: {} };
    throw e;
  }
}
