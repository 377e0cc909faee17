/**
 * Agents and their budget ledgers.
 *
 * Minting an agent creates a full principal (kind `agent`, role `agent`): it
 * appears under /admin/principals and can own API keys. Two gates, each a
 * refusal with an audit record:
 * - the caller must be allowed to create agent principals: `iam.principals.write`
 *   (any principal) or `agent_teams.agents.write` (agents only; the built-in
 *   `operator` role holds it) in its effective authority: 403 forbidden,
 *   reason `cannot_create_principal`;
 * - the standing-agent work quota (`agentQuota`, default 100, `--agent-quota`):
 *   at most that many active agents at once: 409 conflict, reason `agent_quota_reached`.
 *
 * A budget ledger (budget units = model tokens, input + output) must be
 * registered for an agent before any run that includes it; every model call
 * reserves before (max_tokens, or what is left down to a floor) and commits
 * after.
 */
import { grants } from '../../../core/authority/scopes.ts';
import { parseAuthority } from '../../../core/authority/schema.ts';
import { PERMISSIONS } from '../../../core/permissions.ts';
import { ServiceError, forbidden, invalid, notFound } from '../../../core/errors.ts';
import type { AuthContext } from '../../context.ts';
import type { Reader, Tx } from '../../store/types.ts';
import { newId } from '../../ids.ts';
import type { TeamsContext } from '../context.ts';
import * as repo from './repository.ts';
import { blueprintPrompt, checkContracts, checkTools, getBlueprint } from './resources.ts';
import { iso } from '../schema.ts';
import type { Agent, AgentBody, Ledger } from './types.ts';
import type { AgentView, BudgetLedgerView } from './routes-resources.ts';

/** The built-in role every agent principal holds (core/permissions.ts: catalog.read). */
export const AGENT_ROLE = 'agent';

/** Whether the caller may create, change or delete agent principals. */
export function mayManageAgents(auth: AuthContext): boolean {
  return grants(auth.effective, PERMISSIONS.teamsAgentsWrite) || grants(auth.effective, PERMISSIONS.principalsWrite);
}

export interface MintInput {
  source: 'blueprint' | 'scratch';
  blueprint_id?: string | undefined;
  name?: string | undefined;
  provider_id?: string | undefined;
  role_label?: string | undefined;
  model_preference?: string | undefined;
  system_prompt?: string | undefined;
  authority_template?: unknown;
}

async function refuse(ctx: TeamsContext, auth: AuthContext, err: ServiceError): Promise<never> {
  await ctx.iam.auditNow({
    actor: auth.principal.id,
    action: 'agent.mint',
    target: 'agent',
    outcome: 'refused',
    details: { ...err.details },
  });
  throw err;
}

function quotaReached(quota: number, active: number): ServiceError {
  return new ServiceError('conflict', `the standing-agent work quota (${quota}) is reached`, {
    details: { reason: 'agent_quota_reached', quota, active },
  });
}

