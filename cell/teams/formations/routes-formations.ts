/** Routes: formations, billets, the compiled graph, and crews (their changes, versions and deletes: routes-formation-lifecycle.ts). */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { authoritySchema } from '../../../core/authority/schema.ts';
import { PERMISSIONS } from '../../../core/permissions.ts';
import { notFound } from '../../../core/errors.ts';
import { MAX_ATTEMPTS, MAX_BACKOFF_MS, MAX_STEP_TIMEOUT_MS, RETRY_REASONS } from '../../../core/engine/policy.ts';
import type { AppEnv } from '../../context.ts';
import { IsoTime, errorResponses, json, jsonBody, listSchema, pageOf, pageQuery, secured, slicePage } from '../../http/openapi.ts';
import { checkFormationCompiles, compileFor, inlineStageSkills } from './compile.ts';
import type { TeamsContext } from '../context.ts';
import { collectionRoutes, idParam } from '../routes-collection.ts';
import { createCrew, crewGraphHash } from './crews.ts';
import { POLICIES, type Crew, type Formation } from './types.ts';
import {
  addBillet,
  billetView,
  createFormation,
  crewView,
  formationView,
  getBillet,
  getCrew,
  getFormation,
  listBillets,
  listCrews,
  listFormations,
} from './formations.ts';

const P = '/api/public/v1/admin/agent-teams';
const anyObject = z.record(z.string(), z.unknown());
export const workspace = z
  .string()
  .min(1)
  .max(100)
  .regex(/^[A-Za-z0-9._-]+$/);

/** The fields of a formation as authored (create and PATCH share them). */
export const formationFields = {
  consensus_mode: z.enum(['majority', 'unanimity']),
  limits: z
    .object({
      max_steps: z.number().int().min(1).max(100_000).optional(),
      max_steps_per_seat: z.number().int().min(1).max(100_000).optional(),
      max_tool_rounds: z.number().int().min(0).max(100).optional(),
      default_max_tokens: z.number().int().min(1).max(1_000_000).optional(),
    })
    .strict()
    .openapi({ description: 'Step limits per run and per seat, so no run loops forever' }),
  topology: z.record(z.string().max(64), z.string().max(200)).openapi({ description: 'Labels the executing cell must carry (placement)' }),
  pre: z.array(anyObject).max(32).openapi({
    description:
      'Stages before the team: gate, human_approval, transform, timer, conditional, tool, skill, map, loop. A skill stage may name `{ "skill": "skill:<name>" }`: the version stores the skill as it is now.',
  }),
  post: z.array(anyObject).max(32).openapi({ description: 'Stages after the team' }),
  prompt: z.string().max(20_000).openapi({ description: 'Instruction given to every seat' }),
  workspace_id: workspace,
  purpose: z
    .string()
    .min(1)
    .max(2_000)
    .openapi({ description: "What the team is for: the description of its crews' MCP tools (docs/mcp.md); not part of the graph" }),
  input_schema: anyObject.openapi({
    description:
      "The input a run takes, a JSON Schema subset (docs/jobs.md, input_schema): checked when a run starts (400 invalid_input) and published as the crews' MCP tool input schema; not part of the graph",
  }),
};

const FormationIn = z
  .object({
    name: z.string().min(1).max(100),
    coordination_policy: z.enum(POLICIES).default('sequential'),
    consensus_mode: formationFields.consensus_mode.optional(),
    limits: formationFields.limits.optional(),
    topology: formationFields.topology.optional(),
    pre: formationFields.pre.optional(),
    post: formationFields.post.optional(),
    prompt: formationFields.prompt.optional(),
    workspace_id: formationFields.workspace_id.optional(),
    purpose: formationFields.purpose.optional(),
    input_schema: formationFields.input_schema.optional(),
  })
  .strict()
  .openapi('CreateFormation');
export const FormationOut = z
  .object({
    formation_id: z.string(),
    version: z.number().int().openapi({ description: 'The latest version (every change makes a new one)' }),
    name: z.string(),
    coordination_policy: z.string(),
    created_at: IsoTime,
    updated_at: IsoTime,
    created_by: z.string(),
  })
  .passthrough()
  .openapi('Formation');
/** A formation as the API shows it. */
export type FormationView = z.infer<typeof FormationOut>;

