/**
 * Instantiating a crew: an active agent bound to every billet of a
 * formation. The crew must compile, and binding the agents (each seat's
 * authority: agent ∩ billet cap) must stay inside the caller's envelope
 * authority (403 wider_than_caller, audited).
 */
import type { AuthContext } from '../context.ts';
import { newId } from '../ids.ts';
import { assertSeatsWithinCaller, compileFor } from './compile.ts';
import type { TeamsContext } from './context.ts';
import { checkAssignments, listBillets, type Crew, type Formation } from './formations.ts';
import * as repo from './repository.ts';

export interface CrewInput {
  assignments: Record<string, string>;
  name?: string | undefined;
  workspace_id?: string | undefined;
}

/** Creates a crew of formation `f`; returns it with its compiled graph hash. */
export async function createCrew(
  ctx: TeamsContext,
  auth: AuthContext,
  f: Formation,
  input: CrewInput,
): Promise<{ crew: Crew; graphHash: string }> {
  await checkAssignments(ctx, await listBillets(ctx, f.formation_id), input.assignments);
  const crew: Crew = {
    crew_id: newId('crw'),
    formation_id: f.formation_id,
    name: input.name ?? `${f.name} crew`,
    assignments: input.assignments,
    workspace_id: input.workspace_id ?? f.workspace_id ?? 'default',
    created_at: ctx.core.clock.now(),
    created_by: auth.principal.id,
  };
  const compiled = await compileFor(ctx, f, crew);
  await assertSeatsWithinCaller(ctx, auth, compiled.graph, { action: 'crew.create', target: f.formation_id });
  await ctx.core.store.write(async (tx) => {
    await repo.insertCrew(tx, crew);
    await ctx.iam.audit(tx, {
      at: crew.created_at,
      actor: crew.created_by,
      action: 'crew.create',
      target: crew.crew_id,
      outcome: 'ok',
      details: { formation_id: crew.formation_id, graph_hash: compiled.graphHash },
    });
  });
  return { crew, graphHash: compiled.graphHash };
}
