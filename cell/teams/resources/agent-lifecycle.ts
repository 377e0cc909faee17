/**
 * Changing and deleting agents. An agent is a principal, so both need the
 * right to manage agent principals (`agent_teams.agents.write`, or
 * `iam.principals.write`: 403 cannot_manage_agent) and all of the agent's
 * authority (IAM's assertManages: a caller cannot repoint, reprompt or remove
 * an agent that holds more than it does; 403 wider_than_caller). A new
 * authority template must lie within the caller too, and becomes the
 * principal's ceiling in the same transaction.
 *
 * What can change: role_label, provider_id, model_preference, system_prompt,
 * authority_template. What cannot: source, blueprint_id (how it was minted),
 * name (its principal's name). A change of the authority, model or prompt
 * changes the graph of every crew that binds the agent: a waiting run of such
 * a crew can no longer resume (graph_changed), by design.
 *
 * Deleting is the IAM soft delete of the agent's principal (its keys are
 * soft-deleted; restorable within the retention window through
 * `/principals/{id}/restore`, purged after it), refused while a crew binds the
 * agent (409 in_use, naming the crews). Archiving or deleting the principal
 * through IAM is never refused (it is how a compromised agent is stopped):
 * crews that bind an inactive agent refuse to run (agent_inactive).
 */
import type { AuthorityEnvelope } from '../../../core/authority/envelope.ts';
import { parseAuthority } from '../../../core/authority/schema.ts';
import { ServiceError, forbidden, invalid, notFound, inUse } from '../../../core/errors.ts';
import { PERMISSIONS } from '../../../core/permissions.ts';
import type { AuthContext } from '../../context.ts';
import type { Principal } from '../../iam/api.ts';
import { AGENT_ROLE, getAgent, mayManageAgents } from './agents.ts';
import type { Agent } from './types.ts';
import type { TeamsContext } from '../context.ts';
import * as repo from './repository.ts';
import { checkContracts, checkTools } from './resources.ts';
import { sameJson } from './resource-lifecycle.ts';
import { agentUsers, anyUser } from '../usage.ts';

/** The agent and its principal, after the gates every change and delete pass. */
async function managed(ctx: TeamsContext, auth: AuthContext, agentId: string, action: string): Promise<{ agent: Agent; p: Principal }> {
  // 403 before 404: a caller who may not manage agents learns nothing about which exist.
  if (!mayManageAgents(auth)) {
    const err = forbidden(`${action}: the caller lacks agent_teams.agents.write (or iam.principals.write)`, {
      reason: 'cannot_manage_agent',
      required_permission: PERMISSIONS.teamsAgentsWrite,
    });
    await ctx.iam.auditNow({ actor: auth.principal.id, action, target: agentId, outcome: 'refused', details: { ...err.details } });
    throw err;
  }
  const agent = await getAgent(ctx, agentId);
  const p = agent ? await ctx.iam.principal(agentId) : undefined;
  if (!agent || !p || p.status === 'purged') throw notFound('agent');
  await ctx.iam.assertManages(auth, p, action);
  return { agent, p };
}

export interface AgentPatch {
  role_label?: string | undefined;
  provider_id?: string | null | undefined;
  model_preference?: string | null | undefined;
  system_prompt?: string | null | undefined;
  authority_template?: unknown;
}

/** Changes an agent; returns it as it is now (unchanged when nothing changed). */
export async function updateAgent(ctx: TeamsContext, auth: AuthContext, agentId: string, patch: AgentPatch): Promise<Agent> {
  // An agent is a standing principal: a delegated token does not change what it may do.
  if (patch.authority_template !== undefined) await ctx.iam.assertNotDelegated(auth, { action: 'agent.update', target: agentId });
  const { agent } = await managed(ctx, auth, agentId, 'agent.update');
  let authority: AuthorityEnvelope = agent.authority;
  if (patch.authority_template !== undefined) {
    authority = parseAuthority(patch.authority_template);
    checkTools(ctx.tools, authority, 'authority_template');
    await checkContracts(ctx, authority, 'authority_template');
    await ctx.iam.assertWithinCaller(
      auth,
      { permissions: await ctx.iam.rolePermissions([AGENT_ROLE]), envelope: authority },
      { action: 'agent.update', target: agentId },
    );
  }
  if (typeof patch.provider_id === 'string' && !(await ctx.ai.provider(patch.provider_id))) {
    throw invalid('provider_id names no model provider', { reason: 'unknown_provider', field: 'provider_id' });
  }
  const next: Agent = {
    ...agent,
    role_label: patch.role_label ?? agent.role_label,
    provider_id: patch.provider_id === undefined ? agent.provider_id : patch.provider_id,
    model_preference: patch.model_preference === undefined ? agent.model_preference : patch.model_preference,
    system_prompt: patch.system_prompt === undefined ? agent.system_prompt : patch.system_prompt,
    authority,
  };
  if (sameJson(next, agent)) return agent;
  const authorityChanged = !sameJson(authority, agent.authority);
  await ctx.core.store.write(async (tx) => {
    if (!(await repo.agentById(tx, agentId))) throw notFound('agent');
    await repo.updateAgent(tx, next);
    if (authorityChanged) await ctx.iam.setAuthorityTx(tx, agentId, authority);
    await ctx.iam.audit(tx, {
      actor: auth.principal.id,
      action: 'agent.update',
      target: agentId,
      outcome: 'ok',
      details: { fields: Object.keys(patch).filter((k) => (patch as Record<string, unknown>)[k] !== undefined) },
    });
  });
  return next;
}

/** Soft-deletes an agent's principal (IAM lifecycle); refused while a crew binds it. */
export async function deleteAgent(ctx: TeamsContext, auth: AuthContext, agentId: string): Promise<Agent> {
  const { agent, p } = await managed(ctx, auth, agentId, 'agent.delete');
  if (p.id === auth.principal.id) throw new ServiceError('conflict', 'an agent cannot delete itself', { details: { reason: 'self' } });
  // Checked in the deleting transaction: a crew that bound the agent before it commits is seen. (A crew written
  // concurrently does not read the principal in its transaction, so it may bind the agent as it goes; its runs then
  // refuse agent_inactive.)
  await ctx.lifecycle.apply(p, 'delete', auth.principal.id, async (tx) => {
    const users = await agentUsers(tx, agentId);
    if (anyUser(users))
      throw inUse('agent', agentId, users, 'delete those crews, or bind other agents to them (PATCH …/crews/{crew_id}), first');
  });
  return agent;
}