/** The fields of a billet as authored (create and PATCH share them). */
export const billetFields = {
  role_label: z.string().min(1).max(100),
  required_skills: z.array(z.string().max(120)).max(64).openapi({ description: 'skill:<name> references' }),
  reports_to: z.string().max(64).nullable().openapi({ description: 'A billet of the same formation; its cap must cover this one' }),
  authority_cap: authoritySchema,
  timeout_ms: z
    .number()
    .int()
    .min(1)
    .max(MAX_STEP_TIMEOUT_MS)
    .optional()
    .openapi({ description: "Each model and tool call of the seat's steps is cancelled after this many ms; the step fails step_timeout" }),
  retry: z
    .object({
      max_attempts: z.number().int().min(2).max(MAX_ATTEMPTS),
      backoff_ms: z.number().int().min(0).max(3_600_000),
      max_backoff_ms: z.number().int().min(0).max(MAX_BACKOFF_MS),
      on: z.array(z.enum(RETRY_REASONS)).min(1).max(RETRY_REASONS.length),
    })
    .strict()
    .optional()
    .openapi({ description: "Retry policy of the seat's calls: waits backoff_ms * 2^(n-1), at most max_backoff_ms (docs/agent-teams.md)" }),
  tool_choice: z
    .union([z.enum(['auto', 'none', 'required']), z.object({ name: z.string().min(1).max(200) }).strict()])
    .optional()
    .openapi({
      description:
        "Whether the first model call of the seat's agent step may (auto, the default), must (required, or { name } of a granted tool) or must not (none) call a tool; later rounds of the step are auto (docs/agent-teams.md)",
    }),
};

const BilletIn = z
  .object({
    role_label: billetFields.role_label,
    required_skills: billetFields.required_skills,
    reports_to: billetFields.reports_to.optional(),
    authority_cap: billetFields.authority_cap,
    timeout_ms: billetFields.timeout_ms,
    retry: billetFields.retry,
    tool_choice: billetFields.tool_choice,
  })
  .strict()
  .openapi('CreateBillet');
export const BilletOut = z
  .object({
    billet_id: z.string(),
    formation_id: z.string(),
    formation_version: z.number().int().openapi({ description: 'The formation version this view is of (a write: the version it made)' }),
    position: z.number(),
    role_label: z.string(),
    required_skills: z.array(z.string()),
    reports_to: z.string().nullable(),
    authority_cap: anyObject,
    timeout_ms: z.number().optional(),
    retry: billetFields.retry,
    tool_choice: billetFields.tool_choice,
    created_at: IsoTime,
    created_by: z.string(),
    updated_at: IsoTime,
    updated_by: z.string(),
  })
  .openapi('Billet');
/** A billet as the API shows it. */
export type BilletView = z.infer<typeof BilletOut>;

const CrewIn = z
  .object({
    formation_id: z.string().max(64),
    formation_version: z.number().int().min(1).optional().openapi({ description: "The version to pin (default the formation's latest)" }),
    assignments: z.record(z.string().max(64), z.string().max(64)).openapi({ description: 'billet_id -> agent_id, one for every billet' }),
    name: z.string().min(1).max(100).optional(),
    workspace_id: workspace.optional().openapi({ description: "Workspace of the crew's tools (default: the formation's, else 'default')" }),
  })
  .strict()
  .openapi('CreateCrew');
export const CrewOut = z
  .object({
    crew_id: z.string(),
    formation_id: z.string(),
    formation_version: z.number().int().openapi({ description: 'The formation version the crew runs (POST …/upgrade moves it)' }),
    name: z.string(),
    assignments: z.record(z.string(), z.string()),
    workspace_id: z.string(),
    graph_hash: z.string().openapi({ description: "The crew's compiled graph hash now; `uncompilable` when it does not compile" }),
    created_at: IsoTime,
    created_by: z.string(),
  })
  .openapi('Crew');
/** A crew as the API shows it. */
export type CrewView = z.infer<typeof CrewOut>;

const GraphOut = z
  .object({
    formation_id: z.string(),
    formation_version: z.number().int(),
    crew_id: z.string().nullable(),
    graph_hash: z.string(),
    formation_hash: z.string(),
    graph: anyObject,
  })
  .openapi('CompiledGraph');

