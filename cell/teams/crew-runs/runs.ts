/**
 * Crew runs: start (compile, placement, budget-ledger pre-check, then drive
 * on the engine through the runs module), approvals (under the runs module's
 * shared rules), recovery by a peer cell, and the investigate flag for runs
 * still in flight after their budget.
 *
 * Refusals before the first step are runs too: the run row is created, a
 * `refusal` journal record names the reason, the run ends `refused`, and the
 * caller gets 409 conflict with `details.reason` and `details.run_id`
 * (`no_budget_ledger`, `agent_inactive`, `placement_unmet`). The refusal is
 * decided before the run is recorded and recorded with it (`flags.refusal`, in
 * the creating transaction): such a run is never driven. Its `refusal` and
 * `run_finished` records follow the commit, written by the opening (or its
 * retry once the store is back); if this cell dies first, whoever picks the
 * run up (a restart, a peer's takeover sweep, an operator's recover, any
 * drive's claim) writes them instead (cell/runs/journal.ts completeRefusal).
 *
 * A run pins the formation version and assignments of its crew and keeps the
 * graph it executes (run-graph.ts);
 * a resumed run whose graph hash differs from the one it started with is
 * refused the same way (`graph_changed`, checkRunGraph).
 */
import type { Graph } from '../../../core/engine/types.ts';
import type { JsonObject } from '../../../core/journal/record.ts';
import { ServiceError, forbidden, invalid, notFound } from '../../../core/errors.ts';
import { grants } from '../../../core/authority/scopes.ts';
import { PERMISSIONS } from '../../../core/permissions.ts';
import { inputProblems } from '../../../core/input-schema/problems.ts';
import type { Reason } from '../../../core/reasons.ts';
import {
  RunClosedError,
  isTerminal,
  requesterOf,
  type AppendFields,
  type Decider,
  type DrivenRun,
  type NewRun,
  type Run,
} from '../../runs/api.ts';
import type { Tx } from '../../store/types.ts';
import { foldLedgers, getAgent, hasLedger, releaseOpenReservations } from '../resources/agents.ts';
import { assertSeatsWithinCaller, compileForRun, type Compiled } from '../formations/compile.ts';
import type { AuthContext } from '../../context.ts';
import type { TeamsContext } from '../context.ts';
import { crewInputs } from '../formations/formations.ts';
import type { Billet, Crew, Formation } from '../formations/types.ts';
import { checkPlacement, placementFix, placementMessage } from './placement.ts';
import { crewPorts } from './ports.ts';
import * as runsRepo from './repository.ts';
import * as formationsRepo from '../formations/repository.ts';
import * as resourcesRepo from '../resources/repository.ts';
import { checkRunGraph } from './run-graph.ts';
import type { ForkPlan } from './fork.ts';
import type { CrewRunInput, CrewRunSpec } from './types.ts';

/** Default time budget of a crew run before it is flagged for investigation, ms. */
export const DEFAULT_MAX_DURATION_MS = 10 * 60_000;

/** What a crew run was asked to do (the spec column), as far as it can be read back. */
export function crewSpec(run: Run): Partial<CrewRunSpec> {
  const s = run.spec;
  return typeof s === 'object' && s !== null && !Array.isArray(s) ? (s as Partial<CrewRunSpec>) : {};
}

function track(ctx: TeamsContext, runId: string, p: Promise<unknown>): void {
  const m = ctx.inflight;
  m.set(runId, p);
  void p.finally(() => {
    if (m.get(runId) === p) m.delete(runId);
  });
}

/** How often the cell looks for runs past their budget, ms. */
export const INVESTIGATE_SWEEP_MS = 5_000;

/**
 * Module start: waiting crew runs (approval or timer) are driven again so a due
 * timer or an elapsed approval timeout is acted on after a restart, and so are
 * the runs this cell held when it stopped (queued or running under its lease:
 * a call found in flight is re-issued once, flagged); runs of a dead peer are
 * taken over after each heartbeat (takeOverOrphans). Then the
 * periodic investigate sweep starts; `stopSweep` ends it.
 */
