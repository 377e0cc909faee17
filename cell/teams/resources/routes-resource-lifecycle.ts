/**
 * Routes: changing (PATCH) and deleting skills, blueprints, agents and
 * governing contracts. Immutable fields are refused by name (400
 * immutable_field); a delete of something in use is 409 in_use naming the
 * users (../usage.ts).
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { PERMISSIONS } from '../../../core/permissions.ts';
import type { AppEnv } from '../../context.ts';
import { immutableField, refuseImmutable } from '../../http/immutable.ts';
import { errorResponses, json, jsonBody, secured } from '../../http/openapi.ts';
import { deleteAgent, updateAgent } from './agent-lifecycle.ts';
import { agentView } from './agents.ts';
import type { TeamsContext } from '../context.ts';
import {
  SKILL_IMMUTABLE,
  deleteBlueprint,
  deleteContract,
  deleteSkill,
  updateBlueprint,
  updateContract,
  updateSkill,
} from './resource-lifecycle.ts';
import { blueprintView, contractView, skillView } from './resources.ts';
import { AgentIn, AgentOut, BlueprintIn, BlueprintOut, ContractIn, ContractOut, SkillIn, SkillOut } from './routes-resources.ts';
import { idParam } from '../routes-collection.ts';

const P = '/api/public/v1/admin/agent-teams';
const anyObject = z.record(z.string(), z.unknown());

const SkillPatch = z
  .object({
    model_preference: SkillIn.shape.model_preference.unwrap().nullable().optional(),
    definition: anyObject.nullable().optional().openapi({ description: "Checked for the skill's kind, as at creation" }),
    name: immutableField(SKILL_IMMUTABLE.name),
    skill_kind: immutableField(SKILL_IMMUTABLE.skill_kind),
  })
  .strict()
  .openapi('UpdateSkill');

const B = BlueprintIn.shape;
const BlueprintPatch = z
  .object({
    name: B.name.optional(),
    role_label: B.role_label.optional(),
    system_prompt_ref: B.system_prompt_ref.unwrap().nullable().optional(),
    model_preference: B.model_preference.unwrap().nullable().optional(),
    required_skills: B.required_skills,
    authority_template: B.authority_template,
    scope: B.scope,
  })
  .strict()
  .openapi('UpdateBlueprint', { description: 'Agents minted from the blueprint keep what they copied' });

const AGENT_IMMUTABLE = {
  source: 'how the agent was minted; mint another agent',
  blueprint_id: 'how the agent was minted; mint another agent',
  name: "the name of the agent's principal",
};
const A = AgentIn.shape;
const AgentPatch = z
  .object({
    role_label: A.role_label.optional(),
    provider_id: A.provider_id.unwrap().nullable().optional().openapi({ description: 'null: the oldest registered provider' }),
    model_preference: A.model_preference.unwrap().nullable().optional(),
    system_prompt: A.system_prompt.unwrap().nullable().optional(),
    authority_template: A.authority_template.openapi({
      description: "The agent's authority (its principal's ceiling); within the caller's",
    }),
    source: immutableField(AGENT_IMMUTABLE.source),
    blueprint_id: immutableField(AGENT_IMMUTABLE.blueprint_id),
    name: immutableField(AGENT_IMMUTABLE.name),
  })
  .strict()
  .openapi('UpdateAgent');

const C = ContractIn.shape;
const ContractPatch = z
  .object({
    name: C.name.optional(),
    description: C.description.unwrap().nullable().optional(),
    rules: C.rules.optional(),
  })
  .strict()
  .openapi('UpdateContract');

export function resourceLifecycleRoutes(app: OpenAPIHono<AppEnv>, ctx: TeamsContext): void {
  const write = secured(PERMISSIONS.teamsWrite);

  // ---- skills
  app.openapi(
    createRoute({
      method: 'patch',
      path: `${P}/skills/{skill_id}`,
      tags: ['Skills'],
      'x-status': 'Live',
      summary: 'Change a skill (model_preference, definition); its name and kind stay',
      ...write,
      request: { params: idParam('skill_id'), body: jsonBody(SkillPatch) },
      responses: { 200: json(SkillOut, 'The skill'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const body = c.req.valid('json');
      refuseImmutable(body, SKILL_IMMUTABLE);
      const s = await updateSkill(ctx, c.get('auth'), c.req.valid('param')['skill_id']!, body);
      return c.json(skillView(s), 200);
    },
  );
  app.openapi(
    createRoute({
      method: 'delete',
      path: `${P}/skills/{skill_id}`,
      tags: ['Skills'],
      'x-status': 'Live',
      summary: 'Delete a skill (409 in_use while a blueprint or a formation version names it)',
      ...write,
      request: { params: idParam('skill_id') },
      responses: { 200: json(SkillOut, 'The skill as it was'), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => c.json(skillView(await deleteSkill(ctx, c.get('auth'), c.req.valid('param')['skill_id']!)), 200),
  );

  // ---- blueprints
  app.openapi(
    createRoute({
      method: 'patch',
      path: `${P}/blueprints/{blueprint_id}`,
      tags: ['Blueprints'],
      'x-status': 'Live',
      summary: "Change a blueprint (within the caller's authority, as it is and as it becomes)",
      ...write,
      request: { params: idParam('blueprint_id'), body: jsonBody(BlueprintPatch) },
      responses: { 200: json(BlueprintOut, 'The blueprint'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const b = await updateBlueprint(ctx, c.get('auth'), c.req.valid('param')['blueprint_id']!, c.req.valid('json'));
      return c.json(blueprintView(b), 200);
    },
  );
  app.openapi(
    createRoute({
      method: 'delete',
      path: `${P}/blueprints/{blueprint_id}`,
      tags: ['Blueprints'],
      'x-status': 'Live',
      summary: 'Delete a blueprint (409 in_use while an agent minted from it exists)',
      ...write,
      request: { params: idParam('blueprint_id') },
      responses: { 200: json(BlueprintOut, 'The blueprint as it was'), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const b = await deleteBlueprint(ctx, c.get('auth'), c.req.valid('param')['blueprint_id']!);
      return c.json(blueprintView(b), 200);
    },
  );

  // ---- agents
  app.openapi(
    createRoute({
      method: 'patch',
      path: `${P}/agents/{agent_id}`,
      tags: ['Agents'],
      'x-status': 'Live',
      summary: "Change an agent (needs agent_teams.agents.write and all of the agent's authority; a new authority within the caller's)",
      ...write,
      request: { params: idParam('agent_id'), body: jsonBody(AgentPatch) },
      responses: { 200: json(AgentOut, 'The agent'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const body = c.req.valid('json');
      refuseImmutable(body, AGENT_IMMUTABLE);
      const a = await updateAgent(ctx, c.get('auth'), c.req.valid('param')['agent_id']!, body);
      return c.json(await agentView(ctx, a), 200);
    },
  );
  app.openapi(
    createRoute({
      method: 'delete',
      path: `${P}/agents/{agent_id}`,
      tags: ['Agents'],
      'x-status': 'Live',
      summary: 'Delete an agent: its principal is soft-deleted (restorable within the retention window); 409 in_use while a crew binds it',
      ...write,
      request: { params: idParam('agent_id') },
      responses: { 200: json(AgentOut, 'The agent, its principal deleted'), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const a = await deleteAgent(ctx, c.get('auth'), c.req.valid('param')['agent_id']!);
      return c.json(await agentView(ctx, a), 200);
    },
  );

  // ---- contracts
  app.openapi(
    createRoute({
      method: 'patch',
      path: `${P}/contracts/{contract_id}`,
      tags: ['Contracts'],
      'x-status': 'Live',
      summary: 'Change a governing contract (rules parsed again; seats it governs use them from their next tool call)',
      ...write,
      request: { params: idParam('contract_id'), body: jsonBody(ContractPatch) },
      responses: { 200: json(ContractOut, 'The contract'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const k = await updateContract(ctx, c.get('auth'), c.req.valid('param')['contract_id']!, c.req.valid('json'));
      return c.json(contractView(k), 200);
    },
  );
  app.openapi(
    createRoute({
      method: 'delete',
      path: `${P}/contracts/{contract_id}`,
      tags: ['Contracts'],
      'x-status': 'Live',
      summary: 'Delete a governing contract (409 in_use while a blueprint, an agent or a formation version names it)',
      ...write,
      request: { params: idParam('contract_id') },
      responses: { 200: json(ContractOut, 'The contract as it was'), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => c.json(contractView(await deleteContract(ctx, c.get('auth'), c.req.valid('param')['contract_id']!)), 200),
  );
}
