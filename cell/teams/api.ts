/**
 * The Agent Teams module's API, as the other modules use it: Jobs (the
 * scheduler's team fires, scheduled agent runs of a crew's graph, template
 * checks) and Edge (crew bundles). Everything else of the module is behind
 * its routes.
 *
 * This is the module's face (docs/architecture.md, "Faces"): another module of
 * cell/ imports it only from here.
 */
import type { Graph } from '../../core/engine/types.ts';
import { grants } from '../../core/authority/scopes.ts';
import { forbidden } from '../../core/errors.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import { deciderOf, type DrivePorts, type Run } from '../runs/api.ts';
import { getLedger } from './resources/agents.ts';
import type { Ledger } from './resources/types.ts';
import { chargeDevice, deviceHolds, holdForDevice, releaseDevice, type HeldGrant, type LedgerHold } from './resources/holds.ts';

export { beyondAllotment, outstanding } from './resources/holds.ts';
import type { Tx } from '../store/types.ts';
import type { TeamsContext } from './context.ts';
import { crewByGraph } from './formations/crew-graph.ts';
import { loadCrewForExport, type CrewExport } from './formations/export.ts';
import { crewFormation, getCrew } from './formations/formations.ts';
import type { Crew } from './formations/types.ts';
import { assertSeatsWithinCaller, compileFor } from './formations/compile.ts';
import type { AuthContext } from '../context.ts';
import { checkPlacement, type UnmetConstraint } from './crew-runs/placement.ts';
import { crewPorts } from './crew-runs/ports.ts';
import { cancelCrewRun, decideApproval, loadCrew, settled, startCrewRun, startCrewRunAs, sweepOnce } from './crew-runs/runs.ts';
import { executedGraph } from './crew-runs/run-graph.ts';
import { runnableCrews, type RunnableCrew } from './crew-runs/runnable.ts';
import { runView, type CrewRunView } from './crew-runs/run-view.ts';
import type { Formation } from './formations/types.ts';
import type { CrewRunInput } from './crew-runs/types.ts';
import type { CrewUsersHook } from './types.ts';

export type { CrewRunView, RunnableCrew, HeldGrant, LedgerHold };

export class Teams {
  constructor(private readonly ctx: TeamsContext) {}

  /** The crew, or undefined. */
  crew(crewId: string): Promise<Crew | undefined> {
    return getCrew(this.ctx, crewId);
  }

  /**
   * Starts a crew run for `requester` (compile, placement, agents active,
   * budget ledgers; then driven in the background). A refusal before the first
   * step is a run too: ServiceError `conflict` with details.reason and
   * details.run_id; an unknown crew is `not_found`. `opts.runId`: the id the
   * run must have (reserved before); a run with that id already existing makes
   * this fail, so two launches of one reserved id start one run. `opts.check`: the caller's check on the
   * graph the run compiles, before anything is written; `opts.source`: where the run comes from
   * (`schedule:<id>`; default `api`).
   */
  startCrewRun(
    requester: string,
    crewId: string,
    input: CrewRunInput,
    opts: {
      runId?: string;
      check?: (graph: Graph) => Promise<void>;
      requesterActors?: readonly string[] | undefined;
      source?: string;
    } = {},
  ): Promise<Run> {
    return startCrewRun(this.ctx, requester, crewId, input, opts);
  }

  /** The crew whose current compiled graph has this hash, with the graph; undefined when no crew's does. */
  crewByGraph(graphHash: string): Promise<{ crew: Crew; graph: Graph; graphHash: string } | undefined> {
    return crewByGraph(this.ctx, graphHash);
  }

  /**
   * Starts a crew run as the caller: the run route's one implementation (every seat within the
   * caller's authority, audited refusal; the formation's input schema; then startCrewRun's checks).
   */
  startCrewRunAs(auth: AuthContext, crewId: string, input: CrewRunInput): Promise<Run> {
    return startCrewRunAs(this.ctx, auth, crewId, input);
  }

  /** The crews the caller may run now (what the run route would start for it), oldest first. */
  runnableCrews(auth: AuthContext, max?: number): Promise<RunnableCrew[]> {
    return runnableCrews(this.ctx, auth, max);
  }

  /** The crew and the formation version it pins; not_found when either is gone. */
  crewAndFormation(crewId: string): Promise<{ crew: Crew; formation: Formation }> {
    return loadCrew(this.ctx, crewId);
  }

  /**
   * An approval decision on a waiting step of a crew run by the caller (its principal and its
   * token's actors): the approval route's one implementation (the runs module's rules, two-person
   * included; the run is woken when it should be).
   */
  decideApproval(
    auth: AuthContext,
    crewId: string,
    runId: string,
    stepId: string,
    decision: 'approve' | 'reject',
    comment: string | undefined,
  ): Promise<Run> {
    // The approval route's permission (its gate judges it first; any other way in is judged the same, here).
    if (!grants(auth.effective, PERMISSIONS.teamsApprove)) {
      throw forbidden(`the credential lacks the permission ${PERMISSIONS.teamsApprove}`, { required_permission: PERMISSIONS.teamsApprove });
    }
    return decideApproval(this.ctx, deciderOf(auth), crewId, runId, stepId, decision, comment);
  }

