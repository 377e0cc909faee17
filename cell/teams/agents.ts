/**
 * Agents and their budget ledgers.
 *
 * Minting an agent creates a full principal (kind `agent`, role `agent`): it
 * appears under /admin/principals and can own API keys. Two gates, each a
 * refusal with an audit record:
 * - the caller must be allowed to create principals (`iam.principals.write`
 *   in its effective authority): 403 forbidden, reason `cannot_create_principal`;
 * - the standing-agent work quota (`agentQuota`, default 100, `--agent-quota`):
 *   at most that many active agents at once: 409 conflict, reason `agent_quota_reached`.
 *
 * A budget ledger (budget units = model tokens, input + output) must be
 * registered for an agent before any run that includes it; every model call
 * reserves before and commits after.
 */
import { grants } from '../../core/authority/scopes.ts';
import { assertWithinCaller } from '../iam/containment.ts';
import type { AuthorityEnvelope } from '../../core/authority/envelope.ts';
import { parseAuthority } from '../../core/authority/schema.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import { ServiceError, forbidden, invalid, notFound } from '../../core/errors.ts';
import type { AuthContext, Cell } from '../context.ts';
import { recordAuditTx } from '../iam/audit.ts';
import { newId } from '../iam/ids.ts';
import { createPrincipalTx, getPrincipal } from '../iam/principals.ts';
import { rolePermissions } from '../iam/roles.ts';
import { getProvider, listProviders } from '../ai/providers.ts';
import { blueprintPrompt, checkContracts, checkTools, getBlueprint } from './resources.ts';
import { iso, parseBody } from './schema.ts';

/** The built-in role every agent principal holds (core/permissions.ts: catalog.read). */
export const AGENT_ROLE = 'agent';

export interface AgentBody {
  source: 'blueprint' | 'scratch';
  blueprint_id: string | null;
  role_label: string;
  provider_id: string | null;
  model_preference: string | null;
  system_prompt: string | null;
  authority: AuthorityEnvelope;
}
export interface Agent extends AgentBody { agent_id: string; name: string; created_at: number; created_by: string }

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

async function refuse(cell: Cell, auth: AuthContext, err: ServiceError): Promise<never> {
  await cell.store.write((tx) => recordAuditTx(tx, {
    at: cell.clock.now(), actor: auth.principal.id, action: 'agent.mint', target: 'agent', outcome: 'refused', details: { ...err.details },
  }));
  throw err;
}

