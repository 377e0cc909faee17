/**
 * Placement of a crew run: the graph's hard constraints (highest seat
 * clearance, topology labels) judged by core `place` over the candidate
 * cells (v1: this cell alone; peers are appended later without changing the
 * rule). Unmet constraints are named, each with the `serve` flag that would
 * meet it (`fix`); a run is never degraded.
 */
import { place } from '../../../core/placement.ts';
import type { CellConfig } from '../../config.ts';

export interface UnmetConstraint {
  constraint: string;
  required: unknown;
  available: unknown;
  /** The `serve` flag of a cell that would meet it, e.g. `--clearance 3` or `--topology site=hq`. */
  fix: string;
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
    if (u === 'clearance')
      return { constraint: 'clearance', required: need.clearance, available: cell.clearance, fix: `--clearance ${need.clearance}` };
    const m = /^topology\.([^=]+)=(.*)$/.exec(u);
    if (m) {
      const label = m[1]!;
      return {
        constraint: `topology.${label}`,
        required: m[2]!,
        available: cell.topology[label] ?? null,
        fix: `--topology ${label}=${m[2]!}`,
      };
    }
    return { constraint: u, required: null, available: null, fix: '' };
  });
}

/**
 * The `serve` flags of a cell that would run it: `--clearance N` and
 * `--topology k=v,…` (which replaces a cell's labels, so it lists the labels
 * this cell keeps too).
 */
export function placementFix(unmet: readonly UnmetConstraint[], cell: Pick<CellConfig, 'topology'>): string {
  const flags: string[] = [];
  const clearance = unmet.find((u) => u.constraint === 'clearance');
  if (clearance) flags.push(clearance.fix);
  const labels = unmet.filter((u) => u.constraint.startsWith('topology.'));
  if (labels.length) {
    const topo: Record<string, string> = { ...cell.topology };
    for (const u of labels) topo[u.constraint.slice('topology.'.length)] = String(u.required);
    flags.push(
      `--topology ${Object.entries(topo)
        .map(([k, v]) => `${k}=${v}`)
        .join(',')}`,
    );
  }
  return flags.join(' ');
}

/** The refusal's message: what is unmet, what this cell has, and the flags that would meet it. */
export function placementMessage(unmet: readonly UnmetConstraint[], cell: Pick<CellConfig, 'topology'>): string {
  const what = unmet.map(
    (u) => `${u.constraint} ${String(u.required)} (this cell: ${u.available === null ? 'none' : String(u.available)})`,
  );
  return `no cell meets the run's placement constraints: ${what.join(', ')}; start a cell with ${placementFix(unmet, cell)}`;
}
