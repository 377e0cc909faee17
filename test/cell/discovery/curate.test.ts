// The curation rule, deny by default: untagged operations, operations with
// any non-allowlisted tag, and operations without a valid x-status are never
// served; components only they used are pruned.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { OpenAPIHono, createRoute, z } from '@hono/zod-openapi';
import type { AppEnv } from '../../../cell/context.ts';
import { errorResponses, json, secured } from '../../../cell/http/openapi.ts';
import { mountDiscovery } from '../../../cell/discovery/module.ts';
import { SERVED_TAGS, isServedTag } from '../../../cell/discovery/allowlist.ts';
import { curateDocument } from '../../../cell/discovery/curate.ts';
import { ERROR_STATUS } from '../../../core/errors.ts';

const Kept = z.object({ child: z.object({ v: z.string() }).openapi('KeptChild') }).openapi('Kept');
const Hidden = z.object({ secret: z.string() }).openapi('HiddenOnly');

function op(path: string, extra: Record<string, unknown>, schema: z.ZodType = Kept) {
  return createRoute({
    method: 'get',
    path,
    ...secured('test.read'),
    ...extra,
    responses: { 200: json(schema, 'ok'), ...errorResponses(401, 403) },
  } as Parameters<typeof createRoute>[0]);
}

function testApp(): OpenAPIHono<AppEnv> {
  const app = new OpenAPIHono<AppEnv>();
  app.openAPIRegistry.registerComponent('securitySchemes', 'bearerAuth', { type: 'http', scheme: 'bearer' });
  app.openAPIRegistry.registerComponent('securitySchemes', 'dpop', { type: 'http', scheme: 'DPoP' });
  app.openAPIRegistry.registerComponent('securitySchemes', 'unusedScheme', { type: 'http', scheme: 'basic' });
  // The cell authenticates before any route's permission gate: here every request holds test.read.
  app.use('*', (c, next) => {
    c.set('auth', { effective: ['test.read'], credential: { rateLimitRpm: null } } as never);
    return next();
  });
  const h = (c: { json: (v: unknown, s: 200) => Response }) => c.json({ child: { v: 'x' } }, 200);
  const routes = [
    op('/api/public/v1/t/live', { tags: ['Discovery'], 'x-status': 'Live' }),
    op('/api/public/v1/t/partial', { tags: ['Discovery'], 'x-status': 'Partial', description: 'Only listing is wired.' }),
    op('/api/public/v1/t/untagged', { 'x-status': 'Live' }, Hidden),
    op('/api/public/v1/t/empty-tags', { tags: [], 'x-status': 'Live' }, Hidden),
    op('/api/public/v1/t/internal', { tags: ['Internal'], 'x-status': 'Live' }, Hidden),
    op('/api/public/v1/t/mixed', { tags: ['Discovery', 'Internal'], 'x-status': 'Live' }, Hidden),
    op('/api/public/v1/t/no-status', { tags: ['Discovery'] }, Hidden),
    op('/api/public/v1/t/planned', { tags: ['Discovery'], 'x-status': 'Planned' }, Hidden),
    op('/api/public/v1/t/partial-bare', { tags: ['Discovery'], 'x-status': 'Partial' }, Hidden),
  ];
  for (const r of routes) app.openapi(r, h as never);
  mountDiscovery(app);
  return app;
}

async function servedDocument(app: OpenAPIHono<AppEnv>) {
  const res = await app.request('/api/public/v1/openapi.json');
  assert.equal(res.status, 200);
  return (await res.json()) as {
    openapi: string;
    paths: Record<string, Record<string, { tags: string[] }>>;
    components: Record<string, Record<string, unknown>>;
    tags: { name: string }[];
    info: { title: string; version: string };
    servers: unknown[];
  };
}

