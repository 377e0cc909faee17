/** Routes: formations, billets, the compiled graph, and crews. */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { authoritySchema } from '../../core/authority/schema.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import { notFound } from '../../core/errors.ts';
import type { AppEnv } from '../context.ts';
import { IsoTime, errorResponses, json, jsonBody, listSchema, pageOf, pageQuery, secured, slicePage } from '../http/openapi.ts';
import { countListed } from './resources.ts';
import { checkFormationCompiles, compileFor } from './compile.ts';
import type { TeamsContext } from './context.ts';
import { createCrew } from './crews.ts';
import {
  POLICIES,
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
  type Crew,
} from './formations.ts';

const P = '/api/public/v1/admin/agent-teams';
const anyObject = z.record(z.string(), z.unknown());
const idParam = (n: string) =>
  z.object({
    [n]: z
      .string()
      .max(64)
      .openapi({ param: { name: n, in: 'path' } }),
  });
const workspace = z
  .string()
  .min(1)
  .max(100)
  .regex(/^[A-Za-z0-9._-]+$/);

const FormationIn = z
  .object({
    name: z.string().min(1).max(100),
    coordination_policy: z.enum(POLICIES).default('sequential'),
    consensus_mode: z.enum(['majority', 'unanimity']).optional(),
    limits: z
      .object({
        max_steps: z.number().int().min(1).max(100_000).optional(),
        max_steps_per_seat: z.number().int().min(1).max(100_000).optional(),
        max_tool_rounds: z.number().int().min(0).max(100).optional(),
        default_max_tokens: z.number().int().min(1).max(1_000_000).optional(),
      })
      .strict()
      .optional()
      .openapi({ description: 'Step limits per run and per seat, so no run loops forever' }),
    topology: z
      .record(z.string().max(64), z.string().max(200))
      .optional()
      .openapi({ description: 'Labels the executing cell must carry (placement)' }),
    pre: z
      .array(anyObject)
      .max(32)
      .optional()
      .openapi({ description: 'Stages before the team: gate, human_approval, transform, timer, conditional, tool, skill, map, loop' }),
    post: z.array(anyObject).max(32).optional().openapi({ description: 'Stages after the team' }),
    prompt: z.string().max(20_000).optional().openapi({ description: 'Instruction given to every seat' }),
    workspace_id: workspace.optional(),
  })
  .strict()
  .openapi('CreateFormation');
const FormationOut = z
  .object({
    formation_id: z.string(),
    name: z.string(),
    coordination_policy: z.string(),
    created_at: IsoTime,
    updated_at: IsoTime,
    created_by: z.string(),
  })
  .passthrough()
  .openapi('Formation');

const BilletIn = z
  .object({
    role_label: z.string().min(1).max(100),
    required_skills: z.array(z.string().max(120)).max(64).openapi({ description: 'skill:<name> references' }),
    reports_to: z
      .string()
      .max(64)
      .nullable()
      .optional()
      .openapi({ description: 'A billet of the same formation; its cap must cover this one' }),
    authority_cap: authoritySchema,
  })
  .strict()
  .openapi('CreateBillet');
const BilletOut = z
  .object({
    billet_id: z.string(),
    formation_id: z.string(),
    position: z.number(),
    role_label: z.string(),
    required_skills: z.array(z.string()),
    reports_to: z.string().nullable(),
    authority_cap: anyObject,
    created_at: IsoTime,
    created_by: z.string(),
  })
  .openapi('Billet');

const CrewIn = z
  .object({
    formation_id: z.string().max(64),
    assignments: z.record(z.string().max(64), z.string().max(64)).openapi({ description: 'billet_id -> agent_id, one for every billet' }),
    name: z.string().min(1).max(100).optional(),
    workspace_id: workspace.optional().openapi({ description: "Workspace of the crew's tools (default: the formation's, else 'default')" }),
  })
  .strict()
  .openapi('CreateCrew');
const CrewOut = z
  .object({
    crew_id: z.string(),
    formation_id: z.string(),
    name: z.string(),
    assignments: z.record(z.string(), z.string()),
    workspace_id: z.string(),
    graph_hash: z.string(),
    created_at: IsoTime,
    created_by: z.string(),
  })
  .openapi('Crew');

const GraphOut = z
  .object({
    formation_id: z.string(),
    crew_id: z.string().nullable(),
    graph_hash: z.string(),
    formation_hash: z.string(),
    graph: anyObject,
  })
  .openapi('CompiledGraph');

