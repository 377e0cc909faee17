/** Routes: skills, blueprints, agents (+ budget ledgers) and governing contracts. */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { authoritySchema } from '../../../core/authority/schema.ts';
import { PERMISSIONS } from '../../../core/permissions.ts';
import { notFound } from '../../../core/errors.ts';
import type { AppEnv } from '../../context.ts';
import { IsoTime, errorResponses, json, jsonBody, listSchema, pageOf, pageQuery, secured } from '../../http/openapi.ts';
import { agentView, getAgent, getLedger, ledgerView, listAgents, mintAgent, registerLedger } from './agents.ts';
import type { TeamsContext } from '../context.ts';
import {
  SKILL_KINDS,
  blueprintView,
  contractView,
  countListed,
  createBlueprint,
  createContract,
  createSkill,
  getBlueprint,
  getContract,
  getSkill,
  listBlueprints,
  listContracts,
  listSkills,
  skillView,
} from './resources.ts';

const P = '/api/public/v1/admin/agent-teams';
export const name = z
  .string()
  .min(1)
  .max(100)
  .regex(/^[A-Za-z0-9._ -]+$/);
const anyObject = z.record(z.string(), z.unknown());
const Authority = authoritySchema;
export const idParam = (n: string) =>
  z.object({
    [n]: z
      .string()
      .max(64)
      .openapi({ param: { name: n, in: 'path' } }),
  });

export const SkillIn = z
  .object({
    name: z
      .string()
      .min(1)
      .max(100)
      .regex(/^[a-z0-9][a-z0-9._-]*$/)
      .openapi({ description: 'Referenced as skill:<name>' }),
    skill_kind: z.enum(SKILL_KINDS),
    model_preference: z.string().min(1).max(200).optional(),
    definition: anyObject.optional(),
  })
  .strict()
  .openapi('CreateSkill');
export const SkillOut = z
  .object({
    skill_id: z.string(),
    name: z.string(),
    skill_kind: z.string(),
    model_preference: z.string().nullable(),
    definition: anyObject.nullable(),
    created_at: IsoTime,
    created_by: z.string(),
  })
  .openapi('Skill');

export const BlueprintIn = z
  .object({
    name,
    role_label: z.string().min(1).max(100),
    system_prompt_ref: z
      .string()
      .min(1)
      .max(20_000)
      .optional()
      .openapi({ description: 'skill:<name> of a prompt skill, or the prompt text' }),
    model_preference: z.string().min(1).max(200).optional(),
    required_skills: z
      .array(z.string().max(120))
      .max(64)
      .optional()
      .openapi({ description: 'skill:<name> references, resolved at authoring' }),
    authority_template: Authority.optional(),
    scope: z.enum(['workspace', 'cell']).optional(),
  })
  .strict()
  .openapi('CreateBlueprint');
export const BlueprintOut = z
  .object({
    blueprint_id: z.string(),
    name: z.string(),
    role_label: z.string(),
    system_prompt_ref: z.string().nullable(),
    model_preference: z.string().nullable(),
    required_skills: z.array(z.string()),
    authority_template: anyObject,
    scope: z.string(),
    created_at: IsoTime,
    created_by: z.string(),
  })
  .openapi('Blueprint');

export const AgentIn = z
  .object({
    source: z.enum(['blueprint', 'scratch']).default('blueprint'),
    blueprint_id: z.string().max(64).optional(),
    name: z
      .string()
      .min(1)
      .max(100)
      .regex(/^[A-Za-z0-9._@-]+$/)
      .optional()
      .openapi({ description: 'Principal name (unique); generated when absent' }),
    provider_id: z.string().max(64).optional().openapi({ description: 'Model provider; default the oldest registered' }),
    role_label: z.string().min(1).max(100).optional(),
    model_preference: z.string().min(1).max(200).optional(),
    system_prompt: z.string().max(20_000).optional(),
    authority_template: Authority.optional().openapi({ description: 'Scratch agents only' }),
  })
  .strict()
  .openapi('MintAgent');
export const AgentOut = z
  .object({
    agent_id: z.string(),
    name: z.string(),
    source: z.string(),
    blueprint_id: z.string().nullable(),
    role_label: z.string(),
    provider_id: z.string().nullable(),
    model_preference: z.string().nullable(),
    system_prompt: z.string().nullable(),
    authority: anyObject,
    principal_status: z.string(),
    has_budget_ledger: z.boolean(),
    created_at: IsoTime,
    created_by: z.string(),
  })
  .openapi('Agent');

