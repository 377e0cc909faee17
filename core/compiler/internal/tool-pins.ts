/**
 * The pins a graph carries (`Graph.tool_pins`): for every tool the graph can
 * call (a seat's `allowed_tools`, a `tool` node's tool, a tool skill's tool,
 * in chains and in map and loop bodies) that the catalog pins (an imported
 * tool: docs/tools.md), its pin. Built-in tools have no pin, so a graph that
 * uses none of the imported tools carries no `tool_pins` at all and its
 * shape and hash are what they were before pins existed.
 */
import type { GraphNode, LeafSpec, SeatSpec, SkillSpec } from '../../engine/types.ts';

function skillTools(s: SkillSpec | undefined, out: Set<string>, depth = 0): void {
  if (s === undefined || typeof s !== 'object' || depth > 3) return;
  const def = s.definition;
  if (s.skill_kind === 'tool' && typeof def?.['tool'] === 'string') out.add(def['tool']);
  if (s.skill_kind === 'chain' && Array.isArray(def?.['steps']))
    for (const step of def['steps'] as unknown as SkillSpec[]) skillTools(step, out, depth + 1);
}

function leafTools(n: GraphNode | LeafSpec | undefined, out: Set<string>): void {
  if (n === undefined || typeof n !== 'object' || typeof n.config !== 'object' || n.config === null) return;
  switch (n.kind) {
    case 'tool':
      if (typeof n.config.tool === 'string') out.add(n.config.tool);
      return;
    case 'skill':
      skillTools(n.config.skill, out);
      return;
    case 'map':
    case 'loop':
      leafTools(n.config.body, out);
      return;
    default:
      return;
  }
}

/**
 * Every tool the graph can call, with the seat that calls it (null for a seatless step), sorted by seat
 * then tool: each seat's `allowed_tools`, and the tools its steps call by themselves. A crew bundle's
 * issuer (cell/edge/crew-source.ts) and a device (edge/mcp-tools.ts) judge a crew's tools from it.
 */
export function graphToolUses(
  nodes: readonly GraphNode[],
  seats: Readonly<Record<string, SeatSpec>>,
): { tool: string; seat: string | null }[] {
  const used = new Map<string, { tool: string; seat: string | null }>();
  const use = (tool: string, seat: string | null) => used.set(`${seat ?? ''}\u0000${tool}`, { tool, seat });
  for (const [id, s] of Object.entries(seats)) for (const t of s.authority.allowed_tools) use(t, id);
  for (const n of nodes) {
    const out = new Set<string>();
    leafTools(n, out);
    for (const t of out) use(t, 'seat' in n && typeof n.seat === 'string' ? n.seat : null);
  }
  return [...used].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, u]) => u);
}

/** `{ tool: pin }` for the pinned tools the graph can call, keys sorted; undefined when it calls none. */
export function graphToolPins(
  nodes: readonly GraphNode[],
  seats: Readonly<Record<string, SeatSpec>>,
  pins: Readonly<Record<string, string>> | undefined,
): Record<string, string> | undefined {
  if (pins === undefined) return undefined;
  const used = new Set<string>();
  for (const s of Object.values(seats)) for (const t of s.authority.allowed_tools) used.add(t);
  for (const n of nodes) leafTools(n, used);
  const out: Record<string, string> = {};
  for (const t of [...used].sort()) {
    const p = Object.hasOwn(pins, t) ? pins[t] : undefined;
    if (typeof p === 'string') out[t] = p;
  }
  return Object.keys(out).length > 0 ? out : undefined;
}
