/**
 * Placement: which cell may execute a run. Clearance and topology are hard
 * constraints, never degraded: a candidate qualifies only when its clearance
 * ceiling is at least the run's highest seat clearance and it carries every
 * required topology label with the required value. The first qualifying
 * candidate in the caller's order wins (the caller lists itself first, then
 * peers), so adding peers later does not change this function.
 *
 * When none qualifies, `unmet` names every constraint no candidate meets, in a
 * stable order: `clearance` first, then `topology.<label>` sorted by label
 * (`topology.site=hq`). With no candidates at all: `no_candidate_cell`.
 */

export interface PlacementRequirements {
  clearance: number;
  topology: Record<string, string>;
}
export interface PlacementCandidate {
  cellId: string;
  clearance: number;
  topology: Record<string, string>;
}

/** Chooses a cell or names the unmet constraints. */
export function place(
  requirements: PlacementRequirements,
  candidates: readonly PlacementCandidate[],
): { ok: true; cellId: string } | { ok: false; unmet: string[] } {
  const labels = Object.keys(requirements.topology).sort();
  const problems = (c: PlacementCandidate): string[] => {
    const out: string[] = [];
    if (!(c.clearance >= requirements.clearance)) out.push('clearance');
    for (const l of labels) {
      if (!Object.hasOwn(c.topology, l) || c.topology[l] !== requirements.topology[l])
        out.push(`topology.${l}=${requirements.topology[l]}`);
    }
    return out;
  };
  const unmetByAll = new Set<string>();
  let first = true;
  for (const c of candidates) {
    const p = problems(c);
    if (p.length === 0) return { ok: true, cellId: c.cellId };
    if (first) {
      for (const x of p) unmetByAll.add(x);
      first = false;
    } else {
      for (const x of [...unmetByAll]) if (!p.includes(x)) unmetByAll.delete(x);
    }
  }
  if (candidates.length === 0) return { ok: false, unmet: ['no_candidate_cell'] };
  // Every candidate fails something; if no single constraint fails everywhere, the
  // combination is unmet: report the first candidate's problems.
  if (unmetByAll.size === 0) return { ok: false, unmet: problems(candidates[0]!) };
  return { ok: false, unmet: [...unmetByAll] };
}
