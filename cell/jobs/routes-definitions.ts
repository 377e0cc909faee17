/**
 * Jobs definitions routes (spec: "Jobs definitions"): create, list, get,
 * update, enable, disable, soft delete; and run now (run-now.ts: one run as the caller). Reads need
 * system.orchestration.admin.read, writes .write. Each change is audited and
 * re-arms the scheduler.
 *
 * Create, update and enable make the caller the definition's author, with
 * the caller's effective authority recorded (definition-authority.ts), within
 * the per-principal quota (409 definition_quota_reached); crons firing more
 * often than the cell's minimum interval are refused (400 cron_too_frequent).
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { notFound } from '../../core/errors.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import type { AppEnv, AuthContext } from '../context.ts';
import { errorResponses, idPath, json, jsonBody, listSchema, pageOf, pageQuery, secured } from '../http/openapi.ts';
import type { JobsContext } from './context.ts';
import { assertDefinitionSeats, assertMayAuthor, assertWithinQuota, authorRoot } from './definition-authority.ts';
import { assertNotDeleted, definitionView, newScheduleId, nextFireAfter, parseCron, validateTemplate } from './definitions.ts';
import * as repo from './repository.ts';
import { runDefinitionNow } from './run-now.ts';
import type { Scheduler } from './scheduler.ts';
import { CreateDefinitionSchema, DefinitionSchema, PatchDefinitionSchema } from './shapes.ts';

const TAG = 'Job definitions';
const BASE = '/api/public/v1/admin/jobs/definitions';
const IdParam = z.object({ schedule_id: idPath('schedule_id', 'sch_0123456789abcdef0123') });

const create = createRoute({
  method: 'post',
  path: BASE,
  tags: [TAG],
  'x-status': 'Live',
  ...secured(PERMISSIONS.jobsWrite),
  summary: 'Create a definition (a scheduled job)',
  description:
    "A typed `{job_type, spec}` plus `cron` (5 fields, or 6 with seconds first) and `timezone`. The cron and the template are validated now: agent needs a graph_id this cell knows (a formation_id is refused), team needs a crew_id (a formation_id alone is refused); a cron firing more often than the cell's minimum interval is refused (cron_too_frequent). The definition acts as the caller, within the caller's effective authority now (agent and team definitions need agent_teams.write too), and stops when the caller is deactivated or loses that authority. At most the cell's definition quota of live definitions act as one principal (409 definition_quota_reached).",
  request: { body: jsonBody(CreateDefinitionSchema) },
  responses: { 201: json(DefinitionSchema, 'The definition'), ...errorResponses(400, 401, 403, 409) },
});
const list = createRoute({
  method: 'get',
  path: BASE,
  tags: [TAG],
  'x-status': 'Live',
  ...secured(PERMISSIONS.jobsRead),
  summary: 'List definitions',
  description: 'In creation order. Soft-deleted definitions only with `include_deleted=true`. `limit` 1 to 1000 (default 100).',
  request: { query: pageQuery(100, 1000).extend({ include_deleted: z.enum(['true', 'false']).default('false') }) },
  responses: {
    200: json(listSchema('items', DefinitionSchema, 'JobDefinitionList'), 'A page of definitions'),
    ...errorResponses(400, 401, 403),
  },
});
const get = createRoute({
  method: 'get',
  path: `${BASE}/{schedule_id}`,
  tags: [TAG],
  'x-status': 'Live',
  ...secured(PERMISSIONS.jobsRead),
  summary: 'Get a definition',
  request: { params: IdParam },
  responses: { 200: json(DefinitionSchema, 'The definition (soft-deleted ones say deleted: true)'), ...errorResponses(400, 401, 403, 404) },
});
const patch = createRoute({
  method: 'patch',
  path: `${BASE}/{schedule_id}`,
  tags: [TAG],
  'x-status': 'Live',
  ...secured(PERMISSIONS.jobsWrite),
  summary: 'Update a definition',
  description:
    "Changes name, workspace, spec, cron, timezone or catch_up; everything is validated again. The next fire time is recomputed from now. The caller becomes the definition's author (it acts as the caller from now on).",
  request: { params: IdParam, body: jsonBody(PatchDefinitionSchema) },
  responses: { 200: json(DefinitionSchema, 'The definition'), ...errorResponses(400, 401, 403, 404, 409) },
});
const enable = createRoute({
  method: 'post',
  path: `${BASE}/{schedule_id}/enable`,
  tags: [TAG],
  'x-status': 'Live',
  ...secured(PERMISSIONS.jobsWrite),
  summary: 'Enable a definition (idempotent)',
  description:
    "Its next fire time is computed from now: fires missed while disabled are not run. The caller becomes the definition's author (it acts as the caller from now on).",
  request: { params: IdParam },
  responses: { 200: json(DefinitionSchema, 'The definition'), ...errorResponses(400, 401, 403, 404, 409) },
});
const disable = createRoute({
  method: 'post',
  path: `${BASE}/{schedule_id}/disable`,
  tags: [TAG],
  'x-status': 'Live',
  ...secured(PERMISSIONS.jobsWrite),
  summary: 'Disable a definition (idempotent)',
  description: 'A disabled definition never fires.',
  request: { params: IdParam },
  responses: { 200: json(DefinitionSchema, 'The definition'), ...errorResponses(400, 401, 403, 404, 409) },
});
const del = createRoute({
  method: 'delete',
  path: `${BASE}/{schedule_id}`,
  tags: [TAG],
  'x-status': 'Live',
  ...secured(PERMISSIONS.jobsWrite),
  summary: 'Soft-delete a definition (idempotent)',
  description: 'It never fires again and is listed only with include_deleted=true; its runs stay.',
  request: { params: IdParam },
  responses: { 200: json(DefinitionSchema, 'The deleted definition'), ...errorResponses(400, 401, 403, 404) },
});

const runNow = createRoute({
  method: 'post',
  path: `${BASE}/{schedule_id}/run`,
  tags: [TAG],
  'x-status': 'Live',
  ...secured(PERMISSIONS.jobsWrite),
  summary: 'Run a definition now, as the caller',
  description:
    "One run of the definition's template outside its cron (a manual fire), enabled or not. The run is the caller's: its requester is the caller, bounded by the caller's authority now, as if the caller had submitted the template (`POST /jobs/runs`, or a crew run for a team template): an agent or team template needs agent_teams.write too (403 missing_permission) and authority covering every seat of its crew (403 wider_than_caller). It records who fired it (`source: schedule:<schedule_id>`, `flags.fired_by`, `flags.manual: true`; audit `jobs.definition.run`) and changes nothing of the definition (next fire, fire count, last run). A deleted definition is 409 definition_deleted; a crew run refused before its first step is 409 with `details.run_id`; storage quotas as for a run.",
  request: { params: IdParam },
  responses: {
    202: json(
      z
        .object({
          run_id: z.string(),
          kind: z.enum(['job', 'crew']),
          state: z.string(),
          requester: z.string().openapi({ description: 'The caller, who fired it' }),
          schedule_id: z.string(),
          checked_cell_id: z.string(),
        })
        .openapi('JobDefinitionRun'),
      'The run was accepted and is queued',
    ),
    ...errorResponses(400, 401, 403, 404, 409),
  },
});

/** A definition as the shared-things rule sees it: it acts as its author (iam.assertMayActOnOwned). */
function definitionThing(d: { schedule_id: string; author_id: string }) {
  return { kind: 'definition', id: d.schedule_id, ownerId: d.author_id };
}

