/**
 * Placement of a crew run: the graph's hard constraints (highest seat
 * clearance, topology labels) judged by core `place` over the candidate
 * cells (v1: this cell alone; peers are appended later without changing the
 * rule). Unmet constraints are named; a run is never degraded.
 */
import { place } from '../../core/placement.ts';
import type { CellConfig } from '../config.ts';

export interface UnmetConstraint {
  constraint: string;
  required: unknown;
  available: unknown;
}

export function checkPlacement(
  need: { clearance: number; topology: Record<string, string> },
  cell: Pick<CellConfig, 'clearance' | 'topology' | 'cellId'>,
): UnmetConstraint[] {
  const r = place({ clearance: need.clearance, topology: need.topology ?? {} }, [
    { cellId: cell.cellId ?? 'self', clearance: cell.clearance, topology: cell.topology },
  ]);
  if (r.ok) return [];
  return r.unmet.map((u) => {
    if (u === 'clearance') return { constraint: 'clearance', required: need.clearance, available: cell.clearance };
    const m = /^topology\.([^=]+)=(.*)$/.exec(u);
    if (m) return { constraint: `topology.${m[1]!}`, required: m[2]!, available: cell.topology[m[1]!] ?? null };
    return { constraint: u, required: null, available: null };
  });
}