export async function startSweep(ctx: TeamsContext): Promise<void> {
  if (ctx.sweepTimer) return;
  ctx.stopped = false;
  const me = ctx.core.config.cellId;
  for (const r of await ctx.runs.activeRuns('crew')) {
    // A run waiting on an operator (a lost outcome) has nothing due: only a resolution, a cancel or a recover moves it.
    if (r.state === 'outcome_unknown') continue;
    // Waiting runs, and the runs this cell held when it stopped (queued or running under its lease):
    // driven again from their journal (a call found in flight is re-issued once, flagged).
    const held = r.lease_owner === me || (r.lease_owner === null && r.coordinator === me && r.state !== 'waiting');
    if (r.state !== 'waiting' && !held) continue;
    if (held) ctx.core.log.info('resuming crew run held before the restart', { run_id: r.run_id, state: r.state });
    void resumeRun(ctx, r.run_id, 'restart').catch((e: unknown) =>
      ctx.core.log.warn('run not resumed after the restart', { run_id: r.run_id, error: e }),
    );
  }
  ctx.runs.onHeartbeat(async () => {
    if (!ctx.stopped) await takeOverOrphans(ctx);
  });
  const t = setInterval(() => {
    // A member whose clock is beyond the bound stood down: it flags no run overdue by its own clock, and folds nothing.
    if (!ctx.standing.trusted()) return;
    void sweepOnce(ctx).catch((e: unknown) => ctx.core.log.warn('investigate sweep failed', { error: e }));
  }, INVESTIGATE_SWEEP_MS);
  t.unref();
  ctx.sweepTimer = t;
}

/** Module stop: the sweep and pending wake-ups end (in-flight drives are aborted by the runs module's stop, after this one). */
export async function stopSweep(ctx: TeamsContext): Promise<void> {
  ctx.stopped = true;
  if (ctx.sweepTimer) clearInterval(ctx.sweepTimer);
  ctx.sweepTimer = null;
  for (const t of ctx.wakeTimers) clearTimeout(t);
  ctx.wakeTimers.clear();
  await ctx.sweeping?.catch(() => undefined);
  await ctx.folding?.catch(() => undefined);
}

/** Resolves when this process is no longer driving the run (tests, shutdown). */
export async function settled(ctx: TeamsContext, runId: string): Promise<void> {
  await ctx.inflight.get(runId);
}

/** The crew, its formation version and that version's billets, as a run compiles them; not_found when either is gone. */
export async function loadCrew(
  ctx: TeamsContext,
  crewId: string,
): Promise<{ crew: Crew; formation: Formation; billets: readonly Billet[] }> {
  const { crew, formation, billets } = await crewInputs(ctx, crewId);
  if (!crew) throw notFound('crew');
  if (!formation) throw notFound('formation');
  return { crew, formation, billets };
}

/** Ends a run refused before (or instead of) driving it, with a journal record; throws the 409. */
async function refuseRun(ctx: TeamsContext, runId: string, reason: Reason, message: string, details: JsonObject): Promise<never> {
  try {
    await ctx.runs.appendJournal(runId, { step_id: 'run', kind: 'refusal', data: { reason, ...details } });
    await ctx.runs.finishRun(runId, 'refused', { error: { code: 'refused', message, reason, details } });
  } catch (e) {
    if (!(e instanceof RunClosedError)) throw e; // already ended: the refusal still answers the caller
  }
  throw new ServiceError('conflict', message, { details: { reason, run_id: runId, ...details } });
}

function driveInBackground(
  ctx: TeamsContext,
  run: Run,
  graph: Graph,
  graphHash: string,
  crew: Crew,
  forceClaim = false,
  claimed?: DrivenRun['fence'],
): void {
  const spec = crewSpec(run);
  const workspaceId = run.workspace_id ?? crew.workspace_id;
  const p = ctx.runs
    .driveRun(
      run.run_id,
      graph,
      crewPorts(ctx, run.run_id, workspaceId, { requester: run.requester, crewId: crew.crew_id }, claimed !== undefined),
      spec.input ?? null,
      {
        requester: run.requester,
        requesterActors: requesterOf(run).actors,
        graphHash,
        context: { crew_id: crew.crew_id, workspace_id: workspaceId },
        forceClaim,
        ...(spec.replace !== undefined ? { replace: spec.replace } : {}),
        // Budget reservations the previous driver left open are released once this cell holds the run.
        onTakeover: () => releaseOpenReservations(ctx, run.run_id),
        agentName: crew.name,
        ...(claimed ? { claimed } : {}),
      },
    )
    .then((r) => {
      if (r.state === 'waiting') scheduleWake(ctx, run.run_id, r.result?.waiting?.wake_at ?? null);
    })
    .catch((err: unknown) => ctx.core.log.error('crew run drive failed', { run_id: run.run_id, error: err }));
  track(ctx, run.run_id, p);
}