const LedgerIn = z
  .object({ budget_limit: z.number().min(0).max(1e15).openapi({ description: 'Budget units (model tokens, input + output)' }) })
  .strict()
  .openapi('RegisterBudgetLedger');
const LedgerOut = z
  .object({
    agent_id: z.string(),
    budget_limit: z.number(),
    reserved: z.number(),
    spent: z.number(),
    available: z.number(),
    unit: z.string(),
    created_at: IsoTime,
    updated_at: IsoTime,
  })
  .openapi('BudgetLedger');

export const ContractIn = z
  .object({
    name,
    description: z.string().max(2000).optional(),
    rules: z
      .array(
        z
          .object({
            name: z
              .string()
              .min(1)
              .max(100)
              .regex(/^[A-Za-z0-9._-]+$/),
            expr: z.string().min(1).max(2048),
          })
          .strict(),
      )
      .min(1)
      .max(64)
      .openapi({ description: 'CEL booleans over tool, args, authority, context; every rule must hold (a false rule declines)' }),
  })
  .strict()
  .openapi('CreateContract');
export const ContractOut = z
  .object({
    contract_id: z.string(),
    name: z.string(),
    description: z.string().nullable(),
    rules: z.array(z.object({ name: z.string(), expr: z.string() })),
    created_at: IsoTime,
    created_by: z.string(),
  })
  .openapi('Contract');

