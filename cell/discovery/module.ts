/**
 * Discovery: `GET /api/public/v1/openapi.json` (the curated OpenAPI 3.1
 * document) and `GET /api/public/v1/docs` (the interactive docs page and its
 * assets). Both are public: they are listed in PUBLIC_API_PATHS (cell/app.ts)
 * and still pass the gateway's rate gate. This module is mounted last
 * (cell/modules.ts) and builds the document on first request, when every
 * route is registered.
 */
import { etagOf } from '../../runtime/page-headers.ts';
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import type { AppEnv, Logger } from '../context.ts';
import type { CellModule } from '../module.ts';
import { errorResponses, json } from '../http/openapi.ts';
import { buildDocument } from './document.ts';
import { DOCS_ASSETS_PATH, DOCS_HEADERS, DOCS_HTML, DOCS_PATH, OPENAPI_PATH, docsAssets } from './docs-page.ts';
import type { CurationResult } from './curate.ts';

const PUBLIC = { security: [] as Array<Record<string, string[]>> };

const getOpenApi = createRoute({
  method: 'get',
  path: OPENAPI_PATH,
  tags: ['Discovery'],
  'x-status': 'Live',
  ...PUBLIC,
  summary: 'The curated OpenAPI 3.1 document',
  description:
    'This document: every served operation, generated from the route declarations and curated deny-by-default. No credential needed.',
  responses: {
    200: json(
      z
        .object({
          openapi: z.string(),
          info: z.object({ title: z.string(), version: z.string() }),
          paths: z.record(z.string(), z.unknown()),
        })
        .passthrough(),
      'An OpenAPI 3.1 document',
    ),
    304: { description: 'Not modified (the `If-None-Match` ETag matches)' },
    ...errorResponses(),
  },
});

const getDocs = createRoute({
  method: 'get',
  path: DOCS_PATH,
  tags: ['Discovery'],
  'x-status': 'Live',
  ...PUBLIC,
  summary: 'The interactive docs page',
  description:
    'An HTML page (Swagger UI) over this document. All assets are served by the cell; strict Content-Security-Policy. No credential needed.',
  responses: {
    200: { ...json(z.string(), 'HTML page'), content: { 'text/html': { schema: z.string() } } },
    ...errorResponses(),
  },
});

/** Mounts the document, the page and the page's assets on `app`. */
export function mountDiscovery(app: OpenAPIHono<AppEnv>, log?: Logger): void {
  let served: { text: string; etag: string } | null = null;
  const document = (): { text: string; etag: string } => {
    if (!served) {
      const curated: CurationResult = buildDocument(app);
      for (const d of curated.dropped) {
        log?.info('openapi: operation not served', {
          method: d.method,
          path: d.path,
          reason: d.reason,
          ...(d.detail ? { detail: d.detail } : {}),
        });
      }
      const text = JSON.stringify(curated.document);
      served = { text, etag: etagOf(text) };
    }
    return served;
  };

  app.openapi(getOpenApi, (c) => {
    const { text, etag } = document();
    c.header('Cache-Control', 'no-cache');
    c.header('ETag', etag);
    if (c.req.header('if-none-match') === etag) return c.body(null, 304);
    return c.body(text, 200, { 'Content-Type': 'application/json; charset=utf-8' });
  });

  app.openapi(getDocs, (c) => {
    for (const [k, v] of Object.entries(DOCS_HEADERS)) c.header(k, v);
    c.header('Cache-Control', 'no-cache');
    return c.html(DOCS_HTML, 200);
  });

  app.get(`${DOCS_ASSETS_PATH}/:name`, (c) => {
    const a = docsAssets().get(c.req.param('name'));
    if (!a) return c.json({ error: 'not_found', message: 'no such resource' }, 404);
    for (const [k, v] of Object.entries(DOCS_HEADERS)) c.header(k, v);
    c.header('ETag', a.etag);
    c.header('Cache-Control', 'public, max-age=3600');
    if (c.req.header('if-none-match') === a.etag) return c.body(null, 304);
    c.header('Content-Type', a.contentType);
    return c.body(a.body, 200);
  });
}

/** Mounted last (cell/server.ts), so the document sees every other module's routes. */
export function createDiscoveryModule(core: { log: Logger }): CellModule {
  return { name: 'discovery', routes: (app) => mountDiscovery(app, core.log) };
}