/** Re-drives a waiting run when its timer is due (system clock only; approvals re-drive at once). */
function scheduleWake(ctx: TeamsContext, runId: string, wakeAt: number | null): void {
  if (wakeAt === null || ctx.stopped) return;
  const delay = Math.min(Math.max(0, wakeAt - ctx.core.clock.now()), 2 ** 31 - 1);
  const t = setTimeout(() => {
    ctx.wakeTimers.delete(t);
    void resumeRun(ctx, runId, 'timer').catch(() => undefined);
  }, delay);
  t.unref();
  ctx.wakeTimers.add(t);
}

/**
 * Starts a crew run as the caller, the one way every caller's run starts (the run route, MCP's crew
 * tools): the caller holds agent_teams.write, its principal is the requester, and every seat of the
 * compiled graph must lie within the caller's authority (403 wider_than_caller, audited) before
 * anything is written.
 */
export async function startCrewRunAs(ctx: TeamsContext, auth: AuthContext, crewId: string, body: CrewRunInput): Promise<Run> {
  // The run route's permission (its gate judges it first; any other way in is judged the same, here).
  if (!grants(auth.effective, PERMISSIONS.teamsWrite)) {
    throw forbidden(`the credential lacks the permission ${PERMISSIONS.teamsWrite}`, { required_permission: PERMISSIONS.teamsWrite });
  }
  return startCrewRun(ctx, auth.principal.id, crewId, body, {
    check: (graph) => assertSeatsWithinCaller(ctx, auth, graph, { action: 'crew.run', target: crewId }),
    requesterActors: auth.credential.actors,
  });
}

/**
 * Cancels a run of the crew as the caller (idempotent: an ended run is answered as it is), audited
 * `crew.run.cancel` when it changed the run; 404 for a run of another crew.
 */
export async function cancelCrewRun(ctx: TeamsContext, auth: AuthContext, crewId: string, runId: string): Promise<Run> {
  const actor = auth.principal.id;
  const before = await ctx.runs.getRun(runId);
  if (before?.kind !== 'crew' || before.crew_id !== crewId) throw notFound('run');
  // A run acts as its requester: cancelling another's needs managing it (the shared-things rule).
  await ctx.iam.assertMayActOnOwned(auth, { kind: 'run', id: runId, ownerId: before.requester }, 'crew.run.cancel');
  const run = await ctx.runs.requestCancel(runId, actor);
  if (!run) throw notFound('run');
  if (before.state !== run.state) {
    await ctx.iam.auditNow({ actor, action: 'crew.run.cancel', target: runId, outcome: 'ok', details: { from: before.state } });
  }
  return run;
}