export async function mintAgent(ctx: TeamsContext, auth: AuthContext, input: MintInput): Promise<Agent> {
  const { core, iam } = ctx;
  // An agent is a standing principal: a delegated token makes none.
  await iam.assertNotDelegated(auth, { action: 'agent.mint', target: auth.principal.id });
  if (!mayManageAgents(auth)) {
    await refuse(
      ctx,
      auth,
      forbidden('minting an agent creates a principal: the caller lacks agent_teams.agents.write (or iam.principals.write)', {
        reason: 'cannot_create_principal',
        required_permission: PERMISSIONS.teamsAgentsWrite,
      }),
    );
  }
  let body: AgentBody;
  if (input.source === 'blueprint') {
    if (!input.blueprint_id) throw invalid('source blueprint needs blueprint_id', { reason: 'missing_field', field: 'blueprint_id' });
    const bp = await getBlueprint(ctx, input.blueprint_id);
    if (!bp) throw invalid('blueprint_id names no blueprint', { reason: 'unknown_blueprint', field: 'blueprint_id' });
    if (input.authority_template !== undefined)
      throw invalid('an agent from a blueprint takes its authority from the blueprint', {
        reason: 'field_not_allowed',
        field: 'authority_template',
      });
    body = {
      source: 'blueprint',
      blueprint_id: bp.blueprint_id,
      role_label: input.role_label ?? bp.role_label,
      provider_id: null,
      model_preference: input.model_preference ?? bp.model_preference,
      system_prompt: input.system_prompt ?? (await blueprintPrompt(ctx, bp)),
      authority: bp.authority_template,
    };
  } else {
    if (input.blueprint_id) throw invalid('source scratch takes no blueprint_id', { reason: 'field_not_allowed', field: 'blueprint_id' });
    if (!input.role_label) throw invalid('an agent from scratch needs role_label', { reason: 'missing_field', field: 'role_label' });
    const authority = input.authority_template === undefined ? {} : parseAuthority(input.authority_template);
    checkTools(ctx.tools, authority, 'authority_template');
    await checkContracts(ctx, authority, 'authority_template');
    body = {
      source: 'scratch',
      blueprint_id: null,
      role_label: input.role_label,
      provider_id: null,
      model_preference: input.model_preference ?? null,
      system_prompt: input.system_prompt ?? null,
      authority,
    };
  }
  // The agent is a principal holding the role `agent` and its authority template as its ceiling:
  // whoever mints it must hold all of that (from a blueprint or from scratch alike).
  await iam.assertWithinCaller(
    auth,
    { permissions: await iam.rolePermissions([AGENT_ROLE]), envelope: body.authority },
    { action: 'agent.mint', target: 'agent' },
  );
  if (input.provider_id) {
    if (!(await ctx.ai.provider(input.provider_id)))
      throw invalid('provider_id names no model provider', { reason: 'unknown_provider', field: 'provider_id' });
    body.provider_id = input.provider_id;
  }
  const quota = core.config.agentQuota;
  const active = await iam.activeCount('agent');
  if (active >= quota) await refuse(ctx, auth, quotaReached(quota, active));
  const at = core.clock.now();
  const name =
    input.name ??
    `agent-${body.role_label
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .slice(0, 40)}-${newId('x').slice(2, 10)}`;
  return core.store.write(async (tx) => {
    // Re-check the quota inside the transaction: concurrent mints cannot overshoot.
    const n = await iam.activeCount('agent', tx);
    if (n >= quota) throw quotaReached(quota, n);
    const p = await iam.createPrincipalTx(tx, {
      kind: 'agent',
      name,
      roles: [AGENT_ROLE],
      authority: body.authority,
      createdBy: auth.principal.id,
    });
    const agent: Agent = { agent_id: p.id, name, ...body, created_at: at, created_by: auth.principal.id };
    await repo.insertAgent(tx, agent);
    await iam.audit(tx, {
      at,
      actor: auth.principal.id,
      action: 'agent.mint',
      target: p.id,
      outcome: 'ok',
      details: { source: body.source, blueprint_id: body.blueprint_id },
    });
    return agent;
  });
}

export async function getAgent(ctx: TeamsContext, id: string): Promise<Agent | undefined> {
  return (await ctx.agents.read(id, async () => (await repo.agentById(ctx.core.store, id)) ?? null)) ?? undefined;
}
export function listAgents(ctx: TeamsContext, limit: number, offset: number): Promise<Agent[]> {
  return repo.listAgents(ctx.core.store, limit, offset);
}
export async function agentView(ctx: TeamsContext, a: Agent): Promise<AgentView> {
  const p = await ctx.iam.principal(a.agent_id);
  return {
    ...a,
    principal_status: p?.status ?? 'purged',
    has_budget_ledger: (await getLedger(ctx, a.agent_id)) !== undefined,
    created_at: iso(a.created_at),
  };
}

