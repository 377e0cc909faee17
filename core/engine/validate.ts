/**
 * Structural validation of an execution graph before it runs (and by the
 * compiler on what it emits): unique node ids, known executor kinds, edges
 * between known nodes that respect the node order (a topological order),
 * seats that exist, sane limits and configs, and every CEL expression checked.
 */
import { compileExpr } from '../expr/compile.ts';
import { VARS } from './internal/context.ts';
import { stepPolicyProblem } from './policy.ts';
import { seatToolChoiceProblem, toolChoiceProblem } from './tool-choice.ts';
import { EXECUTOR_KINDS, type Graph, type GraphNode, type LeafSpec } from './types.ts';

export type GraphVerdict = { ok: true } | { ok: false; node: string | null; problem: string };

const isInt = (n: unknown, min: number) => typeof n === 'number' && Number.isSafeInteger(n) && n >= min;

function exprProblem(src: unknown, vars: readonly string[]): string | null {
  if (typeof src !== 'string') return 'expression missing';
  const c = compileExpr(src, { variables: vars });
  return c.ok ? null : `expression ${c.error.code}: ${c.error.message}`;
}

function leafProblem(g: Graph, leaf: LeafSpec | undefined): string | null {
  if (leaf === undefined || typeof leaf !== 'object') return 'body missing';
  if (!['agent', 'tool', 'skill', 'transform'].includes(leaf.kind)) return `body kind ${String(leaf.kind)} not allowed`;
  return configProblem(g, { id: 'body', ...leaf } as GraphNode);
}

function configProblem(g: Graph, n: GraphNode): string | null {
  const c = n.config as unknown as Record<string, unknown>;
  if (typeof c !== 'object' || c === null) return 'config missing';
  const seat = (n as { seat?: unknown }).seat;
  if (seat !== undefined && (typeof seat !== 'string' || g.seats[seat] === undefined)) return `unknown seat ${String(seat)}`;
  if (n.kind === 'agent' || n.kind === 'tool' || n.kind === 'skill') {
    const pp = stepPolicyProblem(c);
    if (pp !== null) return `${pp.field}: ${pp.problem}`;
  }
  switch (n.kind) {
    case 'agent':
    case 'delegate':
      if (typeof seat !== 'string') return 'seat required';
      if (n.kind === 'agent' && n.config.tool_choice !== undefined) {
        const tp = toolChoiceProblem(n.config.tool_choice) ?? seatToolChoiceProblem(n.config.tool_choice, g.seats[seat]!.authority);
        if (tp !== null) return tp;
      }
      if (n.kind === 'delegate' && (!Array.isArray(n.config.reports) || n.config.reports.length === 0)) return 'reports required';
      return null;
    case 'tool':
      if (typeof n.config.tool !== 'string') return 'tool required';
      return n.config.args_expr !== undefined ? exprProblem(n.config.args_expr, VARS.data) : null;
    case 'skill':
      if (typeof n.config.skill?.name !== 'string' || typeof n.config.skill.skill_kind !== 'string') return 'skill required';
      if (n.config.skill.skill_kind === 'transformer' && typeof n.config.skill.definition?.expr === 'string')
        return exprProblem(n.config.skill.definition.expr, VARS.data);
      return null;
    case 'conditional':
    case 'transform':
      return exprProblem(c.expr, VARS.data);
    case 'gate':
      if (!Array.isArray(n.config.rules)) return 'rules required';
      for (const r of n.config.rules) {
        if (typeof r?.name !== 'string') return 'rule name required';
        const p = exprProblem(r.expr, VARS.data);
        if (p !== null) return `rule ${r.name}: ${p}`;
      }
      return null;
    case 'human_approval': {
      const h = n.config;
      if (h.rule !== 'quorum' && h.rule !== 'two_person') return 'rule must be quorum or two_person';
      if (!isInt(h.timeout_ms, 1)) return 'timeout_ms must be a positive integer';
      if (h.quorum !== undefined && !isInt(h.quorum, 1)) return 'quorum must be a positive integer';
      const named = h.approvers ?? [];
      if (named.length > 0 && (h.quorum ?? 1) > named.length) return 'quorum larger than the approvers list';
      if (h.rule === 'two_person' && named.length === 1) return 'two_person needs at least two approvers';
      return null;
    }
    case 'consensus':
      return n.config.mode === 'majority' || n.config.mode === 'unanimity' ? null : 'mode must be majority or unanimity';
    case 'join':
    case 'parallel':
      return null;
    case 'timer':
      return isInt(n.config.delay_ms, 0) ? null : 'delay_ms must be a non-negative integer';
    case 'map':
      if (!isInt(n.config.max_items, 0)) return 'max_items must be a non-negative integer';
      return exprProblem(n.config.over, VARS.data) ?? leafProblem(g, n.config.body);
    case 'loop':
      if (!isInt(n.config.max_iterations, 1)) return 'max_iterations must be a positive integer';
      return exprProblem(n.config.until, VARS.loop) ?? leafProblem(g, n.config.body);
    default:
      return 'unknown executor kind';
  }
}