/** Starts a crew run: compile, placement, ledgers, then drive in the background. */
export async function startCrewRun(
  ctx: TeamsContext,
  requester: string,
  crewId: string,
  body: CrewRunInput,
  opts: {
    runId?: string;
    check?: (graph: Graph) => Promise<void>;
    fork?: ForkPlan;
    requesterActors?: readonly string[] | undefined;
    /** Where the run comes from (`api` unless given: `schedule:<id>` for a definition's run). */
    source?: string;
  } = {},
): Promise<Run> {
  const { runs } = ctx;
  const plan = await planCrewRun(ctx, crewId, body, opts);
  const actors = opts.requesterActors ?? [];
  const at = ctx.core.clock.now();
  // Read together (one round trip's wait, not three): the room for the run, whether its graph is
  // kept, and where and whether it runs. No room in its workspace (or the cell): refused, and
  // nothing of the run kept. A run driven here at once on PostgreSQL does not wait for the room
  // before its creating transaction: the transaction awaits it beside its own statements, before its
  // COMMIT, and a refusal rolls it back (a round trip less before a run's first call).
  const room = runs.assertStorageRoom(plan.workspaceId, Buffer.byteLength(JSON.stringify(plan.spec), 'utf8'));
  room.catch(() => undefined);
  const [graphKept, decided] = await Promise.allSettled([
    ctx.graphsKept.has(plan.compiled.graphHash) || runsRepo.hasGraph(ctx.core.store, plan.compiled.graphHash),
    decideStart(ctx, plan),
  ]);
  for (const s of [graphKept, decided])
    if (s.status === 'rejected') {
      await room;
      throw s.reason;
    }
  const { peer, refusal } = (decided as PromiseFulfilledResult<Awaited<ReturnType<typeof decideStart>>>).value;
  const drivenNow = !refusal && !peer && !plan.fork;
  // The graph is kept only for a run that has room; so is every run recorded otherwise than driven at once.
  const keptGraph = (graphKept as PromiseFulfilledResult<boolean>).value;
  if (!keptGraph || !drivenNow || ctx.core.store.engine === 'embedded') await room;
  if (!keptGraph) await keepGraph(ctx, plan.compiled, at);
  if (ctx.graphsKept.size >= 10_000) ctx.graphsKept.clear();
  ctx.graphsKept.add(plan.compiled.graphHash);
  const source = opts.source ?? 'api';
  if (drivenNow) {
    // Driven here at once: recorded claimed, with its `run_requested`, in its creating transaction; nothing
    // is written between its commit and its drive (cell/runs/opening.ts recordDrivenRunTx).
    const { run, fence } = await recordDrivenCrewRun(ctx, plan, { requester, actors, at, runId: opts.runId, source, room });
    driveInBackground(ctx, run, plan.compiled.graph, plan.compiled.graphHash, plan.crew, false, fence);
    return run;
  }
  const run = await recordCrewRun(ctx, plan, { requester, actors, at, refusal, runId: opts.runId, source });
  const runId = run.run_id;
  // The journal's opening records, then the refusal or the placement: written now, or (the store gone
  // after the commit) in the background once it is back, before the drive starts (opening.ts).
  const opening = (again: boolean) => writeOpening(ctx, runId, plan, { requester, actors, refusal, peer, again });
  const drive = refusal || peer ? undefined : () => driveInBackground(ctx, run, plan.compiled.graph, plan.compiled.graphHash, plan.crew);
  const now = await runs.afterCommit(runId, opening, drive);
  if (refusal)
    throw new ServiceError('conflict', refusal.message, { details: { reason: refusal.reason, run_id: runId, ...refusal.details } });
  if (!now) return run;
  // The run as it stands now (refused, or released for a peer), else as it was recorded.
  if (peer) return (await runs.getRun(runId).catch(() => undefined)) ?? run;
  return run;
}

/** What a crew run is to execute, decided before anything is written. */
interface CrewRunPlan {
  crew: Crew;
  formation: Formation;
  compiled: Compiled;
  spec: CrewRunSpec;
  workspaceId: string;
  fork: ForkPlan | undefined;
}

/** A refusal decided before the run is recorded (crewRefusal). */
type StartRefusal = { reason: Reason; message: string; details: JsonObject };

/** A live peer of the group that qualifies for a graph's placement. */
type QualifyingPeer = Awaited<ReturnType<TeamsContext['runs']['qualifyingMembers']>>[number];

/** Loads and compiles the crew (a fork brings both), runs the caller's check on the graph and writes the run's spec. */
async function planCrewRun(
  ctx: TeamsContext,
  crewId: string,
  body: CrewRunInput,
  opts: { check?: (graph: Graph) => Promise<void>; fork?: ForkPlan },
): Promise<CrewRunPlan> {
  const fork = opts.fork;
  const { crew, formation, compiled } = fork
    ? fork
    : await loadCrew(ctx, crewId).then(async (c) => ({ ...c, compiled: await compileForRun(ctx, c.formation, c.crew, c.billets) }));
  // The caller's own check of the compiled graph (the route: every seat within the caller's authority).
  await opts.check?.(compiled.graph);
  // The input the formation declares (its crews' MCP tool input schema too): checked before anything is written.
  if (formation.input_schema) {
    const problems = inputProblems(formation.input_schema, body.input ?? null);
    if (problems.length) throw invalid("the input does not match the formation's input_schema", { reason: 'invalid_input', problems });
  }
  const spec: CrewRunSpec = {
    input: body.input ?? null,
    max_duration_ms: body.max_duration_ms ?? DEFAULT_MAX_DURATION_MS,
    max_tokens: body.max_tokens ?? null,
    formation_id: formation.formation_id,
    formation_version: formation.version,
    assignments: crew.assignments,
    ...(fork ? { forked_from: fork.point.from, ...(fork.replace ? { replace: fork.replace } : {}) } : {}),
  };
  return { crew, formation, compiled, spec, workspaceId: body.workspace_id ?? crew.workspace_id, fork };
}

