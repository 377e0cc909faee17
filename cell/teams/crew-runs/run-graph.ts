/**
 * The graph of a crew run. A run pins what it executes: the formation version
 * and the crew's assignments when it started (its spec), the graph hash (its
 * row), and the graph itself (kept by hash in team_graphs when the run is
 * written). Before a run is driven again (recovery, a wake-up, a peer taking
 * it over), `checkRunGraph` recompiles what the run pinned with the agents as
 * they are now and compares the hash: a different graph is `graph_changed`,
 * with the expected and actual hashes in details. One function, so every
 * path that resumes a run judges it the same way.
 */
import type { Graph } from '../../../core/engine/types.ts';
import type { JsonObject } from '../../../core/journal/record.ts';
import { ServiceError } from '../../../core/errors.ts';
import type { Run } from '../../runs/api.ts';
import { compileFor } from '../formations/compile.ts';
import type { TeamsContext } from '../context.ts';
import { getCrew, getFormation } from '../formations/formations.ts';
import type { Crew } from '../formations/types.ts';
import * as repo from './repository.ts';

/** What a crew run pins, from its spec: runs started before versions pin version 1 and the crew's assignments. */
export function runPins(run: Run, crew: Crew | undefined): { formationVersion: number; assignments: Record<string, string> | undefined } {
  const s = (typeof run.spec === 'object' && run.spec !== null ? run.spec : {}) as Record<string, unknown>;
  const v = s['formation_version'];
  const a = s['assignments'];
  return {
    formationVersion: typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : 1,
    assignments:
      typeof a === 'object' && a !== null && !Array.isArray(a) && Object.values(a).every((x) => typeof x === 'string')
        ? (a as Record<string, string>)
        : crew?.assignments,
  };
}

export type RunGraphCheck =
  | { ok: true; crew: Crew; graph: Graph; graphHash: string; formationVersion: number }
  | { ok: false; reason: 'graph_changed'; message: string; details: JsonObject };

/**
 * Recompiles what the crew run pinned (formation version, assignments) with
 * the bound agents as they are now, and compares with the run's graph hash.
 */
export async function checkRunGraph(ctx: TeamsContext, run: Run): Promise<RunGraphCheck> {
  const crew = run.crew_id ? await getCrew(ctx, run.crew_id) : undefined;
  const pins = runPins(run, crew);
  const expected = run.graph_hash;
  const changed = (message: string, extra: JsonObject): RunGraphCheck => ({
    ok: false,
    reason: 'graph_changed',
    message,
    details: { expected_graph_hash: expected, actual_graph_hash: null, formation_version: pins.formationVersion, ...extra },
  });
  if (!crew || !pins.assignments) return changed('the crew of the run is gone; the run cannot resume', { detail: 'crew_unknown' });
  const formation = await getFormation(ctx, crew.formation_id, pins.formationVersion);
  if (!formation) return changed('the formation version of the run is gone; the run cannot resume', { detail: 'formation_unknown' });
  const pinned: Crew = { ...crew, formation_version: pins.formationVersion, assignments: pins.assignments };
  let compiled: Awaited<ReturnType<typeof compileFor>>;
  try {
    compiled = await compileFor(ctx, formation, pinned);
  } catch (e) {
    return changed('the formation no longer compiles; the run cannot resume', {
      detail: e instanceof ServiceError ? String(e.details?.['reason']) : 'compile_failed',
    });
  }
  if (compiled.graphHash !== expected) {
    return changed('the graph changed since the run started (an agent bound to it changed); it cannot resume', {
      actual_graph_hash: compiled.graphHash,
    });
  }
  return { ok: true, crew: pinned, graph: compiled.graph, graphHash: compiled.graphHash, formationVersion: pins.formationVersion };
}

/**
 * The graph a crew run executed: the one kept when it started; for a run from
 * before graphs were kept, the recompiled graph when its hash is the run's
 * (else undefined: it cannot be told any more).
 */
export async function executedGraph(ctx: TeamsContext, run: Run): Promise<{ graph: unknown; formationVersion: number } | undefined> {
  const crew = run.crew_id ? await getCrew(ctx, run.crew_id) : undefined;
  const pins = runPins(run, crew);
  if (run.graph_hash) {
    const kept = await repo.graphByHash(ctx.core.store, run.graph_hash);
    if (kept !== undefined) return { graph: kept, formationVersion: pins.formationVersion };
  }
  const check = await checkRunGraph(ctx, run);
  return check.ok ? { graph: check.graph, formationVersion: check.formationVersion } : undefined;
}
