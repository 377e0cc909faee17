/**
 * Draws a laid-out graph (./layout.ts) as SVG: a box per node coloured by its
 * state (with the state also written in the box: colour is never the only
 * cue), an arrow per edge (labelled with its route, `then`/`else` or a
 * delegate's choice). Nodes are keyboard focusable buttons (Enter or Space
 * selects one) named by their visible text (what the step is, its kind and its
 * state); `data-node` and `data-state` name each for tests and styles.
 */
import { useMemo } from 'preact/hooks';
import { NODE_STATE_LABEL, type GraphLike, type NodeState } from '../run-model.ts';
import { clip, layoutGraph } from './layout.ts';

export interface GraphViewProps {
  graph: GraphLike;
  states?: ReadonlyMap<string, NodeState>;
  selected?: string | null;
  onSelect?(id: string): void;
  label: string;
}

function pathOf(points: { x: number; y: number }[]): string {
  return points.map((p, i) => `${i === 0 ? 'M' : 'L'}${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(' ');
}

export function GraphView({ graph, states, selected, onSelect, label }: GraphViewProps) {
  const layout = useMemo(() => layoutGraph(graph), [graph]);
  const w = Math.max(layout.width, 200);
  const h = Math.max(layout.height, 80);
  const key = (e: KeyboardEvent, id: string) => {
    if (e.key === 'Enter' || e.key === ' ') {
      e.preventDefault();
      onSelect?.(id);
    }
  };
  return (
    <figure class="graph">
      {/* Scrolls when the drawing is wider than the screen: reachable with Tab when its steps are not (axe: scrollable-region-focusable). */}
      {/* biome-ignore lint/a11y/useAriaPropsSupportedByRole: the label goes with role region, set in the same case. */}
      <div
        class="graph-scroll"
        tabIndex={onSelect ? undefined : 0}
        role={onSelect ? undefined : 'region'}
        aria-label={onSelect ? undefined : label}
      >
        {/* biome-ignore lint/a11y/useSemanticElements: an SVG drawing has no <fieldset>; role group names the set of nodes. */}
        <svg viewBox={`0 0 ${w} ${h}`} width={w} height={h} role="group" aria-label={label} class="graph-svg">
          <defs>
            <marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
              <path d="M0,0 L10,5 L0,10 z" class="arrow" />
            </marker>
          </defs>
          {layout.edges.map((e) => (
            <g class="edge" key={`${e.from}->${e.to}`}>
              <path d={pathOf(e.points)} marker-end="url(#arrow)" />
              {e.when && e.points.length > 1 ? (
                <text
                  class="edge-label"
                  x={e.points[Math.floor(e.points.length / 2)]!.x}
                  y={e.points[Math.floor(e.points.length / 2)]!.y - 4}
                  text-anchor="middle"
                >
                  {`\u2068${clip(e.when, 16)}\u2069`}
                </text>
              ) : null}
            </g>
          ))}
          {layout.nodes.map((n) => {
            const state: NodeState = states?.get(n.id) ?? 'pending';
            const isSel = selected === n.id;
            return (
              // The role is `button` when nodes are selectable (then aria-pressed and the handlers apply), else `img`.
              // biome-ignore lint/a11y/useAriaPropsSupportedByRole: the linter cannot see the conditional role.
              // biome-ignore lint/a11y/noStaticElementInteractions: the handlers are set only with role button.
              <g
                key={n.id}
                class={`node state-${state}${isSel ? ' selected' : ''}`}
                data-node={n.id}
                data-state={state}
                transform={`translate(${n.x.toFixed(1)},${n.y.toFixed(1)})`}
                // Lower case: on an SVG element Preact sets attributes as written, and `tabIndex` is no SVG attribute.
                tabindex={onSelect ? 0 : -1}
                role={onSelect ? 'button' : 'img'}
                aria-pressed={onSelect ? isSel : undefined}
                aria-label={onSelect ? undefined : `${clip(n.label)}, ${n.kind}, ${NODE_STATE_LABEL[state]}`}
                onClick={onSelect ? () => onSelect(n.id) : undefined}
                onKeyDown={onSelect ? (e) => key(e as KeyboardEvent, n.id) : undefined}
              >
                <rect width={n.width} height={n.height} rx="8" ry="8" />
                <text x={n.width / 2} y={21} text-anchor="middle" class="node-label">
                  {`\u2068${clip(n.label)}\u2069`}
                </text>
                <text x={n.width / 2} y={39} text-anchor="middle" class="node-sub">{`${n.kind} · ${NODE_STATE_LABEL[state]}`}</text>
              </g>
            );
          })}
        </svg>
      </div>
      <figcaption class="legend">
        {(['pending', 'running', 'waiting', 'completed', 'refused', 'failed', 'cancelled', 'skipped'] as NodeState[]).map((s) => (
          <span class={`legend-item state-${s}`}>
            <span class="swatch" aria-hidden="true" />
            {NODE_STATE_LABEL[s]}
          </span>
        ))}
      </figcaption>
    </figure>
  );
}
