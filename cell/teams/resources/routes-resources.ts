/** Routes: skills, blueprints, agents (+ budget ledgers) and governing contracts. */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { authoritySchema } from '../../../core/authority/schema.ts';
import { PERMISSIONS } from '../../../core/permissions.ts';
import { notFound } from '../../../core/errors.ts';
import type { AppEnv } from '../../context.ts';
import { IsoTime, errorResponses, json, jsonBody, secured } from '../../http/openapi.ts';
import { agentView, getAgent, getLedger, ledgerView, listAgents, mintAgent, registerLedger } from './agents.ts';
import type { TeamsContext } from '../context.ts';
import type { Agent } from './types.ts';
import { collectionRoutes, idParam } from '../routes-collection.ts';
import {
  SKILL_KINDS,
  blueprintView,
  contractView,
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
/** A skill as the API shows it. */
export type SkillView = z.infer<typeof SkillOut>;

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
/** A blueprint as the API shows it. */
export type BlueprintView = z.infer<typeof BlueprintOut>;

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
/** An agent as the API shows it. */
export type AgentView = z.infer<typeof AgentOut>;

const LedgerIn = z
  .object({ budget_limit: z.number().min(0).max(1e15).openapi({ description: 'Budget units (model tokens, input + output)' }) })
  .strict()
  .openapi('RegisterBudgetLedger');
const LedgerOut = z
  .object({
    agent_id: z.string(),
    budget_limit: z.number(),
    reserved: z.number(),
    held: z.number().openapi({
      description:
        'What edge devices hold of it: handed out in crew bundles and not yet charged by their journals or released (docs/edge.md "Budgets a device holds")',
    }),
    spent: z.number(),
    available: z.number().openapi({ description: 'budget_limit − reserved − held − spent, never below 0' }),
    unit: z.string(),
    created_at: IsoTime,
    updated_at: IsoTime,
  })
  .openapi('BudgetLedger');
/** A budget ledger as the API shows it. */
export type BudgetLedgerView = z.infer<typeof LedgerOut>;

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
/** A contract as the API shows it. */
export type ContractView = z.infer<typeof ContractOut>;

export function resourceRoutes(app: OpenAPIHono<AppEnv>, ctx: TeamsContext): void {
  const write = secured(PERMISSIONS.teamsWrite);
  const read = secured(PERMISSIONS.teamsRead);

  collectionRoutes(app, ctx, {
    kind: 'skills',
    tag: 'Skills',
    idName: 'skill_id',
    what: 'skill',
    out: SkillOut,
    outText: 'The skill',
    view: skillView,
    create: {
      summary: 'Create a skill',
      body: SkillIn,
      errors: [400, 401, 403, 409],
      make: async (auth, body) => skillView(await createSkill(ctx, auth.principal.id, body)),
    },
    list: { summary: 'List skills', name: 'SkillList', text: 'Skills', read: (q) => listSkills(ctx, q.limit, q.offset) },
    get: { summary: 'Get a skill', read: (id) => getSkill(ctx, id) },
  });

  collectionRoutes(app, ctx, {
    kind: 'blueprints',
    tag: 'Blueprints',
    idName: 'blueprint_id',
    what: 'blueprint',
    out: BlueprintOut,
    outText: 'The blueprint',
    view: blueprintView,
    create: {
      summary: 'Create a blueprint (skill references resolved)',
      body: BlueprintIn,
      errors: [400, 401, 403],
      make: async (auth, body) => blueprintView(await createBlueprint(ctx, auth, body)),
    },
    list: { summary: 'List blueprints', name: 'BlueprintList', text: 'Blueprints', read: (q) => listBlueprints(ctx, q.limit, q.offset) },
    get: { summary: 'Get a blueprint', read: (id) => getBlueprint(ctx, id) },
  });

  collectionRoutes(app, ctx, {
    kind: 'agents',
    tag: 'Agents',
    idName: 'agent_id',
    what: 'agent',
    out: AgentOut,
    outText: 'The agent',
    view: (a: Agent) => agentView(ctx, a),
    create: {
      summary: "Mint an agent: a full principal, gated by the standing-agent quota and the caller's authority to create principals",
      body: AgentIn,
      errors: [400, 401, 403, 409],
      make: async (auth, body) => agentView(ctx, await mintAgent(ctx, auth, body)),
    },
    list: { summary: 'List agents', name: 'AgentList', text: 'Agents', read: (q) => listAgents(ctx, q.limit, q.offset) },
    get: { summary: 'Get an agent', read: (id) => getAgent(ctx, id) },
  });
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

  collectionRoutes(app, ctx, {
    kind: 'contracts',
    tag: 'Contracts',
    idName: 'contract_id',
    what: 'contract',
    out: ContractOut,
    outText: 'The contract',
    view: contractView,
    create: {
      summary: 'Create a governing contract (CEL rules parsed at authoring)',
      body: ContractIn,
      errors: [400, 401, 403],
      make: async (auth, body) => contractView(await createContract(ctx, auth.principal.id, body)),
    },
    list: {
      summary: 'List governing contracts',
      name: 'ContractList',
      text: 'Contracts',
      read: (q) => listContracts(ctx, q.limit, q.offset),
    },
    get: { summary: 'Get a governing contract', read: (id) => getContract(ctx, id) },
  });
}