export function mountDefinitionRoutes(app: OpenAPIHono<AppEnv>, ctx: JobsContext, scheduler: () => Scheduler): void {
  const { core, iam } = ctx;
  const load = async (id: string) => {
    const d = await repo.definitionById(core.store, id);
    if (!d) throw notFound('definition');
    return d;
  };

  app.openapi(create, async (c) => {
    const b = c.req.valid('json');
    const auth = c.get('auth');
    await iam.assertNotDelegated(auth, { action: 'jobs.definition.create', target: b.name });
    assertMayAuthor(auth, b.job_type);
    parseCron(b.cron, b.timezone, core.config.scheduleMinIntervalSeconds);
    const spec = await validateTemplate(ctx, b.job_type, b.spec);
    await assertDefinitionSeats(ctx, auth, { job_type: b.job_type, spec }, 'jobs.definition.create');
    const actor = auth.principal.id;
    const now = core.clock.now();
    const id = newScheduleId();
    const next = b.enabled ? nextFireAfter(b.cron, b.timezone, now) : null;
    await core.store.write(async (tx) => {
      await assertWithinQuota(ctx, tx, actor);
      await repo.insertDefinition(tx, {
        schedule_id: id,
        name: b.name,
        job_type: b.job_type,
        workspace_id: b.workspace_id,
        spec,
        cron: b.cron.trim(),
        timezone: b.timezone,
        catch_up: b.catch_up,
        enabled: b.enabled,
        next_fire_at: next,
        created_by: actor,
        created_at: now,
      });
      await repo.setAuthor(tx, id, actor, auth.effective, authorRoot(auth));
      await iam.audit(tx, {
        at: now,
        actor,
        action: 'jobs.definition.create',
        target: id,
        outcome: 'ok',
        details: { job_type: b.job_type, cron: b.cron, credential: auth.credential.id },
      });
    });
    void scheduler().rearm();
    return c.json(definitionView(await load(id)), 201);
  });

  app.openapi(list, async (c) => {
    const q = c.req.valid('query');
    const { items, total } = await repo.listDefinitions(core.store, {
      limit: q.limit,
      offset: q.offset,
      includeDeleted: q.include_deleted === 'true',
    });
    return c.json({ items: items.map(definitionView), ...pageOf(q, total) }, 200);
  });

  app.openapi(get, async (c) => c.json(definitionView(await load(c.req.valid('param').schedule_id)), 200));

  app.openapi(patch, async (c) => {
    const d = await load(c.req.valid('param').schedule_id);
    assertNotDeleted(d);
    const b = c.req.valid('json');
    const auth = c.get('auth');
    await iam.assertNotDelegated(auth, { action: 'jobs.definition.update', target: d.schedule_id });
    await iam.assertMayActOnOwned(auth, definitionThing(d), 'jobs.definition.update');
    assertMayAuthor(auth, d.job_type);
    const cron = b.cron ?? d.cron;
    const timezone = b.timezone ?? d.timezone;
    parseCron(cron, timezone, core.config.scheduleMinIntervalSeconds);
    const spec = b.spec !== undefined ? await validateTemplate(ctx, d.job_type, b.spec) : d.spec;
    await assertDefinitionSeats(ctx, auth, { job_type: d.job_type, spec }, 'jobs.definition.update');
    const actor = auth.principal.id;
    const now = core.clock.now();
    const next = d.enabled ? nextFireAfter(cron, timezone, now) : null;
    await core.store.write(async (tx) => {
      if (d.author_id !== actor) await assertWithinQuota(ctx, tx, actor);
      await repo.updateDefinition(tx, d.schedule_id, {
        name: b.name ?? d.name,
        workspace_id: b.workspace_id ?? d.workspace_id,
        spec,
        cron: cron.trim(),
        timezone,
        catch_up: b.catch_up ?? d.catch_up,
        next_fire_at: next,
        at: now,
      });
      await repo.setAuthor(tx, d.schedule_id, actor, auth.effective, authorRoot(auth));
      await iam.audit(tx, {
        at: now,
        actor,
        action: 'jobs.definition.update',
        target: d.schedule_id,
        outcome: 'ok',
        details: { fields: Object.keys(b), previous_author: d.author_id, credential: auth.credential.id },
      });
    });
    void scheduler().rearm();
    return c.json(definitionView(await load(d.schedule_id)), 200);
  });

  const setEnabled = async (id: string, auth: AuthContext, on: boolean) => {
    const d = await load(id);
    assertNotDeleted(d);
    await iam.assertMayActOnOwned(auth, definitionThing(d), on ? 'jobs.definition.enable' : 'jobs.definition.disable');
    if (on) {
      await iam.assertNotDelegated(auth, { action: 'jobs.definition.enable', target: id });
      assertMayAuthor(auth, d.job_type);
      await assertDefinitionSeats(ctx, auth, d, 'jobs.definition.enable');
    }
    if (d.enabled === on) return d;
    const actor = auth.principal.id;
    const now = core.clock.now();
    const next = on ? nextFireAfter(d.cron, d.timezone, now) : null;
    await core.store.write(async (tx) => {
      if (on && d.author_id !== actor) await assertWithinQuota(ctx, tx, actor);
      await repo.setDefinitionEnabled(tx, id, on, next, now);
      // Enabling makes it act again, so it acts as the one who enabled it, within their authority now.
      if (on) await repo.setAuthor(tx, id, actor, auth.effective, authorRoot(auth));
      await iam.audit(tx, {
        at: now,
        actor,
        action: on ? 'jobs.definition.enable' : 'jobs.definition.disable',
        target: id,
        outcome: 'ok',
        details: on ? { previous_author: d.author_id, credential: auth.credential.id } : { reason: 'requested' },
      });
    });
    void scheduler().rearm();
    return load(id);
  };
  app.openapi(enable, async (c) => c.json(definitionView(await setEnabled(c.req.valid('param').schedule_id, c.get('auth'), true)), 200));
  app.openapi(disable, async (c) => c.json(definitionView(await setEnabled(c.req.valid('param').schedule_id, c.get('auth'), false)), 200));

  app.openapi(runNow, async (c) => {
    const d = await load(c.req.valid('param').schedule_id);
    const run = await runDefinitionNow(ctx, c.get('auth'), d);
    c.header('Location', `/api/public/v1/admin/jobs/runs/${run.run_id}`);
    return c.json(
      {
        run_id: run.run_id,
        kind: run.kind,
        state: run.state,
        requester: run.requester,
        schedule_id: d.schedule_id,
        checked_cell_id: core.config.cellId,
      },
      202,
    );
  });

  app.openapi(del, async (c) => {
    const d = await load(c.req.valid('param').schedule_id);
    if (d.deleted_at === null) {
      const auth = c.get('auth');
      await iam.assertMayActOnOwned(auth, definitionThing(d), 'jobs.definition.delete');
      const now = core.clock.now();
      const actor = auth.principal.id;
      await core.store.write(async (tx) => {
        await repo.softDeleteDefinition(tx, d.schedule_id, now);
        await iam.audit(tx, { at: now, actor, action: 'jobs.definition.delete', target: d.schedule_id, outcome: 'ok' });
      });
      void scheduler().rearm();
    }
    return c.json(definitionView(await load(d.schedule_id)), 200);
  });
}