/**
 * Keeps the graph, content-addressed, before the run that names it, once (startCrewRun reads first
 * whether it is kept): runs of a crew started at once do not contend on its row in their serializable
 * transactions.
 */
async function keepGraph(ctx: TeamsContext, compiled: Compiled, at: number): Promise<void> {
  await ctx.core.store.write((tx) => runsRepo.insertGraph(tx, compiled.graphHash, compiled.graph, at), { isolation: 'row-locks' });
}

/**
 * Everything the answer depends on, decided before the run is recorded (reads only: an outage here is
 * a 503 and nothing is written); once the run commits, the request answers with it (issue 22). When
 * this cell does not qualify for the graph's placement and a live peer of the group does, the peer
 * executes the run.
 */
async function decideStart(
  ctx: TeamsContext,
  plan: CrewRunPlan,
): Promise<{ peer: QualifyingPeer | undefined; refusal: StartRefusal | null }> {
  const { placement } = plan.compiled.graph;
  const unmet = checkPlacement(placement, ctx.core.config);
  const peer = unmet.length ? (await ctx.runs.qualifyingMembers(placement))[0] : undefined;
  const refusal = await crewRefusal(ctx, plan.crew, unmet, peer !== undefined);
  return { peer, refusal };
}

/** What recording a crew run needs besides its plan. */
interface RecordAs {
  requester: string;
  actors: readonly string[];
  at: number;
  runId: string | undefined;
  source: string;
  /** The room for the run, judged beside the creating transaction's statements (before its COMMIT): its refusal rolls the transaction back. */
  room?: Promise<void>;
}

/** Records the run (refused, if so) and its audit record in one transaction; the answer is the run as inserted. */
function recordCrewRun(ctx: TeamsContext, plan: CrewRunPlan, o: RecordAs & { refusal: StartRefusal | null }): Promise<Run> {
  return ctx.core.store.write((tx) => recordInTx(ctx, tx, plan, o, (r) => ctx.runs.recordRunTx(tx, r)));
}

/**
 * Records a run this cell drives at once: claimed, with its `run_requested` record and its audit record, in
 * one transaction that names the run to the other cells (its journal has a record).
 */
async function recordDrivenCrewRun(ctx: TeamsContext, plan: CrewRunPlan, o: RecordAs): Promise<DrivenRun> {
  const runId = o.runId ?? ctx.runs.newRunId();
  return ctx.core.store.write(
    async (tx) => {
      let driven: DrivenRun | undefined;
      await recordInTx(ctx, tx, plan, { ...o, runId, refusal: null }, async (r) => {
        driven = await ctx.runs.recordDrivenRunTx(tx, r, runRequested(plan, o.requester, o.actors));
        return driven.run;
      });
      return driven!;
    },
    // Told to the other cells with the journal's appends (batched): no other cell acts on a run its
    // creating cell holds, and its commit does not wait on the notification lock other commits hold.
    { subjects: [runId], notify: 'batched' },
  );
}

