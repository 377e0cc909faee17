/**
 * Routes: changing and deleting formations, billets and crews; a formation's
 * versions; upgrading a crew to a newer version. Every change of a formation
 * or a billet makes a new version (versions.ts); crews pin theirs (crews.ts).
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { PERMISSIONS } from '../../../core/permissions.ts';
import type { AppEnv } from '../../context.ts';
import { immutableField, refuseImmutable } from '../../http/immutable.ts';
import { IsoTime, errorResponses, json, jsonBody, pageFields, pageOf, pageQuery, secured } from '../../http/openapi.ts';
import type { TeamsContext } from '../context.ts';
import { crewGraphHash, deleteCrew, patchCrew, upgradeCrew } from './crews.ts';
import { POLICIES } from './types.ts';
import { billetView, crewView, formationView, getCrew, getFormation } from './formations.ts';
import { BilletOut, CrewOut, FormationOut, billetFields, formationFields, workspace } from './routes-formations.ts';
import { idParam } from '../routes-collection.ts';
import { CHANGE_KINDS, deleteFormation, getVersion, listVersions, removeBillet, updateBillet, updateFormation } from './versions.ts';
import { iso } from '../schema.ts';
import { notFound } from '../../../core/errors.ts';

const P = '/api/public/v1/admin/agent-teams';
const pathId = (n: string) =>
  z
    .string()
    .max(64)
    .openapi({ param: { name: n, in: 'path' } });

const FormationPatch = z
  .object({
    name: z.string().min(1).max(100).optional(),
    coordination_policy: z.enum(POLICIES).optional(),
    consensus_mode: formationFields.consensus_mode.nullable().optional(),
    limits: formationFields.limits.nullable().optional(),
    topology: formationFields.topology.nullable().optional(),
    pre: formationFields.pre.nullable().optional(),
    post: formationFields.post.nullable().optional(),
    prompt: formationFields.prompt.nullable().optional(),
    workspace_id: formationFields.workspace_id.nullable().optional(),
    purpose: formationFields.purpose.nullable().optional(),
    input_schema: formationFields.input_schema.nullable().optional(),
  })
  .strict()
  .openapi('UpdateFormation', {
    description: 'Fields to change; `null` removes an optional field. A change makes a new version; no change makes none.',
  });

const BilletPatch = z
  .object({
    role_label: billetFields.role_label.optional(),
    required_skills: billetFields.required_skills.optional(),
    reports_to: billetFields.reports_to.optional(),
    authority_cap: billetFields.authority_cap.optional(),
    timeout_ms: billetFields.timeout_ms.nullable(),
    retry: billetFields.retry.nullable(),
    tool_choice: billetFields.tool_choice.nullable(),
    formation_id: immutableField('a billet belongs to its formation; add one to the other formation'),
    position: immutableField('a billet keeps its seat order; remove it and add one to move it to the end'),
  })
  .strict()
  .openapi('UpdateBillet');
const BILLET_IMMUTABLE = {
  formation_id: 'a billet belongs to its formation; add one to the other formation',
  position: 'a billet keeps its seat order; remove it and add one to move it to the end',
};

const VersionSummary = z
  .object({
    version: z.number().int(),
    change: z
      .object({
        kind: z.enum(CHANGE_KINDS),
        billet_id: z.string().nullable(),
      })
      .openapi({ description: 'What made this version (`migrated`: the formation as it was when versions were introduced)' }),
    created_at: IsoTime,
    created_by: z.string(),
  })
  .openapi('FormationVersionSummary');

const VersionOut = FormationOut.extend({
  billets: z.array(BilletOut),
  change: VersionSummary.shape.change,
  formation_hash: z
    .string()
    .nullable()
    .openapi({ description: 'Content hash of this version; null when it does not compile alone (no billets)' }),
  version_created_at: IsoTime,
  version_created_by: z.string(),
}).openapi('FormationVersion');

const CrewPatch = z
  .object({
    name: z.string().min(1).max(100).optional(),
    workspace_id: workspace.optional(),
    assignments: z
      .record(z.string().max(64), z.string().max(64))
      .optional()
      .openapi({ description: 'billet_id -> agent_id to bind (merged into the current assignments); the crew recompiles' }),
    formation_id: immutableField('a crew belongs to its formation; create a crew of the other formation'),
    formation_version: immutableField('upgrade the crew: POST …/crews/{crew_id}/upgrade'),
  })
  .strict()
  .openapi('UpdateCrew');
const CREW_IMMUTABLE = {
  formation_id: 'a crew belongs to its formation; create a crew of the other formation',
  formation_version: 'upgrade the crew: POST …/crews/{crew_id}/upgrade',
};

const UpgradeIn = z
  .object({
    formation_version: z.number().int().min(1).optional().openapi({ description: "A version newer than the crew's (default the latest)" }),
    assignments: z
      .record(z.string().max(64), z.string().max(64))
      .optional()
      .openapi({ description: 'Agents for billets the version adds (or to rebind); billets it removed are unbound' }),
  })
  .strict()
  .openapi('UpgradeCrew');

export function formationLifecycleRoutes(app: OpenAPIHono<AppEnv>, ctx: TeamsContext): void {
  const write = secured(PERMISSIONS.teamsWrite);
  const read = secured(PERMISSIONS.teamsRead);

  app.openapi(
    createRoute({
      method: 'patch',
      path: `${P}/formations/{formation_id}`,
      tags: ['Formations'],
      'x-status': 'Live',
      summary: 'Change a formation (a new version; crews keep theirs until upgraded)',
      ...write,
      request: { params: idParam('formation_id'), body: jsonBody(FormationPatch) },
      responses: { 200: json(FormationOut, 'The formation at its latest version'), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const r = await updateFormation(ctx, c.get('auth'), c.req.valid('param')['formation_id']!, c.req.valid('json'));
      return c.json(formationView(r.formation), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: `${P}/formations/{formation_id}`,
      tags: ['Formations'],
      'x-status': 'Live',
      summary: 'Delete a formation and all its versions (409 in_use while a crew uses it, naming the crews)',
      ...write,
      request: { params: idParam('formation_id') },
      responses: { 200: json(FormationOut, 'The formation as it was'), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const id = c.req.valid('param')['formation_id']!;
      const f = await getFormation(ctx, id);
      if (!f) throw notFound('formation');
      await deleteFormation(ctx, c.get('auth'), id);
      return c.json(formationView(f), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/formations/{formation_id}/versions`,
      tags: ['Formations'],
      'x-status': 'Live',
      summary: "A formation's versions, oldest first (`limit` 1 to 1000, default 100)",
      ...read,
      request: { params: idParam('formation_id'), query: pageQuery(100, 1000) },
      responses: {
        200: json(
          z
            .object({
              formation_id: z.string(),
              versions: z.array(VersionSummary),
              ...pageFields,
            })
            .openapi('FormationVersionList'),
          'Versions',
        ),
        ...errorResponses(400, 401, 403, 404),
      },
    }),
    async (c) => {
      const id = c.req.valid('param')['formation_id']!;
      const q = c.req.valid('query');
      const r = await listVersions(ctx, id, q.limit, q.offset);
      const versions = r.items.map((v) => ({
        ...v,
        created_at: iso(v.created_at),
      }));
      return c.json({ formation_id: id, versions, ...pageOf(q, r.total) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/formations/{formation_id}/versions/{version}`,
      tags: ['Formations'],
      'x-status': 'Live',
      summary: 'One version of a formation as it was (immutable): its fields, its billets, what changed, its formation hash',
      ...read,
      request: {
        params: z.object({
          formation_id: pathId('formation_id'),
          version: z.coerce
            .number()
            .int()
            .min(1)
            .max(1_000_000_000)
            .openapi({ param: { name: 'version', in: 'path' } }),
        }),
      },
      responses: { 200: json(VersionOut, 'The version'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const { formation_id, version } = c.req.valid('param');
      const v = await getVersion(ctx, formation_id, version);
      return c.json(
        {
          ...formationView(v.formation),
          billets: v.billets.map((b) => billetView(b, version)),
          change: v.summary.change,
          formation_hash: v.formationHash,
          version_created_at: iso(v.summary.created_at),
          version_created_by: v.summary.created_by,
        },
        200,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'patch',
      path: `${P}/formations/{formation_id}/billets/{billet_id}`,
      tags: ['Formations'],
      'x-status': 'Live',
      summary:
        "Change a billet (a new version): the cap stays within the caller, its manager's cap, and covers its reports'; a new reports_to may not form a cycle",
      ...write,
      request: { params: z.object({ formation_id: pathId('formation_id'), billet_id: pathId('billet_id') }), body: jsonBody(BilletPatch) },
      responses: { 200: json(BilletOut, 'The billet as the new version has it'), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const { formation_id, billet_id } = c.req.valid('param');
      const body = c.req.valid('json');
      refuseImmutable(body, BILLET_IMMUTABLE);
      const r = await updateBillet(ctx, c.get('auth'), formation_id, billet_id, body);
      return c.json(billetView(r.billet, r.version), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: `${P}/formations/{formation_id}/billets/{billet_id}`,
      tags: ['Formations'],
      'x-status': 'Live',
      summary:
        'Remove a billet (a new version; 409 billet_has_reports while billets report to it, billet_seats_stage while a stage names it as its seat)',
      ...write,
      request: { params: z.object({ formation_id: pathId('formation_id'), billet_id: pathId('billet_id') }) },
      responses: { 200: json(FormationOut, 'The formation at the new version'), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const { formation_id, billet_id } = c.req.valid('param');
      return c.json(formationView(await removeBillet(ctx, c.get('auth'), formation_id, billet_id)), 200);
    },
  );

  const crewOut = (crew: Parameters<typeof crewView>[0], graphHash: string | null) => ({
    ...crewView(crew),
    graph_hash: graphHash ?? 'uncompilable',
  });

  app.openapi(
    createRoute({
      method: 'patch',
      path: `${P}/crews/{crew_id}`,
      tags: ['Crews'],
      'x-status': 'Live',
      summary:
        'Rename a crew, move its default workspace, or bind other agents (the crew recompiles, within the caller); the version changes only by upgrade',
      ...write,
      request: { params: idParam('crew_id'), body: jsonBody(CrewPatch) },
      responses: { 200: json(CrewOut, 'The crew'), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const body = c.req.valid('json');
      refuseImmutable(body, CREW_IMMUTABLE);
      const r = await patchCrew(ctx, c.get('auth'), c.req.valid('param')['crew_id']!, body);
      return c.json(crewOut(r.crew, r.graphHash), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: `${P}/crews/{crew_id}`,
      tags: ['Crews'],
      'x-status': 'Live',
      summary: 'Delete a crew (409 in_use while a run of it is live or a job definition names it); its past runs stay readable',
      ...write,
      request: { params: idParam('crew_id') },
      responses: { 200: json(CrewOut, 'The crew as it was'), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const id = c.req.valid('param')['crew_id']!;
      const crew = await getCrew(ctx, id);
      if (!crew) throw notFound('crew');
      const graphHash = await crewGraphHash(ctx, crew);
      await deleteCrew(ctx, c.get('auth'), id);
      return c.json(crewOut(crew, graphHash), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: `${P}/crews/{crew_id}/upgrade`,
      tags: ['Crews'],
      'x-status': 'Live',
      summary:
        'Move a crew to a newer version of its formation (default the latest) and recompile it: refused when it no longer compiles (400), binds more than the caller holds (403), or is not newer (409); runs in flight keep their version',
      ...write,
      request: { params: idParam('crew_id'), body: jsonBody(UpgradeIn) },
      responses: { 200: json(CrewOut, 'The crew at its new version'), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const r = await upgradeCrew(ctx, c.get('auth'), c.req.valid('param')['crew_id']!, c.req.valid('json'));
      return c.json(crewOut(r.crew, r.graphHash), 200);
    },
  );
}
