/**
 * The lean query and path-parameter validators (cell/http/lean-validation.ts)
 * answer as @hono/zod-openapi's own: the same routes served by an app with
 * them and by one without, the same requests, the same answers (status,
 * body) and the same OpenAPI document. Also: an empty query's cached
 * defaults are a fresh copy per request (a handler changing its copy does
 * not change the next request's), and a schema with an asynchronous
 * refinement is still judged.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OpenAPIHono, createRoute, z } from '@hono/zod-openapi';
import type { AppEnv } from '../../../cell/context.ts';
import { leanValidation } from '../../../cell/http/lean-validation.ts';
import { validationError } from '../../../cell/http/errors.ts';
import { isServiceError } from '../../../core/errors.ts';

function build(lean: boolean): OpenAPIHono<AppEnv> {
  const defaultHook = (result: { success: boolean; error?: unknown }) => {
    if (!result.success) throw validationError(result.error as Parameters<typeof validationError>[0]);
  };
  const app = new OpenAPIHono<AppEnv>({ defaultHook });
  if (lean) leanValidation(app, defaultHook);
  app.onError((err, c) => (isServiceError(err) ? c.json(err.toEnvelope(), 400) : c.json({ error: String(err) }, 500)));
  const page = z.object({
    limit: z.coerce.number().int().min(1).max(50).default(10),
    offset: z.coerce.number().int().min(0).default(0),
    tag: z.union([z.string(), z.array(z.string())]).optional(),
  });
  const seen = (o: unknown, by: string) => ({ by, ...(o as object) });
  app.openapi(createRoute({ method: 'get', path: '/items', request: { query: page }, responses: { 200: { description: 'ok' } } }), (c) => {
    const q = c.req.valid('query') as Record<string, unknown>;
    const answer = seen(q, 'items');
    q['limit'] = 999; // a handler changing its copy
    return c.json(answer, 200);
  });
  app.openapi(
    createRoute({
      method: 'get',
      path: '/items/{id}',
      middleware: [
        async (c, next) => {
          c.header('x-before', 'yes');
          await next();
        },
      ],
      request: {
        params: z.object({ id: z.string().regex(/^it_[a-z]+$/) }),
        query: z.object({ full: z.enum(['true', 'false']).optional() }),
      },
      responses: { 200: { description: 'ok' } },
    }),
    (c) => c.json({ ...c.req.valid('param'), ...c.req.valid('query') }, 200),
  );
  app.openapi(
    createRoute({
      method: 'get',
      path: '/checked',
      request: { query: z.object({ q: z.string().refine(async (v) => v !== 'no', { message: 'refused' }) }) },
      responses: { 200: { description: 'ok' } },
    }),
    (c) => c.json(c.req.valid('query'), 200),
  );
  app.openapi(
    createRoute({
      method: 'post',
      path: '/items/{id}',
      request: {
        params: z.object({ id: z.string().min(3) }),
        body: { required: true, content: { 'application/json': { schema: z.object({ n: z.number() }) } } },
      },
      responses: { 200: { description: 'ok' } },
    }),
    (c) => c.json({ ...c.req.valid('param'), ...c.req.valid('json') }, 200),
  );
  return app;
}

const REQUESTS: [string, RequestInit?][] = [
  ['/items'],
  ['/items'],
  ['/items?'],
  ['/items?limit=5'],
  ['/items?limit=0'],
  ['/items?limit=5&limit=6'],
  ['/items?tag=a&tag=b&offset=2'],
  ['/items?unknown=1'],
  ['/items/it_abc'],
  ['/items/it_abc?full=true'],
  ['/items/it_abc?full=maybe'],
  ['/items/BAD'],
  ['/items/it_%61bc'],
  ['/checked'],
  ['/checked?q=yes'],
  ['/checked?q=no'],
  ['/items/abcd', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"n":1}' }],
  ['/items/ab', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"n":1}' }],
  ['/items/abcd', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{"n":1}' }],
];

test('the lean validators answer as the framework validators do', async () => {
  const lean = build(true);
  const plain = build(false);
  for (const [path, init] of REQUESTS) {
    const a = await lean.request(path, init);
    const b = await plain.request(path, init);
    assert.equal(a.status, b.status, path);
    assert.deepEqual(await a.json(), await b.json(), path);
    assert.equal(a.headers.get('x-before'), b.headers.get('x-before'), path);
  }
  const doc = { openapi: '3.0.0', info: { title: 't', version: '1' } };
  assert.deepEqual(lean.getOpenAPIDocument(doc), plain.getOpenAPIDocument(doc));
  assert.deepEqual(
    lean.routes.map((r) => `${r.method} ${r.path}`).filter((v, i, all) => all.indexOf(v) === i),
    plain.routes.map((r) => `${r.method} ${r.path}`).filter((v, i, all) => all.indexOf(v) === i),
  );
});

test('an empty query gets a fresh copy of its defaults each time', async () => {
  const app = build(true);
  for (let i = 0; i < 3; i++) assert.deepEqual(await (await app.request('/items')).json(), { by: 'items', limit: 10, offset: 0 });
});
