/**
 * Finding a crew by its compiled graph: a scheduled `agent` job pins the
 * graph hash of a crew's graph (formation + bound agents); the crew whose
 * graph compiles to that hash now is the one it runs. A crew whose formation
 * no longer compiles has no graph and matches nothing.
 */
import type { Graph } from '../../../core/engine/types.ts';
import { compileFor } from './compile.ts';
import type { TeamsContext } from '../context.ts';
import { crewFormation, listCrews } from './formations.ts';
import type { Crew } from './types.ts';

const PAGE = 500;
const MAX_CREWS = 100_000;

/** The crew whose current compiled graph has `graphHash`, with that graph; undefined when none. */
export async function crewByGraph(
  ctx: TeamsContext,
  graphHash: string,
): Promise<{ crew: Crew; graph: Graph; graphHash: string } | undefined> {
  for (let offset = 0; offset < MAX_CREWS; offset += PAGE) {
    const crews = await listCrews(ctx, PAGE, offset);
    for (const crew of crews) {
      const f = await crewFormation(ctx, crew);
      if (!f) continue;
      try {
        const c = await compileFor(ctx, f, crew);
        if (c.graphHash === graphHash) return { crew, graph: c.graph, graphHash: c.graphHash };
      } catch {
        // A crew whose formation no longer compiles has no graph: not a match.
      }
    }
    if (crews.length < PAGE) break;
  }
  return undefined;
}