test('untagged and non-allowlisted operations are absent from the served document', async () => {
  const app = testApp();
  const doc = await servedDocument(app);
  const paths = Object.keys(doc.paths).sort();
  assert.deepEqual(paths, ['/api/public/v1/docs', '/api/public/v1/openapi.json', '/api/public/v1/t/live', '/api/public/v1/t/partial']);
  // The dropped routes still exist in the app: the document hides them, nothing else.
  const untagged = await app.request('/api/public/v1/t/untagged');
  assert.equal(untagged.status, 200);
  // No tag on a served operation is off the allowlist.
  for (const item of Object.values(doc.paths)) {
    for (const o of Object.values(item)) for (const t of o.tags) assert.ok(isServedTag(t), t);
  }
  assert.equal(doc.openapi, '3.1.0');
  assert.equal(typeof doc.info.title, 'string');
  assert.equal(typeof doc.info.version, 'string');
  assert.ok(doc.servers.length >= 1);
});

test('components used only by dropped operations are pruned; referenced ones kept transitively', async () => {
  const doc = await servedDocument(testApp());
  const schemas = Object.keys(doc.components['schemas'] ?? {});
  assert.ok(schemas.includes('Kept'));
  assert.ok(schemas.includes('KeptChild'), 'reached only through Kept');
  assert.ok(schemas.includes('Error'));
  assert.ok(!schemas.includes('HiddenOnly'), 'used only by dropped operations');
  assert.deepEqual(Object.keys(doc.components['securitySchemes'] ?? {}).sort(), ['bearerAuth', 'dpop']);
  // Only tags some served operation uses are listed.
  assert.deepEqual(
    doc.tags.map((t) => t.name),
    ['Discovery'],
  );
});

test('curateDocument reports why each operation was dropped', () => {
  const app = testApp();
  const raw = app.getOpenAPI31Document({ openapi: '3.1.0', info: { title: 't', version: '1' } }) as unknown as Record<string, unknown>;
  const { dropped } = curateDocument(raw, isServedTag);
  const why = Object.fromEntries(dropped.map((d) => [d.path, d.reason]));
  assert.deepEqual(why, {
    '/api/public/v1/t/untagged': 'untagged',
    '/api/public/v1/t/empty-tags': 'untagged',
    '/api/public/v1/t/internal': 'tag_not_allowlisted',
    '/api/public/v1/t/mixed': 'tag_not_allowlisted',
    '/api/public/v1/t/no-status': 'missing_x_status',
    '/api/public/v1/t/planned': 'invalid_x_status',
    '/api/public/v1/t/partial-bare': 'partial_without_description',
  });
  // The input is not modified.
  assert.ok('/api/public/v1/t/internal' in (raw['paths'] as object));
});

test('an empty allowlist serves nothing', () => {
  const raw = testApp().getOpenAPI31Document({ openapi: '3.1.0', info: { title: 't', version: '1' } }) as unknown as Record<
    string,
    unknown
  >;
  const { document } = curateDocument(raw, () => false);
  assert.deepEqual(document['paths'], {});
  const components = document['components'] as Record<string, unknown>;
  assert.equal(components['schemas'], undefined);
});

test('the allowlist is one constant of non-empty tag descriptions', () => {
  assert.ok(Object.keys(SERVED_TAGS).length > 0);
  for (const [name, description] of Object.entries(SERVED_TAGS)) {
    assert.ok(name.trim() === name && name.length > 0);
    assert.ok(description.length > 0, name);
  }
  assert.equal(isServedTag('toString'), false, 'prototype keys are not tags');
});

test('the document is served with an ETag and revalidates with 304', async () => {
  const app = testApp();
  const first = await app.request('/api/public/v1/openapi.json');
  const etag = first.headers.get('etag');
  assert.ok(etag);
  assert.match(first.headers.get('content-type') ?? '', /^application\/json/);
  const again = await app.request('/api/public/v1/openapi.json', { headers: { 'if-none-match': etag } });
  assert.equal(again.status, 304);
  assert.equal(await again.text(), '');
  const other = await app.request('/api/public/v1/openapi.json', { headers: { 'if-none-match': '"stale"' } });
  assert.equal(other.status, 200);
});

test('the error envelope in the document names every code the cell sends', async () => {
  const doc = await servedDocument(testApp());
  const envelope = doc.components['schemas']!['Error'] as { properties: { error: { enum: string[] } } };
  assert.deepEqual([...envelope.properties.error.enum].sort(), Object.keys(ERROR_STATUS).sort());
  assert.ok(envelope.properties.error.enum.includes('method_not_allowed'));
});