/** The creating transaction of a crew run: the crew read (a delete's race), the run inserted by `insert`, the audit record. */
async function recordInTx(
  ctx: TeamsContext,
  tx: Tx,
  plan: CrewRunPlan,
  o: RecordAs & { refusal: StartRefusal | null },
  insert: (r: NewRun) => Promise<Run>,
): Promise<Run> {
  const { core } = ctx;
  const { crew, formation, compiled, fork } = plan;
  const runId = o.runId ?? ctx.runs.newRunId();
  // Every statement is issued before any answer is awaited: one round trip on PostgreSQL.
  // The crew is read in this transaction, so a concurrent delete either sees this run (409 in_use) or happens first (404).
  const crewRead = formationsRepo.crewById(tx, crew.crew_id);
  // The answer is the run as this transaction inserted it (RETURNING): nothing after the commit can
  // refuse it, and no read of the runs table here makes runs started at once conflict (issue 21).
  const inserted = insert({
    run_id: runId,
    kind: 'crew',
    crew_id: crew.crew_id,
    workspace_id: plan.workspaceId,
    requester: o.requester,
    requesterActors: o.actors,
    graph_hash: compiled.graphHash,
    spec: plan.spec,
    coordinator: core.config.cellId,
    source: o.source,
    at: o.at,
    // Every claim of the run (a takeover included) enforces the graph's placement needs.
    placement: compiled.graph.placement,
    // Refused: recorded so in this commit, so no restart or takeover ever drives the run.
    ...(o.refusal ? { refusal: o.refusal } : {}),
  });
  const audited = ctx.iam.audit(tx, {
    at: o.at,
    actor: o.requester,
    action: 'crew.run',
    target: runId,
    outcome: 'ok',
    details: {
      crew_id: crew.crew_id,
      formation_version: formation.version,
      graph_hash: compiled.graphHash,
      ...(o.actors.length ? { actors: [...o.actors] } : {}),
      ...(fork ? { forked_from: fork.point.from } : {}),
    },
  });
  const [found, run, audit, room] = await Promise.allSettled([crewRead, inserted, audited, o.room]);
  // No room first (it is judged before anything else when not beside the transaction), then the crew's
  // absence: the writes issued are rolled back with the transaction.
  if (room.status === 'rejected') throw room.reason;
  if (found.status === 'fulfilled' && !found.value) throw notFound('crew');
  for (const s of [found, run, audit]) if (s.status === 'rejected') throw s.reason;
  return (run as PromiseFulfilledResult<Run>).value;
}

/** A crew run's `run_requested` record: what it runs (crew, formation and its hash) and who asked. */
function runRequested(plan: CrewRunPlan, requester: string, actors: readonly string[]): AppendFields {
  const { crew, formation, compiled } = plan;
  return {
    step_id: 'run',
    kind: 'run_requested',
    data: {
      crew_id: crew.crew_id,
      formation_id: formation.formation_id,
      formation_version: formation.version,
      formation_hash: compiled.formationHash,
      requester,
      ...(actors.length ? { requester_actors: [...actors] } : {}),
    },
  };
}

/**
 * The journal's opening records of a recorded run: a fork's lineage, `run_requested`, a fork's reused
 * steps, then the refusal or the placement on a peer. Idempotent: `again` (a retry once the store is
 * back) reads what was written and writes only the rest.
 */
async function writeOpening(
  ctx: TeamsContext,
  runId: string,
  plan: CrewRunPlan,
  o: { requester: string; actors: readonly string[]; refusal: StartRefusal | null; peer: QualifyingPeer | undefined; again: boolean },
): Promise<void> {
  const { runs } = ctx;
  const { fork } = plan;
  const kept = o.again ? await runs.readJournal(runId) : [];
  const has = (kind: string) => kept.some((r) => r.kind === kind);
  // A fork's journal opens with its lineage (core/journal/lineage.ts).
  if (fork && !has('forked'))
    await runs.openFork(runId, fork.point, fork.askedAgain.length > 0 ? { approvals_asked_again: fork.askedAgain } : {});
  if (!has('run_requested')) await runs.appendJournal(runId, runRequested(plan, o.requester, o.actors));
  if (fork) {
    const copied = new Set(kept.map((r) => (r.data as { reused?: { seq?: unknown } } | null)?.reused?.seq));
    await runs.copyReused(runId, { ...fork.point, copies: fork.point.copies.filter((c) => !copied.has(c.seq)) });
  }
  // The refusal recorded with the run: its `refusal` and `run_finished` records, together, once.
  if (o.refusal) await runs.completeRefusal(runId);
  else if (o.peer) {
    if (!has('placed'))
      await runs.appendJournal(runId, { step_id: 'run', kind: 'placed', data: { on: 'peer', qualifying_cell: o.peer.cell_id } });
    await runs.placeOnPeer(runId);
  }
}