/** Checks a graph; the first problem found, with its node. */
export function validateGraph(g: Graph): GraphVerdict {
  if (typeof g !== 'object' || g === null || g.v !== 1) return { ok: false, node: null, problem: 'unsupported graph format' };
  if (!Array.isArray(g.nodes) || g.nodes.length === 0 || !Array.isArray(g.edges))
    return { ok: false, node: null, problem: 'nodes and edges required' };
  const L = g.limits;
  if (!L || !isInt(L.max_steps, 1) || !isInt(L.max_steps_per_seat, 1) || !isInt(L.max_tool_rounds, 0) || !isInt(L.default_max_tokens, 1))
    return { ok: false, node: null, problem: 'limits invalid' };
  const index = new Map<string, number>();
  for (let i = 0; i < g.nodes.length; i++) {
    const n = g.nodes[i]!;
    if (typeof n?.id !== 'string' || n.id.length === 0) return { ok: false, node: null, problem: `node ${i} has no id` };
    if (index.has(n.id)) return { ok: false, node: n.id, problem: 'duplicate node id' };
    // '/', '[', ']' and '#' build derived step ids (<n>/model/0, <n>[i], <n>#k): not allowed in node ids.
    if (/[/[\]#]/.test(n.id) || n.id === 'run' || n.id.length > 200)
      return { ok: false, node: n.id, problem: 'node id must not contain / [ ] # (nor be "run"), at most 200 characters' };
    if (!(EXECUTOR_KINDS as readonly string[]).includes(n.kind))
      return { ok: false, node: n.id, problem: `unknown executor ${String(n.kind)}` };
    index.set(n.id, i);
  }
  if (!index.has(g.entry) || !index.has(g.exit)) return { ok: false, node: null, problem: 'entry/exit not in nodes' };
  if (g.tool_pins !== undefined) {
    const pins = g.tool_pins as unknown;
    if (typeof pins !== 'object' || pins === null || Array.isArray(pins))
      return { ok: false, node: null, problem: 'tool_pins must map tools to pins' };
    for (const [t, p] of Object.entries(pins))
      if (typeof p !== 'string' || !/^sha256:[0-9a-f]{64}$/.test(p))
        return { ok: false, node: null, problem: `tool_pins.${t} is not a pin` };
  }
  for (const e of g.edges) {
    const a = index.get(e?.from);
    const b = index.get(e?.to);
    if (a === undefined || b === undefined) return { ok: false, node: e?.from ?? null, problem: 'edge between unknown nodes' };
    if (a >= b) return { ok: false, node: e.from, problem: `edge ${e.from} -> ${e.to} against the node order (cycle or unsorted)` };
    if (e.when !== undefined && typeof e.when !== 'string') return { ok: false, node: e.from, problem: 'edge when must be a string' };
  }
  for (const n of g.nodes) {
    const p = configProblem(g, n);
    if (p !== null) return { ok: false, node: n.id, problem: p };
  }
  return { ok: true };
}