/** True when the agent exists and its principal is active. */
export async function agentActive(ctx: TeamsContext, id: string): Promise<boolean> {
  return (await getAgent(ctx, id)) !== undefined && (await ctx.iam.principal(id))?.status === 'active';
}

// ---------------------------------------------------------------- ledgers

export function getLedger(ctx: TeamsContext, agentId: string): Promise<Ledger | undefined> {
  return repo.ledgerOf(ctx.core.store, agentId);
}

/** Whether the agent has a budget ledger: read once per process when it does (ledgers are never deleted). */
export async function hasLedger(ctx: TeamsContext, agentId: string): Promise<boolean> {
  if (ctx.ledgersSeen.has(agentId)) return true;
  if (!(await repo.ledgerOf(ctx.core.store, agentId))) return false;
  ctx.ledgersSeen.add(agentId);
  return true;
}

/**
 * Registers (or resets the limit of) an agent's budget ledger: a change of what
 * the agent may spend, so the caller covers the agent or manages its owner
 * (iam.assertMayChangeShared).
 */
export async function registerLedger(ctx: TeamsContext, auth: AuthContext, agentId: string, limit: number): Promise<Ledger> {
  const agent = await getAgent(ctx, agentId);
  if (!agent) throw notFound('agent');
  const reached = await ctx.iam.reachedAgent(agentId, agent.created_by);
  await ctx.iam.assertMayChangeShared(auth, { kind: 'agent', id: agentId }, reached ? [reached] : [], 'agent.budget_ledger');
  const actor = auth.principal.id;
  const at = ctx.core.clock.now();
  return ctx.core.store.write(async (tx) => {
    await repo.upsertLedger(tx, agentId, limit, at, actor);
    await ctx.iam.audit(tx, { at, actor, action: 'agent.budget_ledger', target: agentId, outcome: 'ok', details: { budget_limit: limit } });
    const l = await repo.ledgerOf(tx, agentId);
    if (!l) throw new TypeError('registerLedger: the ledger just written is not there');
    return l;
  });
}

export const ledgerView = (l: Ledger): BudgetLedgerView => ({
  agent_id: l.agent_id,
  budget_limit: l.budget_limit,
  reserved: l.reserved,
  held: l.held,
  spent: l.spent,
  available: Math.max(0, l.budget_limit - l.reserved - l.held - l.spent),
  unit: 'tokens',
  created_at: iso(l.created_at),
  updated_at: iso(l.updated_at),
});

/**
 * Reserves budget before a model call of a run: `amount`, or what the
 * ledger has left when that is less but at least `minimum`
 * (core/engine/budget.ts); not ok when the ledger cannot cover that.
 *
 * One statement decides and reserves (repository reserveFromLedger): the
 * reservation is a row of the run's own, committed with the records the run's
 * driver holds back (the previous step's) in that driver's next transaction
 * (the runs module's writeWithDriver), before the call can leave. The ledger
 * is not written: its figures are its columns plus the rows not folded into
 * them yet (foldLedgers, off the runs' path). Runs of one agent reserving in
 * transactions that commit at the same moment do not see each other's
 * reservation, so a ledger may be passed by at most the calls reserved
 * concurrently (docs/agent-teams.md).
 */
export async function reserveBudget(
  ctx: TeamsContext,
  agentId: string,
  amount: number,
  ref: { run_id: string; step_id: string },
  minimum: number = amount,
): Promise<{ ok: true; reservation_id: string; amount: number } | { ok: false; reason: string }> {
  const id = newId('rsv');
  const at = ctx.core.clock.now();
  let granted: number | null;
  try {
    // One statement, issued at once: it may ride with the driver's COMMIT in one round trip, and what
    // it reserved can be read back by its id should its answer be lost after the commit.
    granted = await ctx.runs.writeWithDriver(
      ref.run_id,
      (tx) => repo.reserveFromLedger(tx, { id, agentId, amount, minimum, runId: ref.run_id, stepId: ref.step_id, at }),
      { readBack: (db) => repo.reservedAmount(db, id) },
    );
  } catch (e) {
    // The commit failed, or failed after it kept the records before a refused one (a storage limit):
    // a reservation kept without its call is released, charged nothing (a no-op when none was kept).
    stageBudgetCommit(ctx, ref.run_id, id, 0);
    throw e;
  }
  if (granted !== null) {
    foldWhenDue(ctx);
    return { ok: true as const, reservation_id: id, amount: granted };
  }
  // Refused: whether for want of a ledger or of budget (read once, off the way of calls that go ahead).
  return { ok: false as const, reason: (await repo.ledgerOf(ctx.core.store, agentId)) ? 'budget_exceeded' : 'no_budget_ledger' };
}