export function resourceRoutes(app: OpenAPIHono<AppEnv>, ctx: TeamsContext): void {
  const write = secured(PERMISSIONS.teamsWrite);
  const read = secured(PERMISSIONS.teamsRead);

  // ---- skills
  app.openapi(
    createRoute({
      method: 'post',
      path: `${P}/skills`,
      tags: ['Skills'],
      'x-status': 'Live',
      summary: 'Create a skill',
      ...write,
      request: { body: jsonBody(SkillIn) },
      responses: { 201: json(SkillOut, 'The skill'), ...errorResponses(400, 401, 403, 409) },
    }),
    async (c) => {
      const s = await createSkill(ctx, c.get('auth').principal.id, c.req.valid('json'));
      return c.json(skillView(s), 201);
    },
  );
  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/skills`,
      tags: ['Skills'],
      'x-status': 'Live',
      summary: 'List skills',
      ...read,
      request: { query: pageQuery(100, 1000) },
      responses: { 200: json(listSchema('skills', SkillOut, 'SkillList'), 'Skills'), ...errorResponses(400, 401, 403) },
    }),
    async (c) => {
      const q = c.req.valid('query');
      return c.json(
        { skills: (await listSkills(ctx, q.limit, q.offset)).map(skillView), ...pageOf(q, await countListed(ctx, 'skills')) },
        200,
      );
    },
  );
  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/skills/{skill_id}`,
      tags: ['Skills'],
      'x-status': 'Live',
      summary: 'Get a skill',
      ...read,
      request: { params: idParam('skill_id') },
      responses: { 200: json(SkillOut, 'The skill'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const s = await getSkill(ctx, c.req.valid('param')['skill_id']!);
      if (!s) throw notFound('skill');
      return c.json(skillView(s), 200);
    },
  );

  // ---- blueprints
  app.openapi(
    createRoute({
      method: 'post',
      path: `${P}/blueprints`,
      tags: ['Blueprints'],
      'x-status': 'Live',
      summary: 'Create a blueprint (skill references resolved)',
      ...write,
      request: { body: jsonBody(BlueprintIn) },
      responses: { 201: json(BlueprintOut, 'The blueprint'), ...errorResponses(400, 401, 403) },
    }),
    async (c) => {
      const b = await createBlueprint(ctx, c.get('auth'), c.req.valid('json'));
      return c.json(blueprintView(b) as z.infer<typeof BlueprintOut>, 201);
    },
  );
  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/blueprints`,
      tags: ['Blueprints'],
      'x-status': 'Live',
      summary: 'List blueprints',
      ...read,
      request: { query: pageQuery(100, 1000) },
      responses: { 200: json(listSchema('blueprints', BlueprintOut, 'BlueprintList'), 'Blueprints'), ...errorResponses(400, 401, 403) },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const blueprints = (await listBlueprints(ctx, q.limit, q.offset)).map(blueprintView);
      return c.json({ blueprints, ...pageOf(q, await countListed(ctx, 'blueprints')) } as never, 200);
    },
  );
  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/blueprints/{blueprint_id}`,
      tags: ['Blueprints'],
      'x-status': 'Live',
      summary: 'Get a blueprint',
      ...read,
      request: { params: idParam('blueprint_id') },
      responses: { 200: json(BlueprintOut, 'The blueprint'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const b = await getBlueprint(ctx, c.req.valid('param')['blueprint_id']!);
      if (!b) throw notFound('blueprint');
      return c.json(blueprintView(b) as z.infer<typeof BlueprintOut>, 200);
    },
  );

  // ---- agents
  app.openapi(
    createRoute({
      method: 'post',
      path: `${P}/agents`,
      tags: ['Agents'],
      'x-status': 'Live',
      summary: "Mint an agent: a full principal, gated by the standing-agent quota and the caller's authority to create principals",
      ...write,
      request: { body: jsonBody(AgentIn) },
      responses: { 201: json(AgentOut, 'The agent'), ...errorResponses(400, 401, 403, 409) },
    }),
    async (c) => {
      const a = await mintAgent(ctx, c.get('auth'), c.req.valid('json'));
      return c.json((await agentView(ctx, a)) as z.infer<typeof AgentOut>, 201);
    },
  );
  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/agents`,
      tags: ['Agents'],
      'x-status': 'Live',
      summary: 'List agents',
      ...read,
      request: { query: pageQuery(100, 1000) },
      responses: { 200: json(listSchema('agents', AgentOut, 'AgentList'), 'Agents'), ...errorResponses(400, 401, 403) },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const agents = [];
      for (const a of await listAgents(ctx, q.limit, q.offset)) agents.push(await agentView(ctx, a));
      return c.json({ agents, ...pageOf(q, await countListed(ctx, 'agents')) } as never, 200);
    },
  );
  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/agents/{agent_id}`,
      tags: ['Agents'],
      'x-status': 'Live',
      summary: 'Get an agent',
      ...read,
      request: { params: idParam('agent_id') },
      responses: { 200: json(AgentOut, 'The agent'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const a = await getAgent(ctx, c.req.valid('param')['agent_id']!);
      if (!a) throw notFound('agent');
      return c.json((await agentView(ctx, a)) as z.infer<typeof AgentOut>, 200);
    },
  );
  app.openapi(
    createRoute({
      method: 'post',
      path: `${P}/agents/{agent_id}/budget-ledger`,
      tags: ['Agents'],
      'x-status': 'Live',
      summary: 'Register (or re-limit) the budget ledger a run needs for this agent',
      ...write,
      request: { params: idParam('agent_id'), body: jsonBody(LedgerIn) },
      responses: { 200: json(LedgerOut, 'The ledger'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const l = await registerLedger(ctx, c.get('auth'), c.req.valid('param')['agent_id']!, c.req.valid('json').budget_limit);
      return c.json(ledgerView(l), 200);
    },
  );
  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/agents/{agent_id}/budget-ledger`,
      tags: ['Agents'],
      'x-status': 'Live',
      summary: "An agent's budget ledger",
      ...read,
      request: { params: idParam('agent_id') },
      responses: { 200: json(LedgerOut, 'The ledger'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const l = await getLedger(ctx, c.req.valid('param')['agent_id']!);
      if (!l) throw notFound('budget ledger');
      return c.json(ledgerView(l), 200);
    },
  );

  // ---- contracts
  app.openapi(
    createRoute({
      method: 'post',
      path: `${P}/contracts`,
      tags: ['Contracts'],
      'x-status': 'Live',
      summary: 'Create a governing contract (CEL rules parsed at authoring)',
      ...write,
      request: { body: jsonBody(ContractIn) },
      responses: { 201: json(ContractOut, 'The contract'), ...errorResponses(400, 401, 403) },
    }),
    async (c) => {
      const k = await createContract(ctx, c.get('auth').principal.id, c.req.valid('json'));
      return c.json(contractView(k), 201);
    },
  );
  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/contracts`,
      tags: ['Contracts'],
      'x-status': 'Live',
      summary: 'List governing contracts',
      ...read,
      request: { query: pageQuery(100, 1000) },
      responses: { 200: json(listSchema('contracts', ContractOut, 'ContractList'), 'Contracts'), ...errorResponses(400, 401, 403) },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const contracts = (await listContracts(ctx, q.limit, q.offset)).map(contractView);
      return c.json({ contracts, ...pageOf(q, await countListed(ctx, 'contracts')) } as never, 200);
    },
  );
  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/contracts/{contract_id}`,
      tags: ['Contracts'],
      'x-status': 'Live',
      summary: 'Get a governing contract',
      ...read,
      request: { params: idParam('contract_id') },
      responses: { 200: json(ContractOut, 'The contract'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const k = await getContract(ctx, c.req.valid('param')['contract_id']!);
      if (!k) throw notFound('contract');
      return c.json(contractView(k), 200);
    },
  );
}
