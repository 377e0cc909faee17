/**
 * The crews a caller may run, as MCP's `tools/list` shows them (cell/mcp):
 * exactly those the run route would start for it, by the same checks the
 * route makes (the `agent_teams.write` permission, then every seat of the
 * crew's compiled graph within the caller's authority, seatsWithinCaller
 * beside assertSeatsWithinCaller). A crew that no longer compiles is not
 * listed (its run would be refused 400). Refusals a run records at its start
 * (no budget ledger, an inactive agent, placement) do not hide a crew: the
 * call answers them, as the route does.
 */
import { grants } from '../../../core/authority/scopes.ts';
import { isServiceError } from '../../../core/errors.ts';
import { PERMISSIONS } from '../../../core/permissions.ts';
import type { AuthContext } from '../../context.ts';
import type { TeamsContext } from '../context.ts';
import { compileFor, seatsWithinCaller } from '../formations/compile.ts';
import { crewFormation, listCrews } from '../formations/formations.ts';
import type { Crew, Formation } from '../formations/types.ts';

/** A crew the caller may run, with the formation version it pins (its name, purpose and input schema). */
export interface RunnableCrew {
  crew: Crew;
  formation: Formation;
}

const PAGE = 200;

/** The crews `auth` may run now, oldest first (at most `max`). */
export async function runnableCrews(ctx: TeamsContext, auth: AuthContext, max = 1000): Promise<RunnableCrew[]> {
  if (!grants(auth.effective, PERMISSIONS.teamsWrite)) return [];
  const out: RunnableCrew[] = [];
  for (let offset = 0; out.length < max; offset += PAGE) {
    const crews = await listCrews(ctx, PAGE, offset);
    for (const crew of crews) {
      if (out.length >= max) break;
      const formation = await crewFormation(ctx, crew);
      if (!formation) continue;
      const graph = await compileFor(ctx, formation, crew).then(
        (c) => c.graph,
        (e: unknown) => {
          // Does not compile (400): its run would be refused, so it is not offered; anything else is not ours to hide.
          if (isServiceError(e) && e.code === 'invalid_request') return null;
          throw e;
        },
      );
      if (graph && seatsWithinCaller(ctx, auth, graph)) out.push({ crew, formation });
    }
    if (crews.length < PAGE) break;
  }
  return out;
}