/** Why a crew run is refused before its first step (placement, inactive agents, missing ledgers), or null. */
async function crewRefusal(
  ctx: TeamsContext,
  crew: Crew,
  unmet: ReturnType<typeof checkPlacement>,
  peer: boolean,
): Promise<StartRefusal | null> {
  const { core } = ctx;
  if (unmet.length && !peer) {
    return {
      reason: 'placement_unmet',
      message: placementMessage(unmet, core.config),
      details: { unmet: unmet.map((u) => ({ ...u })), fix: placementFix(unmet, core.config) } as JsonObject,
    };
  }
  const agents = [...new Set(Object.values(crew.assignments))];
  // Through the agents' cache (the compile bound every one of them a moment ago) and the principals' cache.
  const standing = await Promise.all(
    agents.map(async (a) => (await getAgent(ctx, a)) !== undefined && (await ctx.iam.principal(a))?.status === 'active'),
  );
  const inactive = agents.filter((_, i) => !standing[i]);
  if (inactive.length) {
    return {
      reason: 'agent_inactive',
      message: 'every agent of the crew must be an active principal',
      details: { agents: inactive.sort() },
    };
  }
  const ledgers = await Promise.all(agents.map((a) => hasLedger(ctx, a)));
  const missing = agents.filter((_, i) => !ledgers[i]);
  if (missing.length) {
    return {
      reason: 'no_budget_ledger',
      message: 'a budget ledger must be registered for every agent of the run',
      details: { agents: missing.sort() },
    };
  }
  return null;
}

/** Drives a non-terminal run again (approval arrived, timer due, recovery). */
export async function resumeRun(ctx: TeamsContext, runId: string, why: string): Promise<Run> {
  const { runs } = ctx;
  const run = await runs.getRun(runId);
  if (run?.kind !== 'crew') throw notFound('run');
  if (isTerminal(run.state) || runs.isDriven(runId) || ctx.stopped) return run;
  // Refused at its start (its opening not written: the cell that recorded it died): it ends so, undriven.
  if (runs.pendingRefusal(run)) {
    ctx.core.log.info('ending a crew run refused at its start', { run_id: runId, why });
    await runs.completeRefusal(runId);
    return (await runs.getRun(runId)) ?? run;
  }
  const check = await checkRunGraph(ctx, run);
  if (!check.ok) {
    await ctx.iam.auditNow({
      actor: `system:cell:${ctx.core.config.cellId}`,
      action: 'crew.run.resume',
      target: runId,
      outcome: 'refused',
      details: { reason: check.reason, why, ...check.details },
    });
    return refuseRun(ctx, runId, check.reason, check.message, { ...check.details, why });
  }
  driveInBackground(ctx, run, check.graph, check.graphHash, check.crew, why === 'recover');
  return (await runs.getRun(runId)) ?? run;
}

/**
 * The takeover sweep, after each heartbeat: crew runs whose lease holder died
 * (and that this cell qualifies to execute) are resumed here; one recorded
 * refused at its start is ended refused (resumeRun), whatever its placement.
 * The claim in the drive decides between peers sweeping at once; a formation changed
 * since the run started ends it `refused` with `graph_changed` (resumeRun).
 */
export async function takeOverOrphans(ctx: TeamsContext): Promise<void> {
  await ctx.runs.markUnplaceable('crew');
  const orphans = [...(await ctx.runs.orphanedRuns('crew')), ...(await ctx.runs.orphanedWaitingRuns('crew'))];
  for (const run of orphans) {
    if (ctx.stopped) return;
    ctx.core.log.info('taking over crew run', { run_id: run.run_id, state: run.state, previous_owner: run.lease_owner ?? run.coordinator });
    try {
      await resumeRun(ctx, run.run_id, 'takeover');
    } catch (e) {
      if (!(e instanceof ServiceError)) throw e; // a refusal (graph_changed) is recorded on the run
    }
  }
}