/** The reservations made for a run so far, by step id (the model calls it issued: crew-runs/ports.ts). */
export function reservationsByStep(db: Reader, runId: string): Promise<Map<string, Set<string>>> {
  return repo.reservationsByStep(db, runId);
}

/**
 * Commits the actual usage of a reservation reserveBudget made in this process, staged to commit
 * with the call's step record (idempotent). Such a reservation is a row of its own (reserveFromLedger
 * writes it unfolded), so its commit is one statement, issued at once (StagedWrite.atOnce).
 */
export function stageBudgetCommit(ctx: TeamsContext, runId: string, reservationId: string, actual: number): void {
  const at = ctx.core.clock.now();
  ctx.runs.stageRunWrite(
    runId,
    Object.assign(
      async (tx: Tx) => {
        await repo.commitOwnReservation(tx, reservationId, actual, at);
      },
      { atOnce: true as const },
    ),
  );
}

/** Commits actual usage of a reservation, releasing the rest (idempotent), in a transaction of its own. */
export async function commitBudget(ctx: TeamsContext, reservationId: string, actual: number): Promise<void> {
  const at = ctx.core.clock.now();
  await ctx.core.store.write(async (tx) => {
    await repo.commitReservation(tx, reservationId, actual, at);
  });
}

/**
 * Folds the committed reservations of every agent into its ledger's spent
 * (a timer of the teams module: off the runs' path), in one transaction: each
 * agent's fold locks its ledger row, in agent order, so folds of several
 * cells take turns.
 */
export function foldLedgers(ctx: TeamsContext): Promise<number> {
  if (ctx.folding) return ctx.folding;
  ctx.reservedSinceFold = 0;
  const p = foldOnce(ctx).finally(() => {
    ctx.folding = null;
  });
  ctx.folding = p;
  return p;
}

async function foldOnce(ctx: TeamsContext): Promise<number> {
  const agents = await repo.agentsToFold(ctx.core.store);
  if (agents.length === 0) return 0;
  return ctx.core.store.write((tx) => repo.foldLedgers(tx, agents), { notify: false, isolation: 'row-locks' });
}

/**
 * Reservations a process makes before it folds without waiting for the sweep. Every reservation
 * sums its agent's unfolded rows (reserveFromLedger), so under load the sweep's 5 s let them pile
 * up to hundreds an agent; a fold every FOLD_AFTER reservations keeps them to a few dozen, for
 * a handful of statements each time.
 */
export const FOLD_AFTER = 256;

/** Counts a reservation; past FOLD_AFTER, folds now (not awaited: off the runs' path), as the sweep would. */
function foldWhenDue(ctx: TeamsContext): void {
  if (++ctx.reservedSinceFold < FOLD_AFTER || ctx.folding || ctx.stopped || !ctx.standing.trusted()) return;
  void foldLedgers(ctx).catch((e: unknown) => ctx.core.log.warn('ledger fold failed', { error: e }));
}

/** Releases reservations left open by a coordinator that died (recovery). */
export async function releaseOpenReservations(ctx: TeamsContext, runId: string): Promise<void> {
  for (const id of await repo.openReservations(ctx.core.store, runId)) await commitBudget(ctx, id, 0);
}
