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
import type { Context } from 'hono';
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

/**
 * What cell/http/lean-validation.ts takes from @hono/zod-openapi and @hono/zod-validator (it replaces a property of
 * the framework's app): each assumption checked on its own, so that an upgrade that changes one fails here, by
 * name, before the answers of the cell drift from the framework's.
 */
test('what lean-validation relies on in @hono/zod-openapi still holds', async (t) => {
  const { version } = (await import('@hono/zod-openapi/package.json', { with: { type: 'json' } })).default as { version: string };
  const broken = (what: string) =>
    `@hono/zod-openapi ${version} changed what cell/http/lean-validation.ts relies on: ${what}. Re-check that file against the framework before upgrading.`;
  const app = () => new OpenAPIHono<AppEnv>();

  await t.test('openapi() is an own property of the app (replacing it is how lean routes are mounted)', () => {
    const a = app();
    assert.ok(Object.hasOwn(a, 'openapi') && typeof a.openapi === 'function', broken('openapi is no longer an own function property'));
    let called = 0;
    const original = a.openapi.bind(a);
    (a as unknown as { openapi: unknown }).openapi = (...args: Parameters<typeof original>) => {
      called++;
      return original(...args);
    };
    a.openapiRoutes([
      {
        route: createRoute({ method: 'get', path: '/x', responses: { 200: { description: 'ok' } } }),
        handler: (c: Context<AppEnv>) => c.json({}, 200),
      },
    ]);
    assert.equal(called, 1, broken('openapiRoutes() no longer goes through this.openapi'));
  });

  await t.test(
    'hide: true serves a route without registering it; openAPIRegistry.registerPath registers it as openapi() would',
    async () => {
      const route = createRoute({
        method: 'get',
        path: '/r/{id}',
        request: { params: z.object({ id: z.string() }) },
        responses: { 200: { description: 'ok' } },
      });
      const doc = { openapi: '3.0.0', info: { title: 't', version: '1' } };
      const hidden = app();
      hidden.openapi({ ...route, hide: true }, (c) => c.json({}, 200));
      assert.equal((await hidden.request('/r/1')).status, 200, broken('a hidden route is no longer served'));
      assert.deepEqual(hidden.getOpenAPIDocument(doc).paths ?? {}, {}, broken('hide: true no longer keeps a route out of the document'));
      const shown = app();
      shown.openapi(route, (c) => c.json({}, 200));
      hidden.openAPIRegistry.registerPath(route);
      assert.deepEqual(
        hidden.getOpenAPIDocument(doc),
        shown.getOpenAPIDocument(doc),
        broken('registerPath no longer documents a route as openapi() does'),
      );
    },
  );

  await t.test(
    'query and params validators are mounted only for request.query and request.params, after the route middleware',
    async () => {
      const order: string[] = [];
      const a = app();
      a.openapi(
        createRoute({
          method: 'get',
          path: '/v',
          middleware: [
            async (_c, next) => {
              order.push('middleware');
              await next();
            },
          ],
          request: { query: z.object({ n: z.coerce.number() }) },
          responses: { 200: { description: 'ok' } },
        }),
        (c) => c.json(c.req.valid('query'), 200),
        (result) => {
          order.push(`hook:${(result as { target: string }).target}`);
          return undefined;
        },
      );
      a.openapi(
        createRoute({
          method: 'get',
          path: '/none',
          request: { query: undefined, params: undefined },
          responses: { 200: { description: 'ok' } },
        }),
        (c) => c.json({ valid: (c.req.valid as (t: string) => unknown)('query') ?? null }, 200),
      );
      assert.equal((await a.request('/v?n=x')).status, 400, broken('a failed query parse is no longer a 400'));
      assert.deepEqual(order, ['middleware', 'hook:query'], broken('the query validator no longer runs after the route middleware'));
      const none = await a.request('/none?n=x');
      assert.equal(none.status, 200, broken('a route without request.query still validates its query'));
      assert.deepEqual(await none.json(), { valid: null });
    },
  );

  await t.test(
    'the hook is given {success, data, target} with the value lean-validation builds (c.req.queries(), single values unwrapped)',
    async () => {
      let seen: unknown;
      const a = app();
      a.openapi(
        createRoute({
          method: 'get',
          path: '/q',
          request: { query: z.object({ a: z.array(z.string()), b: z.string() }) },
          responses: { 200: { description: 'ok' } },
        }),
        (c) => c.json(c.req.valid('query'), 200),
        (result) => {
          seen = result;
          return undefined;
        },
      );
      assert.equal((await a.request('/q?a=1&a=2&b=3')).status, 200);
      const r = seen as { success: boolean; data: unknown; target: string };
      assert.equal(r.success, true, broken('the hook no longer gets success'));
      assert.equal(r.target, 'query', broken('the hook no longer gets the target'));
      assert.deepEqual(r.data, { a: ['1', '2'], b: '3' }, broken('the validated query value is built differently'));
    },
  );

  await t.test('c.req.addValidatedData(target, data) is what c.req.valid(target) returns', async () => {
    const a = app();
    a.get(
      '/d',
      async (c, next) => {
        (c.req.addValidatedData as (t: string, d: unknown) => void)('query', { kept: 1 });
        await next();
      },
      (c) => c.json((c.req.valid as (t: string) => unknown)('query') as object),
    );
    assert.deepEqual(await (await a.request('/d')).json(), { kept: 1 }, broken('addValidatedData no longer feeds valid()'));
  });

  await t.test('zod refuses a synchronous parse of an asynchronous schema with z.core.$ZodAsyncError', () => {
    const s = z.string().refine(async () => true);
    assert.throws(() => s.safeParse('x'), z.core.$ZodAsyncError, broken('zod no longer throws $ZodAsyncError for an async schema'));
  });
});