export async function mintAgent(cell: Cell, auth: AuthContext, input: MintInput): Promise<Agent> {
  if (!grants(auth.effective, PERMISSIONS.principalsWrite)) {
    await refuse(cell, auth, forbidden('minting an agent creates a principal: the caller lacks iam.principals.write', { reason: 'cannot_create_principal', required_permission: PERMISSIONS.principalsWrite }));
  }
  let body: AgentBody;
  if (input.source === 'blueprint') {
    if (!input.blueprint_id) throw invalid('source blueprint needs blueprint_id', { reason: 'missing_field', field: 'blueprint_id' });
    const bp = getBlueprint(cell, input.blueprint_id);
    if (!bp) throw invalid('blueprint_id names no blueprint', { reason: 'unknown_blueprint', field: 'blueprint_id' });
    if (input.authority_template !== undefined) throw invalid('an agent from a blueprint takes its authority from the blueprint', { reason: 'field_not_allowed', field: 'authority_template' });
    body = {
      source: 'blueprint', blueprint_id: bp.blueprint_id, role_label: input.role_label ?? bp.role_label, provider_id: null,
      model_preference: input.model_preference ?? bp.model_preference, system_prompt: input.system_prompt ?? blueprintPrompt(cell, bp),
      authority: bp.authority_template,
    };
  } else {
    if (input.blueprint_id) throw invalid('source scratch takes no blueprint_id', { reason: 'field_not_allowed', field: 'blueprint_id' });
    if (!input.role_label) throw invalid('an agent from scratch needs role_label', { reason: 'missing_field', field: 'role_label' });
    const authority = input.authority_template === undefined ? {} : parseAuthority(input.authority_template);
    checkTools(authority, 'authority_template');
    checkContracts(cell, authority, 'authority_template');
    body = {
      source: 'scratch', blueprint_id: null, role_label: input.role_label, provider_id: null,
      model_preference: input.model_preference ?? null, system_prompt: input.system_prompt ?? null, authority,
    };
  }
  // The agent is a principal holding the role `agent` and its authority template as its ceiling:
  // whoever mints it must hold all of that (from a blueprint or from scratch alike).
  await assertWithinCaller(cell, auth, { permissions: rolePermissions(cell.store, [AGENT_ROLE]), envelope: body.authority }, { action: 'agent.mint', target: 'agent' });
  if (input.provider_id) {
    if (!getProvider(cell, input.provider_id)) throw invalid('provider_id names no model provider', { reason: 'unknown_provider', field: 'provider_id' });
    body.provider_id = input.provider_id;
  }
  const quota = cell.config.agentQuota;
  const active = cell.store.get<{ n: number }>("SELECT COUNT(*) AS n FROM principals WHERE kind = 'agent' AND status = 'active'")!.n;
  if (active >= quota) {
    await refuse(cell, auth, new ServiceError('conflict', `the standing-agent work quota (${quota}) is reached`, { details: { reason: 'agent_quota_reached', quota, active } }));
  }
  const at = cell.clock.now();
  const name = input.name ?? `agent-${body.role_label.toLowerCase().replace(/[^a-z0-9]+/g, '-').slice(0, 40)}-${newId('x').slice(2, 10)}`;
  return cell.store.write((tx) => {
    // Re-check the quota inside the transaction: concurrent mints cannot overshoot.
    const n = tx.get<{ n: number }>("SELECT COUNT(*) AS n FROM principals WHERE kind = 'agent' AND status = 'active'")!.n;
    if (n >= quota) throw new ServiceError('conflict', `the standing-agent work quota (${quota}) is reached`, { details: { reason: 'agent_quota_reached', quota, active: n } });
    const p = createPrincipalTx(cell, tx, { kind: 'agent', name, roles: [AGENT_ROLE], authority: body.authority, createdBy: auth.principal.id });
    tx.run('INSERT INTO team_agents (agent_id, name, source, blueprint_id, body, created_at, created_by) VALUES (?, ?, ?, ?, ?, ?, ?)',
      [p.id, name, body.source, body.blueprint_id, JSON.stringify(body), at, auth.principal.id]);
    recordAuditTx(tx, { at, actor: auth.principal.id, action: 'agent.mint', target: p.id, outcome: 'ok', details: { source: body.source, blueprint_id: body.blueprint_id } });
    return { agent_id: p.id, name, ...body, created_at: at, created_by: auth.principal.id };
  });
}

type AgentRow = { agent_id: string; name: string; body: string; created_at: number; created_by: string };
const agentFromRow = (r: AgentRow): Agent => ({ agent_id: r.agent_id, name: r.name, ...parseBody<AgentBody>(r.body), created_at: r.created_at, created_by: r.created_by });

export function getAgent(cell: Cell, id: string): Agent | undefined {
  const r = cell.store.get<AgentRow>('SELECT * FROM team_agents WHERE agent_id = ?', [id]);
  return r ? agentFromRow(r) : undefined;
}
export function listAgents(cell: Cell, limit: number, offset: number): Agent[] {
  return cell.store.all<AgentRow>('SELECT * FROM team_agents ORDER BY created_at, agent_id LIMIT ? OFFSET ?', [limit, offset]).map(agentFromRow);
}
export function agentView(cell: Cell, a: Agent) {
  const p = getPrincipal(cell, a.agent_id);
  return { ...a, principal_status: p?.status ?? 'purged', has_budget_ledger: getLedger(cell, a.agent_id) !== undefined, created_at: iso(a.created_at) };
}

/** True when the agent exists and its principal is active. */
export function agentActive(cell: Cell, id: string): boolean {
  return getAgent(cell, id) !== undefined && getPrincipal(cell, id)?.status === 'active';
}

/** The provider an agent calls: its own, else the oldest registered provider. */
export function providerFor(cell: Cell, a: Agent): string | null {
  if (a.provider_id) return a.provider_id;
  return listProviders(cell, 1, 0)[0]?.provider_id ?? null;
}