export function formationRoutes(app: OpenAPIHono<AppEnv>, ctx: TeamsContext): void {
  const write = secured(PERMISSIONS.teamsWrite);
  const read = secured(PERMISSIONS.teamsRead);

  collectionRoutes(app, ctx, {
    kind: 'formations',
    tag: 'Formations',
    idName: 'formation_id',
    what: 'formation',
    out: FormationOut,
    outText: 'The formation',
    view: formationView,
    create: {
      summary: 'Create a formation',
      body: FormationIn,
      errors: [400, 401, 403],
      make: async (auth, body) => {
        const clean = await inlineStageSkills(ctx, JSON.parse(JSON.stringify(body)) as Parameters<typeof createFormation>[2]);
        return formationView(await createFormation(ctx, auth.principal.id, clean, (x) => checkFormationCompiles(ctx, x)));
      },
    },
    list: { summary: 'List formations', name: 'FormationList', text: 'Formations', read: (q) => listFormations(ctx, q.limit, q.offset) },
    get: { summary: 'Get a formation', read: (id) => getFormation(ctx, id) },
  });

  app.openapi(
    createRoute({
      method: 'post',
      path: `${P}/formations/{formation_id}/billets`,
      tags: ['Formations'],
      'x-status': 'Live',
      summary: "Add a billet (a new formation version); a cap outside its manager's is rejected naming the fields",
      ...write,
      request: { params: idParam('formation_id'), body: jsonBody(BilletIn) },
      responses: { 201: json(BilletOut, 'The billet'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const r = await addBillet(ctx, c.get('auth'), c.req.valid('param')['formation_id']!, c.req.valid('json'));
      return c.json(billetView(r.billet, r.version), 201);
    },
  );
  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/formations/{formation_id}/billets`,
      tags: ['Formations'],
      'x-status': 'Live',
      summary: "The billets of a formation's latest version, in order",
      ...read,
      request: { params: idParam('formation_id'), query: pageQuery(100, 1000) },
      responses: {
        200: json(listSchema('billets', BilletOut, 'BilletList'), 'Billets'),
        ...errorResponses(400, 401, 403, 404),
      },
    }),
    async (c) => {
      const id = c.req.valid('param')['formation_id']!;
      const q = c.req.valid('query');
      const f = await getFormation(ctx, id);
      if (!f) throw notFound('formation');
      const { items, total } = slicePage(await listBillets(ctx, f), q);
      return c.json({ billets: items.map((b) => billetView(b, f.version)), ...pageOf(q, total) }, 200);
    },
  );
  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/formations/{formation_id}/billets/{billet_id}`,
      tags: ['Formations'],
      'x-status': 'Live',
      summary: "Get a billet of the formation's latest version",
      ...read,
      request: {
        params: z.object({
          formation_id: z
            .string()
            .max(64)
            .openapi({ param: { name: 'formation_id', in: 'path' } }),
          billet_id: z
            .string()
            .max(64)
            .openapi({ param: { name: 'billet_id', in: 'path' } }),
        }),
      },
      responses: { 200: json(BilletOut, 'The billet'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const { formation_id, billet_id } = c.req.valid('param');
      const b = await getBillet(ctx, billet_id);
      const f = await getFormation(ctx, formation_id);
      if (!b || !f || b.formation_id !== formation_id) throw notFound('billet');
      return c.json(billetView(b, f.version), 200);
    },
  );
  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/formations/{formation_id}/graph`,
      tags: ['Formations'],
      'x-status': 'Live',
      summary:
        "The compiled execution graph and its hash, without running: of the latest version, or `version`; bound to a crew's agents with `crew_id` (default version: the crew's), so a version can be tried before an upgrade",
      ...read,
      request: {
        params: idParam('formation_id'),
        query: z.object({ crew_id: z.string().max(64).optional(), version: z.coerce.number().int().min(1).max(1_000_000_000).optional() }),
      },
      responses: { 200: json(GraphOut, 'Graph and hash'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const id = c.req.valid('param')['formation_id']!;
      const { crew_id: crewId, version } = c.req.valid('query');
      let crew: Crew | undefined;
      if (crewId) {
        crew = await getCrew(ctx, crewId);
        if (!crew || crew.formation_id !== id) throw notFound('crew');
      }
      const f: Formation | undefined = await getFormation(ctx, id, version ?? crew?.formation_version);
      if (!f) throw notFound(version === undefined ? 'formation' : 'formation version');
      const r = await compileFor(ctx, f, crew ? { ...crew, formation_version: f.version } : undefined);
      return c.json(
        {
          formation_id: id,
          formation_version: f.version,
          crew_id: crew?.crew_id ?? null,
          graph_hash: r.graphHash,
          formation_hash: r.formationHash,
          graph: r.graph as unknown as Record<string, unknown>,
        },
        200,
      );
    },
  );

  collectionRoutes(app, ctx, {
    kind: 'crews',
    tag: 'Crews',
    idName: 'crew_id',
    what: 'crew',
    out: CrewOut,
    outText: 'The crew',
    view: async (crew: Crew) => ({ ...crewView(crew), graph_hash: (await crewGraphHash(ctx, crew)) ?? 'uncompilable' }),
    create: {
      summary:
        "Instantiate a crew: an agent bound to every billet of the formation's latest version (or `formation_version`), which the crew pins; the crew compiles, or is refused",
      body: CrewIn,
      errors: [400, 401, 403, 404],
      make: async (auth, body) => {
        const f = await getFormation(ctx, body.formation_id, body.formation_version);
        if (!f) throw notFound(body.formation_version === undefined ? 'formation' : 'formation version');
        const { crew, graphHash } = await createCrew(ctx, auth, f, body);
        return { ...crewView(crew), graph_hash: graphHash };
      },
    },
    list: {
      summary: 'List crews',
      item: CrewOut.partial({ graph_hash: true }),
      view: crewView,
      name: 'CrewList',
      text: 'Crews',
      read: (q) => listCrews(ctx, q.limit, q.offset),
    },
    get: { summary: 'Get a crew with its current graph hash', read: (id) => getCrew(ctx, id) },
  });
}