  /** Cancels a run of the crew as the caller (the cancel route's one implementation): idempotent, audited when it changed the run. */
  cancelCrewRun(auth: AuthContext, crewId: string, runId: string): Promise<Run> {
    return cancelCrewRun(this.ctx, auth, crewId, runId);
  }

  /** A crew run as the run routes show it (pending approvals, investigate flag, forks). */
  runView(run: Run): Promise<CrewRunView> {
    return runView(this.ctx, run);
  }

  /** The graph a crew run executed and its formation version (kept when it started, or recompiled to the run's hash); undefined when it cannot be told. */
  executedGraph(run: Run): Promise<{ graph: unknown; formationVersion: number } | undefined> {
    return executedGraph(this.ctx, run);
  }

  /** The crew's current compiled graph; undefined when the crew is gone or no longer compiles. */
  async crewGraph(crewId: string): Promise<{ crew: Crew; graph: Graph; graphHash: string } | undefined> {
    const crew = await getCrew(this.ctx, crewId);
    const formation = crew ? await crewFormation(this.ctx, crew) : undefined;
    if (!crew || !formation) return undefined;
    try {
      const c = await compileFor(this.ctx, formation, crew);
      return { crew, graph: c.graph, graphHash: c.graphHash };
    } catch {
      return undefined;
    }
  }

  /** Refuses (audited, 403 wider_than_caller) unless every seat of `graph` is within the caller's envelope authority. */
  assertSeatsWithinCaller(auth: AuthContext, graph: Graph, what: { action: string; target: string }): Promise<void> {
    return assertSeatsWithinCaller(this.ctx, auth, graph, what);
  }

  /** The placement constraints of a graph this cell does not meet (none: it may run here). */
  unmetPlacement(graph: Graph): UnmetConstraint[] {
    return checkPlacement(graph.placement, this.ctx.core.config);
  }

  /** The engine ports a run of a crew's graph needs (model, tools, approvals, budget, contracts); driveRun binds the rest. */
  crewPorts(runId: string, workspaceId: string, onBehalf?: { requester: string; crewId?: string }): DrivePorts {
    return crewPorts(this.ctx, runId, workspaceId, onBehalf);
  }

  /** Everything a crew bundle carries: crew, formation, billets, graph, compiler input, agents, blueprints, skills, contracts, grants (budgets: `holdForDevice`). */
  exportCrew(crewId: string): Promise<CrewExport> {
    return loadCrewForExport(this.ctx, crewId);
  }

  /** An agent's budget ledger, or undefined. */
  ledger(agentId: string): Promise<Ledger | undefined> {
    return getLedger(this.ctx, agentId);
  }

  /**
   * Holds, in the caller's transaction, a share of each agent's ledger for a crew bundle to a device that lives
   * until `until` (resources/holds.ts: `shares[agent]`, by default all that is left; 400 `share_agent_unbudgeted`,
   * 409 `share_exceeds_budget`). By agent with a ledger: what was granted and the device's ceiling after.
   */
  holdForDevice(
    tx: Tx,
    deviceId: string,
    agentIds: readonly string[],
    shares: Readonly<Record<string, number>> | undefined,
    until: number,
  ): Promise<Record<string, HeldGrant>> {
    return holdForDevice(tx, deviceId, agentIds, shares, until, this.ctx.core.clock.now());
  }

  /** Charges a device's spending (tokens by agent) to the ledgers, in the caller's transaction, out of its holds first. */
  chargeDevice(tx: Tx, deviceId: string, usage: Readonly<Record<string, number>>): Promise<Record<string, number>> {
    return chargeDevice(tx, deviceId, usage, this.ctx.core.clock.now());
  }

  /** Gives a device's outstanding holds back to the ledgers, in the caller's transaction (409 `bundle_live` before its bundles expire). */
  releaseDeviceHolds(tx: Tx, deviceId: string): Promise<{ holds: LedgerHold[]; released: Record<string, number> }> {
    return releaseDevice(tx, deviceId, this.ctx.core.clock.now());
  }

  /** A device's holds, by agent id. */
  deviceHolds(deviceId: string): Promise<LedgerHold[]> {
    return deviceHolds(this.ctx.core.store, deviceId);
  }

  /** Registers another module's users of crews: a crew they name is not deleted, nor its graph changed under them (409 in_use). */
  onCrewUsers(hook: CrewUsersHook): void {
    this.ctx.crewUserHooks.push(hook);
  }

  /** Resolves when this process no longer drives the crew run (tests, shutdown). */
  settled(runId: string): Promise<void> {
    return settled(this.ctx, runId);
  }

  /** The periodic sweep once, now: runs past their budget flagged `investigate`, ledgers folded (tests; a timer runs it). */
  sweepNow(): Promise<void> {
    return sweepOnce(this.ctx);
  }
}
