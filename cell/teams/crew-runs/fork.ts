/**
 * Forking a crew run at one of its step records (and rerun from failure: a
 * fork at the failed step with nothing changed).
 *
 * The fork is a new run of the same crew, requested by the caller, under the
 * caller's authority (every seat of the fork's graph within it: the one
 * containment check, cell/iam/iam.ts). Its journal opens with a `forked`
 * record naming the parent run, the seq forked at and that parent record's
 * hash, then the parent's step and decision records before that point are
 * copied into it, each naming the parent record it copies
 * (core/journal/lineage.ts): the engine reuses them as recorded steps, so no
 * model or tool is called again for the shared prefix. The step at `at` (and
 * everything after it) runs again, with `input` as the step's replacement
 * input when given.
 *
 * Without `formation_version` the fork executes the graph the parent pinned
 * (recompiled with the agents as they are now; a different graph is 409
 * graph_changed). With one, it compiles that version of the formation for the
 * crew, and every reused record's node must be the same node (config, seat,
 * incoming edges) in the parent's graph and the new one: the first that is not
 * is 409 graph_changed naming the step. Refusals are audited.
 *
 * Forks never widen (docs/security.md): the version the fork runs is the
 * crew's current one or a newer one (409 formation_superseded, the crew
 * upgrade's rule: never back), and the forker must read the parent whole,
 * values included (the values route's permission), since the fork hands it
 * the parent's results. An approval of the parent is copied only when it
 * stands for the fork (same input, same requester through the same chain,
 * nothing replaced after it: cell/runs/fork.ts standingApprovals); otherwise
 * the fork asks it again.
 */
import type { Graph } from '../../../core/engine/types.ts';
import { ServiceError, forbidden, invalid, notFound } from '../../../core/errors.ts';
import type { JsonObject } from '../../../core/journal/record.ts';
import { relayedReason } from '../../../core/reasons.ts';
import { type ForkPoint, forksView, mayReadRunWhole, nodeOfStep, READS_RUN_VALUES, type Run } from '../../runs/api.ts';
import { hashJson } from '../../../core/json-hash.ts';
import type { AuthContext } from '../../context.ts';
import { assertSeatsWithinCaller, compileFor, type Compiled } from '../formations/compile.ts';
import type { TeamsContext } from '../context.ts';
import { getCrew, getFormation } from '../formations/formations.ts';
import { assertNotSuperseded } from '../formations/crews.ts';
import type { Crew, Formation } from '../formations/types.ts';
import { checkRunGraph, executedGraph } from './run-graph.ts';
import { DEFAULT_MAX_DURATION_MS, startCrewRun } from './runs.ts';

export interface ForkRequest {
  at: number;
  input?: unknown;
  formation_version?: number | undefined;
}

/** What startCrewRun needs to create a fork (runs.ts). */
export interface ForkPlan {
  crew: Crew;
  formation: Formation;
  compiled: Compiled;
  /** The parent record forked at and the records reused (cell/runs/fork.ts). */
  point: ForkPoint;
  /** The parent's approvals that do not stand for the fork: asked again (named in its `forked` record). */
  askedAgain: string[];
  replace?: { step_id: string; input: unknown };
}

/** What a node's recorded answers depend on in a graph: the node, its seat, its incoming edges. */
function nodeSignature(g: Graph, id: string): string | null {
  const node = g.nodes.find((n) => n.id === id);
  if (node === undefined) return null;
  const seat = 'seat' in node && typeof node.seat === 'string' ? (g.seats[node.seat] ?? null) : null;
  const incoming = g.edges.filter((e) => e.to === id).map((e) => ({ from: e.from, when: e.when ?? null }));
  incoming.sort((a, b) => (a.from < b.from ? -1 : a.from > b.from ? 1 : 0));
  return hashJson({ incoming, node, seat });
}

/** Runs a check; its refusal is audited as the fork's. */
async function guarded(ctx: TeamsContext, auth: AuthContext, runId: string, check: () => void): Promise<void> {
  try {
    check();
  } catch (e) {
    if (e instanceof ServiceError) await refused(ctx, auth, runId, e);
    throw e;
  }
}

async function refused(ctx: TeamsContext, auth: AuthContext, runId: string, e: ServiceError): Promise<never> {
  await ctx.iam.auditNow({
    actor: auth.principal.id,
    action: 'crew.run.fork',
    target: runId,
    outcome: 'refused',
    details: { reason: relayedReason(e), ...(e.details ?? {}) } as JsonObject,
  });
  throw e;
}

/**
 * The crew run `runId` of `crewId`, readable whole by the caller (values included: the values
 * route's check, since the fork hands the forker the parent's results), or 404 / 403.
 */
async function readableParent(ctx: TeamsContext, auth: AuthContext, crewId: string, runId: string): Promise<Run> {
  const parent = await ctx.runs.getRun(runId);
  if (parent?.kind !== 'crew' || parent.crew_id !== crewId) throw notFound('run');
  if (!mayReadRunWhole(auth)) {
    await refused(
      ctx,
      auth,
      runId,
      forbidden(`forking a run hands the forker its results: it needs reading the run whole, values included (${READS_RUN_VALUES})`, {
        reason: 'missing_permission',
        required: READS_RUN_VALUES,
      }),
    );
  }
  return parent;
}

