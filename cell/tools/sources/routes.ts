/**
 * Routes of the catalog's sources, under `/admin/catalog/sources`: register
 * (HTTP servers only; stdio sources come from the cell's configuration), list,
 * get, review (live definitions beside the pins, with a diff), re-pin, change
 * and delete. Reads need `catalog.read`; every change `catalog.sources.write`
 * (and, for a change reaching agents, authority covering them: lifecycle.ts).
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { PERMISSIONS } from '../../../core/permissions.ts';
import type { AppEnv } from '../../context.ts';
import { refuseImmutable } from '../../http/immutable.ts';
import { errorResponses, json, jsonBody, listSchema, pageOf, pageQuery, secured, viewsWithMany } from '../../http/openapi.ts';
import type { SourcesContext } from './context.ts';
import { deleteSourceWith, repin, sourceOr404, updateSourceWith } from './lifecycle.ts';
import { registerSource } from './register.ts';
import { countSources, listSources, pinsBySource, pinsOf } from './repository.ts';
import { reviewSource } from './review.ts';
import { CreateSource, IMMUTABLE, Repin, ReviewView, reviewView, SourceCreated, SourceView, sourceView, UpdateSource } from './views.ts';

const P = '/api/public/v1/admin/catalog/sources';
const TAG = 'Catalog sources';

const SourceId = z.object({
  source_id: z
    .string()
    .max(64)
    .openapi({ param: { name: 'source_id', in: 'path' } }),
});

export function sourceRoutes(app: OpenAPIHono<AppEnv>, ctx: SourcesContext): void {
  const { store } = ctx.core;
  app.openapi(
    createRoute({
      method: 'post',
      path: P,
      tags: [TAG],
      'x-status': 'Live',
      summary:
        'Register an MCP server (Streamable HTTP) as a source: its tools are imported as mcp.<name>.<tool>, each definition pinned by its hash',
      description:
        'stdio servers are never registered here: only the cell configuration (--tool-sources) names a command. Refusals: name_taken (409), source_url_invalid (400), egress_private_address and posture_forbidden (403), source_not_protected (400), unknown_secret (400), secret_not_usable (403), source_token_failed and source_unreachable (503). Tools the catalog cannot take are listed in refused_tools.',
      ...secured(PERMISSIONS.catalogSourcesWrite),
      request: { body: jsonBody(CreateSource) },
      responses: {
        201: json(SourceCreated, 'The source, its pinned tools, and the tools not imported'),
        ...errorResponses(400, 401, 403, 409, 503),
      },
    }),
    async (c) => {
      const r = await registerSource(ctx, c.get('auth'), c.req.valid('json'));
      return c.json({ ...sourceView(r.source, r.pins), refused_tools: r.refused }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: P,
      tags: [TAG],
      'x-status': 'Live',
      summary: 'List the catalog sources with their pinned tools, oldest first',
      ...secured(PERMISSIONS.catalogRead),
      request: { query: pageQuery(100, 1000) },
      responses: { 200: json(listSchema('sources', SourceView, 'CatalogSourceList'), 'Sources'), ...errorResponses(400, 401, 403) },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const rows = await listSources(store, q.limit, q.offset);
      const sources = await viewsWithMany(
        rows,
        (s) => s.source_id,
        (ids) => pinsBySource(store, ids),
        sourceView,
      );
      return c.json({ sources, ...pageOf(q, await countSources(store)) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/{source_id}`,
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Get a catalog source with its pinned tools',
      ...secured(PERMISSIONS.catalogRead),
      request: { params: SourceId },
      responses: { 200: json(SourceView, 'The source'), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const id = c.req.valid('param').source_id;
      return c.json(sourceView(await sourceOr404(store, id), await pinsOf(store, id)), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: `${P}/{source_id}/review`,
      tags: [TAG],
      'x-status': 'Live',
      summary: "The server's tools as it lists them now beside the pins: pinned, changed (with a diff), missing, new, refused",
      description: 'Reads the server with the caller as identity; writes nothing. A re-pin names the live_pin it reviewed.',
      ...secured(PERMISSIONS.catalogRead),
      request: { params: SourceId },
      responses: { 200: json(ReviewView, 'The review'), ...errorResponses(400, 401, 403, 404, 503) },
    }),
    async (c) => {
      const r = await reviewSource(ctx, c.get('auth'), c.req.valid('param').source_id);
      return c.json(reviewView(r.source, r.tools), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: `${P}/{source_id}/pins`,
      tags: [TAG],
      'x-status': 'Live',
      summary: "Re-pin, import or remove tools of a source, each pin the hash of the server's live definition as reviewed",
      description:
        'Refusals: definition_moved (409: the server changed since the review), in_use (409: removing a tool something names), shared_change_exceeds_caller (403: the change reaches agents beyond the caller), source_unreachable (503). A re-pin changes the graph of every crew using the tool: its waiting runs refuse to resume (graph_changed).',
      ...secured(PERMISSIONS.catalogSourcesWrite),
      request: { params: SourceId, body: jsonBody(Repin) },
      responses: { 200: json(SourceView, 'The source with its pins now'), ...errorResponses(400, 401, 403, 404, 409, 503) },
    }),
    async (c) => {
      const r = await repin(ctx, c.get('auth'), c.req.valid('param').source_id, c.req.valid('json').pins);
      return c.json(sourceView(r.source, r.pins), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'patch',
      path: `${P}/{source_id}`,
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Change a source: its URL, identity, pin-check freshness, timeout or description (pins stay)',
      description:
        'The checks of registration run again. Any change but the description reaches every agent granted a tool of the source (403 shared_change_exceeds_caller). stdio sources: 409 source_config_managed.',
      ...secured(PERMISSIONS.catalogSourcesWrite),
      request: {
        params: SourceId,
        body: jsonBody(UpdateSource),
      },
      responses: { 200: json(SourceView, 'The source'), ...errorResponses(400, 401, 403, 404, 409, 503) },
    }),
    async (c) => {
      const body = c.req.valid('json');
      refuseImmutable(body, IMMUTABLE);
      const id = c.req.valid('param').source_id;
      const s = await updateSourceWith(ctx, c.get('auth'), id, body);
      return c.json(sourceView(s, await pinsOf(store, id)), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: `${P}/{source_id}`,
      tags: [TAG],
      'x-status': 'Live',
      summary: 'Delete a source and its tools (409 in_use while a formation, blueprint or agent names one)',
      ...secured(PERMISSIONS.catalogSourcesWrite),
      request: { params: SourceId },
      responses: { 200: json(SourceView, 'The source as it was'), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const r = await deleteSourceWith(ctx, c.get('auth'), c.req.valid('param').source_id);
      return c.json(sourceView(r.source, r.pins), 200);
    },
  );
}
