/**
 * Lays a run's graph out for drawing: @dagrejs/dagre (layered layout of a
 * directed graph) gives every node a box and every edge a polyline; the
 * console draws them as SVG itself (GraphView.tsx). Pure and deterministic:
 * the same graph gives the same picture (tested in test/console/layout.test.ts).
 */
import dagre from '@dagrejs/dagre';
import type { GraphLike, GraphNodeLike } from '../run-model.ts';

export interface PlacedNode {
  id: string;
  kind: string;
  label: string;
  sublabel: string;
  x: number;
  y: number;
  width: number;
  height: number;
}
export interface PlacedEdge {
  from: string;
  to: string;
  when: string | null;
  points: { x: number; y: number }[];
}
export interface Layout {
  width: number;
  height: number;
  nodes: PlacedNode[];
  edges: PlacedEdge[];
}

const NODE_HEIGHT = 52;
const CHAR_WIDTH = 7.8;
const MIN_WIDTH = 120;
const MAX_CHARS = 28;

/** Shortens a label to what fits a node box. */
export function clip(s: string, max = MAX_CHARS): string {
  return s.length <= max ? s : `${s.slice(0, max - 1)}…`;
}

/** What a node is called (the seat's role for seated steps, else the node id) and its kind. */
export function nodeLabels(n: GraphNodeLike, graph: GraphLike): { label: string; sublabel: string } {
  const seat = n.seat !== undefined ? graph.seats?.[n.seat] : undefined;
  return { label: seat?.role_label ? seat.role_label : n.id, sublabel: n.kind };
}

/** Room for the second line, `<kind> · <state>`, with the longest state name. */
const STATE_ROOM = ' · completed'.length;
const SUB_CHAR_WIDTH = 6.6;

/** Positions every node and edge of `graph`, left to right. */
export function layoutGraph(graph: GraphLike): Layout {
  const g = new dagre.graphlib.Graph({ multigraph: true });
  g.setGraph({ rankdir: 'LR', nodesep: 28, ranksep: 56, marginx: 16, marginy: 16 });
  g.setDefaultEdgeLabel(() => ({}));
  const labels = new Map<string, { label: string; sublabel: string }>();
  for (const n of graph.nodes) {
    const l = nodeLabels(n, graph);
    labels.set(n.id, l);
    const width = Math.max(clip(l.label).length * CHAR_WIDTH, (l.sublabel.length + STATE_ROOM) * SUB_CHAR_WIDTH);
    g.setNode(n.id, { width: Math.max(MIN_WIDTH, Math.round(width) + 28), height: NODE_HEIGHT });
  }
  graph.edges.forEach((e, i) => {
    if (g.hasNode(e.from) && g.hasNode(e.to)) g.setEdge(e.from, e.to, {}, `e${i}`);
  });
  dagre.layout(g);
  const nodes: PlacedNode[] = graph.nodes.map((n) => {
    const p = g.node(n.id) as { x: number; y: number; width: number; height: number };
    const l = labels.get(n.id)!;
    return {
      id: n.id,
      kind: n.kind,
      label: l.label,
      sublabel: l.sublabel,
      x: p.x - p.width / 2,
      y: p.y - p.height / 2,
      width: p.width,
      height: p.height,
    };
  });
  const edges: PlacedEdge[] = [];
  graph.edges.forEach((e, i) => {
    const lab = g.edge({ v: e.from, w: e.to, name: `e${i}` }) as { points?: { x: number; y: number }[] } | undefined;
    if (lab?.points) edges.push({ from: e.from, to: e.to, when: e.when ?? null, points: lab.points.map((p) => ({ x: p.x, y: p.y })) });
  });
  const gl = g.graph() as { width?: number; height?: number };
  return { width: Math.ceil(gl.width ?? 0), height: Math.ceil(gl.height ?? 0), nodes, edges };
}