// ---------------------------------------------------------------- ledgers

export interface Ledger { agent_id: string; budget_limit: number; reserved: number; spent: number; created_at: number; updated_at: number; updated_by: string }

export function getLedger(cell: Cell, agentId: string): Ledger | undefined {
  return cell.store.get<Ledger & Record<string, number | string>>('SELECT * FROM team_ledgers WHERE agent_id = ?', [agentId]);
}

/** Registers (or resets the limit of) an agent's budget ledger. */
export async function registerLedger(cell: Cell, actor: string, agentId: string, limit: number): Promise<Ledger> {
  if (!getAgent(cell, agentId)) throw notFound('agent');
  const at = cell.clock.now();
  await cell.store.write((tx) => {
    tx.run(`INSERT INTO team_ledgers (agent_id, budget_limit, reserved, spent, created_at, updated_at, updated_by) VALUES (?, ?, 0, 0, ?, ?, ?)
      ON CONFLICT (agent_id) DO UPDATE SET budget_limit = excluded.budget_limit, updated_at = excluded.updated_at, updated_by = excluded.updated_by`,
    [agentId, limit, at, at, actor]);
    recordAuditTx(tx, { at, actor, action: 'agent.budget_ledger', target: agentId, outcome: 'ok', details: { budget_limit: limit } });
  });
  return getLedger(cell, agentId)!;
}

export const ledgerView = (l: Ledger) => ({
  agent_id: l.agent_id, budget_limit: l.budget_limit, reserved: l.reserved, spent: l.spent,
  available: Math.max(0, l.budget_limit - l.reserved - l.spent), unit: 'tokens', created_at: iso(l.created_at), updated_at: iso(l.updated_at),
});

/** Reserves budget before a model call; false when the ledger cannot cover it. */
export async function reserveBudget(cell: Cell, agentId: string, amount: number, ref: { run_id: string; step_id: string }): Promise<{ ok: true; reservation_id: string } | { ok: false; reason: string }> {
  const id = newId('rsv');
  const at = cell.clock.now();
  return cell.store.write((tx) => {
    const l = tx.get<{ budget_limit: number; reserved: number; spent: number }>('SELECT budget_limit, reserved, spent FROM team_ledgers WHERE agent_id = ?', [agentId]);
    if (!l) return { ok: false as const, reason: 'no_budget_ledger' };
    if (l.reserved + l.spent + amount > l.budget_limit) return { ok: false as const, reason: 'budget_exceeded' };
    tx.run('UPDATE team_ledgers SET reserved = reserved + ? WHERE agent_id = ?', [amount, agentId]);
    tx.run('INSERT INTO team_reservations (reservation_id, agent_id, amount, actual, run_id, step_id, created_at, committed_at) VALUES (?, ?, ?, NULL, ?, ?, ?, NULL)',
      [id, agentId, amount, ref.run_id, ref.step_id, at]);
    return { ok: true as const, reservation_id: id };
  });
}

/** Commits actual usage of a reservation, releasing the rest (idempotent). */
export async function commitBudget(cell: Cell, reservationId: string, actual: number): Promise<void> {
  const at = cell.clock.now();
  await cell.store.write((tx) => {
    const r = tx.get<{ agent_id: string; amount: number; committed_at: number | null }>('SELECT agent_id, amount, committed_at FROM team_reservations WHERE reservation_id = ?', [reservationId]);
    if (!r || r.committed_at !== null) return;
    tx.run('UPDATE team_ledgers SET reserved = MAX(0, reserved - ?), spent = spent + ? WHERE agent_id = ?', [r.amount, actual, r.agent_id]);
    tx.run('UPDATE team_reservations SET actual = ?, committed_at = ? WHERE reservation_id = ?', [actual, at, reservationId]);
  });
}

/** Releases reservations left open by a coordinator that died (recovery). */
export async function releaseOpenReservations(cell: Cell, runId: string): Promise<void> {
  const open = cell.store.all<{ reservation_id: string }>('SELECT reservation_id FROM team_reservations WHERE run_id = ? AND committed_at IS NULL', [runId]);
  for (const r of open) await commitBudget(cell, r.reservation_id, 0);
}