/** Recovery by a peer (or restarted) cell: resume a run whose coordinator died. */
export async function recoverRun(ctx: TeamsContext, actor: string, crewId: string, runId: string): Promise<Run> {
  const { runs } = ctx;
  const run = await runs.getRun(runId);
  if (run?.kind !== 'crew' || run.crew_id !== crewId) throw notFound('run');
  if (isTerminal(run.state))
    throw new ServiceError('conflict', `the run is ${run.state}; there is nothing to recover`, {
      details: { reason: 'run_terminal', state: run.state },
    });
  if (runs.isDriven(runId))
    throw new ServiceError('conflict', 'this cell is driving the run now', { details: { reason: 'run_in_progress' } });
  // Refused at its start: nothing to recover; it ends as its start decided (its records written now if they were not).
  if (runs.pendingRefusal(run)) {
    await runs.completeRefusal(runId);
    const state = (await runs.getRun(runId))?.state ?? 'refused';
    throw new ServiceError('conflict', `the run is ${state} (refused at its start); there is nothing to recover`, {
      details: { reason: 'run_terminal', state },
    });
  }
  if (await runs.heldByLivePeer(run))
    throw new ServiceError('conflict', 'another live cell of the group is driving the run (its heartbeat is fresh)', {
      details: { reason: 'run_in_progress', cell_id: run.lease_owner },
    });
  try {
    await runs.appendJournal(runId, {
      step_id: 'run',
      kind: 'recovered',
      data: { by: actor, cell_id: ctx.core.config.cellId, previous_coordinator: run.coordinator },
    });
  } catch (e) {
    if (!(e instanceof RunClosedError)) throw e;
    throw new ServiceError('conflict', 'the run ended meanwhile; there is nothing to recover', {
      details: { reason: 'run_terminal', state: e.state },
    });
  }
  await ctx.iam.auditNow({
    actor,
    action: 'crew.run.recover',
    target: runId,
    outcome: 'ok',
    details: { previous_coordinator: run.coordinator },
  });
  await releaseOpenReservations(ctx, runId);
  return resumeRun(ctx, runId, 'recover');
}

/** Records an approval or rejection of a waiting step of a crew run (the runs module's rules), then wakes the run. */
export async function decideApproval(
  ctx: TeamsContext,
  decider: Decider,
  crewId: string,
  runId: string,
  stepId: string,
  decision: 'approve' | 'reject',
  comment: string | undefined,
): Promise<Run> {
  const run = await ctx.runs.getRun(runId);
  if (run?.kind !== 'crew' || run.crew_id !== crewId) throw notFound('run');
  const wake = await ctx.runs.recordApproval(decider, run, stepId, decision, comment, 'crew.run.approval');
  if (wake) return resumeRun(ctx, runId, 'approval');
  return (await ctx.runs.getRun(runId)) ?? run;
}

/** The periodic sweep: runs past their budget flagged, then the ledgers' committed reservations folded (foldLedgers). */
export async function sweepOnce(ctx: TeamsContext): Promise<void> {
  await flagOverdue(ctx);
  await foldLedgers(ctx);
}

/** Flags runs still in flight after their time or cost budget (idempotent, one sweep at a time); an event records it. */
export function flagOverdue(ctx: TeamsContext): Promise<void> {
  if (ctx.sweeping) return ctx.sweeping;
  const p = flagOverdueOnce(ctx).finally(() => {
    ctx.sweeping = null;
  });
  ctx.sweeping = p;
  return p;
}

async function flagOverdueOnce(ctx: TeamsContext): Promise<void> {
  const { runs } = ctx;
  const now = ctx.core.clock.now();
  for (const run of await runs.activeRuns('crew')) {
    if (run.flags['investigate']) continue;
    const spec = crewSpec(run);
    const spent = await runTokens(ctx, run.run_id);
    let reason: string | null = null;
    if (now - run.created_at > (spec.max_duration_ms ?? DEFAULT_MAX_DURATION_MS)) reason = 'time_budget';
    else if (spec.max_tokens !== null && spec.max_tokens !== undefined && spent > spec.max_tokens) reason = 'cost_budget';
    if (!reason) continue;
    await runs.setRunFlags(run.run_id, { investigate: { reason, at: now } });
    try {
      await runs.appendJournal(run.run_id, {
        step_id: 'run',
        kind: 'investigate',
        data: { reason, elapsed_ms: now - run.created_at, tokens: spent },
      });
    } catch {
      /* the run ended meanwhile: the flag stays as a record */
    }
  }
}

/** Tokens the run's model calls have used so far. */
export function runTokens(ctx: TeamsContext, runId: string): Promise<number> {
  return resourcesRepo.runTokens(ctx.core.store, runId);
}
