/**
 * Crews: an active agent bound to every billet of one version of a
 * formation. A crew pins that version: a new version of the formation leaves
 * the crew (and its runs) as they are until the crew is upgraded, which is an
 * explicit call that recompiles it.
 *
 * Creating, upgrading or rebinding a crew must compile, and binding the
 * agents (each seat's authority: agent ∩ billet cap) must stay inside the
 * caller's envelope authority (403 wider_than_caller, audited). A change of
 * the crew's graph is refused while a scheduled `agent` definition pins the
 * current one (409 in_use); deleting is refused while a run of the crew is
 * live or a definition names it.
 */
import { ServiceError, conflict, notFound, inUse } from '../../../core/errors.ts';
import type { AuthContext } from '../../context.ts';
import { newId } from '../../ids.ts';
import { assertSeatsWithinCaller, compileFor } from './compile.ts';
import type { TeamsContext } from '../context.ts';
import { checkAssignments, crewFormation, getCrew, getFormation, listBillets } from './formations.ts';
import type { Crew, Formation } from './types.ts';
import * as repo from './repository.ts';
import { crewReach } from '../reach.ts';
import { crewUsers } from '../usage.ts';

export interface CrewInput {
  assignments: Record<string, string>;
  name?: string | undefined;
  workspace_id?: string | undefined;
}

/** Creates a crew of formation `f` (at the version `f` shows); returns it with its compiled graph hash. */
export async function createCrew(
  ctx: TeamsContext,
  auth: AuthContext,
  f: Formation,
  input: CrewInput,
): Promise<{ crew: Crew; graphHash: string }> {
  await checkAssignments(ctx, await listBillets(ctx, f), input.assignments);
  const crew: Crew = {
    crew_id: newId('crw'),
    formation_id: f.formation_id,
    formation_version: f.version,
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
      details: { formation_id: crew.formation_id, formation_version: crew.formation_version, graph_hash: compiled.graphHash },
    });
  });
  return { crew, graphHash: compiled.graphHash };
}

/** The crew's compiled graph hash now, or null when it does not compile. */
export async function crewGraphHash(ctx: TeamsContext, crew: Crew): Promise<string | null> {
  const f = await crewFormation(ctx, crew);
  if (!f) return null;
  try {
    return (await compileFor(ctx, f, crew)).graphHash;
  } catch {
    return null;
  }
}

/**
 * Rebinds a crew to `f` (a version of its formation) with `assignments`: the
 * result must compile and stay inside the caller; a scheduled agent
 * definition pinning the crew's current graph refuses the change (409 in_use).
 */
async function rebind(
  ctx: TeamsContext,
  auth: AuthContext,
  crew: Crew,
  next: Crew,
  f: Formation,
  action: string,
  details: Record<string, unknown>,
): Promise<{ crew: Crew; graphHash: string }> {
  await checkAssignments(ctx, await listBillets(ctx, f), next.assignments);
  const compiled = await compileFor(ctx, f, next);
  await assertSeatsWithinCaller(ctx, auth, compiled.graph, { action, target: crew.crew_id });
  // The agents bound before and after: a rebinding changes what they do (docs/security.md, "Changing a shared thing").
  await ctx.iam.assertMayChangeShared(
    auth,
    { kind: 'crew', id: crew.crew_id },
    await crewReach(ctx, [crew.assignments, next.assignments]),
    action,
  );
  const before = await crewGraphHash(ctx, crew);
  if (before !== compiled.graphHash) {
    const pinned = (await crewUsers(ctx, crew, before)).job_definitions_pinning_graph;
    if (pinned?.length) {
      throw inUse(
        'crew',
        crew.crew_id,
        { job_definitions: pinned },
        "scheduled agent definitions pin the crew's current graph; delete them (or schedule the crew as team) first",
      );
    }
  }
  await ctx.core.store.write(async (tx) => {
    const now = await repo.crewById(tx, crew.crew_id);
    if (!now) throw notFound('crew');
    if (now.formation_version !== crew.formation_version || JSON.stringify(now.assignments) !== JSON.stringify(crew.assignments)) {
      throw conflict('the crew changed meanwhile; read it again', { reason: 'crew_changed' });
    }
    await repo.updateCrew(tx, next);
    await ctx.iam.audit(tx, {
      actor: auth.principal.id,
      action,
      target: crew.crew_id,
      outcome: 'ok',
      details: { ...details, graph_hash: compiled.graphHash, previous_graph_hash: before },
    });
  });
  return { crew: next, graphHash: compiled.graphHash };
}

export interface UpgradeInput {
  /** Default: the formation's latest version. */
  formation_version?: number | undefined;
  /** Agents for billets the new version adds (or to rebind); billets it removed are unbound. */
  assignments?: Record<string, string> | undefined;
}

/**
 * A crew never goes back to a version of its formation older than the one it runs (an upgrade goes to
 * a newer one): a fork runs the crew's current version or a newer one, so it cannot drop a stage (a
 * two-person approval) a later version added. 409 `formation_superseded`.
 */