export function formationRoutes(app: OpenAPIHono<AppEnv>, ctx: TeamsContext): void {
  const write = secured(PERMISSIONS.teamsWrite);
  const read = secured(PERMISSIONS.teamsRead);

  app.openapi(
    createRoute({
      method: 'post',
      path: `${P}/formations`,
      tags: ['Formations'],
      'x-status': 'Live',
      summary: 'Create a formation',
      ...write,
      request: { body: jsonBody(FormationIn) },
      responses: { 201: json(FormationOut, 'The formation'), ...errorResponses(400, 401, 403) },
    }),
    async (c) => {
      const body = c.req.valid('json');
      const clean = JSON.parse(JSON.stringify(body)) as Parameters<typeof createFormation>[2];
      const f = await createFormation(ctx, c.get('auth').principal.id, clean, (x) => checkFormationCompiles(ctx, x));
      return c.json(formationView(f) as z.infer<typeof FormationOut>, 201);
    },
  );
  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/formations`,
      tags: ['Formations'],
      'x-status': 'Live',
      summary: 'List formations',
      ...read,
      request: { query: pageQuery(100, 1000) },
      responses: {
        200: json(listSchema('formations', FormationOut, 'FormationList'), 'Formations'),
        ...errorResponses(400, 401, 403),
      },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const formations = (await listFormations(ctx, q.limit, q.offset)).map(formationView);
      return c.json({ formations, ...pageOf(q, await countListed(ctx, 'formations')) } as never, 200);
    },
  );
  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/formations/{formation_id}`,
      tags: ['Formations'],
      'x-status': 'Live',
      summary: 'Get a formation',
      ...read,
      request: { params: idParam('formation_id') },
      responses: { 200: json(FormationOut, 'The formation'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const f = await getFormation(ctx, c.req.valid('param')['formation_id']!);
      if (!f) throw notFound('formation');
      return c.json(formationView(f) as z.infer<typeof FormationOut>, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: `${P}/formations/{formation_id}/billets`,
      tags: ['Formations'],
      'x-status': 'Live',
      summary: "Add a billet; a cap outside its manager's is rejected naming the fields",
      ...write,
      request: { params: idParam('formation_id'), body: jsonBody(BilletIn) },
      responses: { 201: json(BilletOut, 'The billet'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const b = await addBillet(ctx, c.get('auth'), c.req.valid('param')['formation_id']!, c.req.valid('json'));
      return c.json(billetView(b) as z.infer<typeof BilletOut>, 201);
    },
  );
  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/formations/{formation_id}/billets`,
      tags: ['Formations'],
      'x-status': 'Live',
      summary: "A formation's billets in order",
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
      if (!(await getFormation(ctx, id))) throw notFound('formation');
      const { items, total } = slicePage(await listBillets(ctx, id), q);
      return c.json({ billets: items.map(billetView), ...pageOf(q, total) } as never, 200);
    },
  );
  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/formations/{formation_id}/billets/{billet_id}`,
      tags: ['Formations'],
      'x-status': 'Live',
      summary: 'Get a billet',
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
      if (!b || b.formation_id !== formation_id) throw notFound('billet');
      return c.json(billetView(b) as z.infer<typeof BilletOut>, 200);
    },
  );
  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/formations/{formation_id}/graph`,
      tags: ['Formations'],
      'x-status': 'Live',
      summary: 'The compiled execution graph and its hash, without running (optionally bound to a crew)',
      ...read,
      request: { params: idParam('formation_id'), query: z.object({ crew_id: z.string().max(64).optional() }) },
      responses: { 200: json(GraphOut, 'Graph and hash'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const id = c.req.valid('param')['formation_id']!;
      const f = await getFormation(ctx, id);
      if (!f) throw notFound('formation');
      const crewId = c.req.valid('query').crew_id;
      let crew: Crew | undefined;
      if (crewId) {
        crew = await getCrew(ctx, crewId);
        if (!crew || crew.formation_id !== id) throw notFound('crew');
      }
      const r = await compileFor(ctx, f, crew);
      return c.json(
        {
          formation_id: id,
          crew_id: crew?.crew_id ?? null,
          graph_hash: r.graphHash,
          formation_hash: r.formationHash,
          graph: r.graph as unknown as Record<string, unknown>,
        },
        200,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: `${P}/crews`,
      tags: ['Crews'],
      'x-status': 'Live',
      summary: 'Instantiate a crew: an agent bound to every billet (the crew compiles, or is refused)',
      ...write,
      request: { body: jsonBody(CrewIn) },
      responses: { 201: json(CrewOut, 'The crew'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const body = c.req.valid('json');
      const f = await getFormation(ctx, body.formation_id);
      if (!f) throw notFound('formation');
      const { crew, graphHash } = await createCrew(ctx, c.get('auth'), f, body);
      return c.json({ ...crewView(crew), graph_hash: graphHash }, 201);
    },
  );
  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/crews`,
      tags: ['Crews'],
      'x-status': 'Live',
      summary: 'List crews',
      ...read,
      request: { query: pageQuery(100, 1000) },
      responses: {
        200: json(listSchema('crews', CrewOut.partial({ graph_hash: true }), 'CrewList'), 'Crews'),
        ...errorResponses(400, 401, 403),
      },
    }),
    async (c) => {
      const q = c.req.valid('query');
      return c.json({ crews: (await listCrews(ctx, q.limit, q.offset)).map(crewView), ...pageOf(q, await countListed(ctx, 'crews')) }, 200);
    },
  );
  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/crews/{crew_id}`,
      tags: ['Crews'],
      'x-status': 'Live',
      summary: 'Get a crew with its current graph hash',
      ...read,
      request: { params: idParam('crew_id') },
      responses: { 200: json(CrewOut, 'The crew'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const crew = await getCrew(ctx, c.req.valid('param')['crew_id']!);
      if (!crew) throw notFound('crew');
      const f = await getFormation(ctx, crew.formation_id);
      let graphHash = 'uncompilable';
      if (f) {
        try {
          graphHash = (await compileFor(ctx, f, crew)).graphHash;
        } catch {
          graphHash = 'uncompilable';
        }
      }
      return c.json({ ...crewView(crew), graph_hash: graphHash }, 200);
    },
  );
}