/** Plans and starts a fork of a crew run; the new run (201), linked from its parent's `forks`. */
export async function forkCrewRun(ctx: TeamsContext, auth: AuthContext, crewId: string, runId: string, body: ForkRequest): Promise<Run> {
  const parent = await readableParent(ctx, auth, crewId, runId);
  const point = await ctx.runs.forkPoint(runId, body.at);
  if (point === null) throw invalid('at must be the seq of a step record of the run', { reason: 'not_a_step', field: 'at' });
  const crew = await getCrew(ctx, crewId);
  if (!crew) throw notFound('crew');

  let formation: Formation | undefined;
  let pinned: Crew;
  let compiled: Compiled;
  if (body.formation_version === undefined) {
    const check = await checkRunGraph(ctx, parent);
    if (!check.ok)
      return refused(
        ctx,
        auth,
        runId,
        new ServiceError('conflict', check.message, { details: { reason: check.reason, ...check.details } }),
      );
    // Never a version the crew has moved past (a stage added since, a two-person approval, would be dropped).
    await guarded(ctx, auth, runId, () => assertNotSuperseded(crew, check.formationVersion, 'crew.run.fork'));
    formation = await getFormation(ctx, crew.formation_id, check.formationVersion);
    pinned = check.crew;
    compiled = { graph: check.graph, graphHash: check.graphHash, formationHash: check.graph.formation_hash };
  } else {
    await guarded(ctx, auth, runId, () => assertNotSuperseded(crew, body.formation_version!, 'crew.run.fork'));
    formation = await getFormation(ctx, crew.formation_id, body.formation_version);
    if (!formation) throw notFound('formation version');
    pinned = { ...crew, formation_version: body.formation_version };
    compiled = await compileFor(ctx, formation, pinned);
  }
  if (!formation) throw notFound('formation version');

  const parentGraph = (await executedGraph(ctx, parent))?.graph as Graph | undefined;
  if (parentGraph === undefined)
    return refused(
      ctx,
      auth,
      runId,
      new ServiceError('conflict', 'the graph of the parent run was not kept; its steps cannot be compared', {
        details: { reason: 'graph_changed', detail: 'graph_not_kept' },
      }),
    );
  const stepAt = point.step_id;
  const copies = point.copies;
  // The reused prefix must be the same steps in the fork's graph: the first that differs is named.
  const sigs = new Map<string, boolean>();
  for (const r of copies) {
    const node = nodeOfStep(r.step_id);
    let same = sigs.get(node);
    if (same === undefined) {
      const a = nodeSignature(parentGraph, node);
      same = a !== null && a === nodeSignature(compiled.graph, node);
      sigs.set(node, same);
    }
    if (!same)
      return refused(
        ctx,
        auth,
        runId,
        new ServiceError('conflict', `the new graph differs from the run's at step ${r.step_id}; the prefix cannot be reused`, {
          details: { reason: 'graph_changed', step_id: r.step_id, seq: r.seq, node, formation_version: pinned.formation_version },
        }),
      );
  }
  if (body.input !== undefined && !compiled.graph.nodes.some((n) => n.id === stepAt))
    throw invalid('input replaces the input of a graph step: fork at the record of a node (not one of its calls)', {
      reason: 'not_a_node',
      field: 'input',
    });
  // The fork runs with the caller's authority: every seat within it.
  await assertSeatsWithinCaller(ctx, auth, compiled.graph, { action: 'crew.run.fork', target: runId });

  const spec = (typeof parent.spec === 'object' && parent.spec !== null ? parent.spec : {}) as Record<string, unknown>;
  // An approval of the parent stands only for the same input and requester (chain), nothing replaced after it: else asked again.
  const standing = ctx.runs.standingApprovals(point, {
    requester: { id: auth.principal.id, actors: auth.credential.actors ?? [] },
    edges: compiled.graph.edges,
    replaced: body.input !== undefined ? stepAt : undefined,
  });
  const plan: ForkPlan = {
    crew: pinned,
    formation,
    compiled,
    point: standing.point,
    askedAgain: standing.asked_again,
    ...(body.input !== undefined ? { replace: { step_id: stepAt, input: body.input } } : {}),
  };
  const run = await startCrewRun(
    ctx,
    auth.principal.id,
    crewId,
    {
      input: spec['input'] ?? null,
      ...(parent.workspace_id ? { workspace_id: parent.workspace_id } : {}),
      max_duration_ms: typeof spec['max_duration_ms'] === 'number' ? spec['max_duration_ms'] : DEFAULT_MAX_DURATION_MS,
      ...(typeof spec['max_tokens'] === 'number' ? { max_tokens: spec['max_tokens'] } : {}),
    },
    { fork: plan, requesterActors: auth.credential.actors },
  );
  // The parent's list of its forks, after the fork's commit: written now or once the store is back, never a refusal.
  const fork = { run_id: run.run_id, seq: body.at, by: auth.principal.id, at: ctx.core.clock.now() };
  await ctx.runs.afterCommit(run.run_id, async (again) => {
    if (again && forksView((await ctx.runs.getRun(runId)) ?? parent).some((f) => f.run_id === run.run_id)) return;
    await ctx.runs.pushRunFlag(runId, 'forks', fork);
  });
  return run;
}
