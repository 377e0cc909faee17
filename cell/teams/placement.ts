/**
 * Placement check for a crew run on this cell: the graph's hard constraints
 * (highest seat clearance, topology labels) against this cell's clearance
 * ceiling and labels. Unmet constraints are named; a run is never degraded.
 */
import type { CellConfig } from '../config.ts';

export interface UnmetConstraint { constraint: string; required: unknown; available: unknown }

export function checkPlacement(need: { clearance: number; topology: Record<string, string> }, cell: Pick<CellConfig, 'clearance' | 'topology'>): UnmetConstraint[] {
  const out: UnmetConstraint[] = [];
  if (need.clearance > cell.clearance) out.push({ constraint: 'clearance', required: need.clearance, available: cell.clearance });
  for (const [k, v] of Object.entries(need.topology ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    if (cell.topology[k] !== v) out.push({ constraint: `topology.${k}`, required: v, available: cell.topology[k] ?? null });
  }
  return out;
}