export function assertNotSuperseded(crew: Crew, version: number, action: string): void {
  if (version >= crew.formation_version) return;
  throw new ServiceError(
    'conflict',
    `${action}: the crew runs formation version ${crew.formation_version}; version ${version} is superseded (name formation_version ${crew.formation_version} or newer)`,
    { details: { reason: 'formation_superseded', formation_version: crew.formation_version, requested: version } },
  );
}

/** Moves a crew to a newer version of its formation and recompiles it. */
export async function upgradeCrew(
  ctx: TeamsContext,
  auth: AuthContext,
  crewId: string,
  input: UpgradeInput,
): Promise<{ crew: Crew; graphHash: string }> {
  const crew = await getCrew(ctx, crewId);
  if (!crew) throw notFound('crew');
  const latest = await getFormation(ctx, crew.formation_id);
  if (!latest) throw notFound('formation');
  const target = input.formation_version ?? latest.version;
  if (target <= crew.formation_version) {
    throw new ServiceError(
      'conflict',
      `the crew runs version ${crew.formation_version}; an upgrade goes to a newer version (the latest is ${latest.version})`,
      { details: { reason: 'version_not_newer', formation_version: crew.formation_version, requested: target, latest: latest.version } },
    );
  }
  const f = target === latest.version ? latest : await getFormation(ctx, crew.formation_id, target);
  if (!f) throw notFound('formation version');
  const kept = new Set((await listBillets(ctx, f)).map((b) => b.billet_id));
  const assignments: Record<string, string> = {};
  for (const [b, a] of Object.entries(crew.assignments)) if (kept.has(b)) assignments[b] = a;
  Object.assign(assignments, input.assignments ?? {});
  const next: Crew = { ...crew, formation_version: f.version, assignments };
  return rebind(ctx, auth, crew, next, f, 'crew.upgrade', { from_version: crew.formation_version, to_version: f.version });
}

export interface CrewPatch {
  name?: string | undefined;
  workspace_id?: string | undefined;
  /** Billets to bind to other agents (merged into the crew's assignments). */
  assignments?: Record<string, string> | undefined;
}

/** Renames a crew, moves its default workspace, or binds other agents (same formation version). */
export async function patchCrew(
  ctx: TeamsContext,
  auth: AuthContext,
  crewId: string,
  patch: CrewPatch,
): Promise<{ crew: Crew; graphHash: string | null }> {
  const crew = await getCrew(ctx, crewId);
  if (!crew) throw notFound('crew');
  const next: Crew = {
    ...crew,
    ...(patch.name !== undefined ? { name: patch.name } : {}),
    ...(patch.workspace_id !== undefined ? { workspace_id: patch.workspace_id } : {}),
    assignments: { ...crew.assignments, ...(patch.assignments ?? {}) },
  };
  if (patch.assignments !== undefined) {
    const f = await crewFormation(ctx, crew);
    if (!f) throw notFound('formation');
    return rebind(ctx, auth, crew, next, f, 'crew.update', { fields: Object.keys(patch) });
  }
  await ctx.iam.assertMayChangeShared(auth, { kind: 'crew', id: crewId }, await crewReach(ctx, [crew.assignments]), 'crew.update');
  await ctx.core.store.write(async (tx) => {
    if (!(await repo.crewById(tx, crewId))) throw notFound('crew');
    await repo.updateCrew(tx, next);
    await ctx.iam.audit(tx, {
      actor: auth.principal.id,
      action: 'crew.update',
      target: crewId,
      outcome: 'ok',
      details: { fields: Object.keys(patch) },
    });
  });
  return { crew: next, graphHash: await crewGraphHash(ctx, next) };
}

/** Deletes a crew: refused (409 in_use) while a run of it is live or a job definition names it. */
export async function deleteCrew(ctx: TeamsContext, auth: AuthContext, crewId: string): Promise<void> {
  const crew = await getCrew(ctx, crewId);
  if (!crew) throw notFound('crew');
  // Unbinding every seat changes what the bound agents do: the caller covers them or manages their owners.
  await ctx.iam.assertMayChangeShared(auth, { kind: 'crew', id: crewId }, await crewReach(ctx, [crew.assignments]), 'crew.delete');
  const graphHash = await crewGraphHash(ctx, crew);
  await ctx.core.store.write(async (tx) => {
    if (!(await repo.crewById(tx, crewId))) throw notFound('crew');
    // Read in the deleting transaction: a run launched or a definition written meanwhile is seen, or one of the two retries.
    const { job_definitions_pinning_graph: _pinned, ...blocking } = await crewUsers(ctx, crew, graphHash, tx);
    if (Object.values(blocking).some((ids) => ids.length > 0)) {
      throw inUse('crew', crewId, blocking, 'cancel its live runs and delete the job definitions that name it first');
    }
    await repo.deleteCrew(tx, crewId);
    await ctx.iam.audit(tx, {
      actor: auth.principal.id,
      action: 'crew.delete',
      target: crewId,
      outcome: 'ok',
      details: { formation_id: crew.formation_id, formation_version: crew.formation_version },
    });
  });
}
