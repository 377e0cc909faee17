// The served document against the real app, in process: the spec's negative
// surface (no graph upload, no MCP attachment) over the app's real routes,
// the documentation every served operation must carry, and publication
// granting no access (403 for a key scoped elsewhere, 429 from the gateway).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { grants } from '../../../core/authority/scopes.ts';
import { PUBLIC_API_PATHS } from '../../../cell/app.ts';
import { isServedTag } from '../../../cell/discovery/allowlist.ts';
import { ANY_AUTHENTICATED } from '../../../cell/http/openapi.ts';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { checkResponse, isProtected, isPublic, operations, pathParams, schemaChecker, type Json, type Operation } from './_openapi.ts';

let t: InProcess;
let doc: Json;

before(async () => {
  t = await inProcessCell();
  const r = await t.request('GET', '/api/public/v1/openapi.json');
  assert.equal(r.status, 200);
  doc = r.body;
});
after(async () => {
  await t?.close();
});

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'ALL']);

/** The MCP endpoint the cell serves and the metadata that describes it: the only paths that name MCP. */
const SERVES_MCP = new Set(['POST /mcp', 'GET /mcp', 'DELETE /mcp', 'GET /.well-known/oauth-protected-resource/mcp']);

test('no route of the app creates or uploads a graph, and none attaches an MCP server', () => {
  const routes = t.app.routes.map((r) => ({ method: r.method.toUpperCase(), path: r.path }));
  assert.ok(routes.length > 10, 'the real routes are walked');
  const graphWrites = routes.filter((r) => WRITE_METHODS.has(r.method) && /graph/i.test(r.path));
  assert.deepEqual(graphWrites, [], 'no POST/PUT/PATCH to a path naming a graph');
  for (const r of routes.filter((x) => /graph/i.test(x.path))) {
    assert.match(
      r.path,
      /\/formations\/:[^/]+\/graph$|\/crews\/:[^/]+\/runs\/:[^/]+\/graph$/,
      `${r.method} ${r.path}: the only graph paths are GET .../formations/{id}/graph and GET .../crews/{id}/runs/{run_id}/graph`,
    );
    assert.ok(r.method === 'GET' || r.method === 'HEAD', `${r.method} ${r.path}`);
  }
  // The cell serves MCP itself (docs/mcp.md): /mcp, and its protected resource metadata (RFC 9728).
  // No other path names MCP: nothing attaches an MCP server to an agent (spec 1.4).
  const mcp = routes.filter((r) => /mcp/i.test(r.path)).map((r) => `${r.method} ${r.path}`);
  assert.deepEqual(
    mcp.filter((r) => !SERVES_MCP.has(r)),
    [],
    'the only paths naming MCP are the endpoint the cell serves and its metadata',
  );
  // The document agrees (it can only be narrower than the app).
  for (const o of operations(doc)) {
    assert.ok(!/mcp/i.test(o.path) || SERVES_MCP.has(`${o.method.toUpperCase()} ${o.path}`), o.path);
    if (/graph/i.test(o.path)) assert.equal(o.method, 'get', o.path);
  }
});

test('every served operation documents status, security, errors and pagination', () => {
  const problems: string[] = [];
  const ops = operations(doc);
  assert.ok(ops.length >= 3);
  for (const o of ops) {
    const at = `${o.method.toUpperCase()} ${o.path}`;
    const op = o.op;
    const responses = op['responses'] as Json;
    if (!Array.isArray(op['tags']) || op['tags'].length === 0 || !op['tags'].every((x: string) => isServedTag(x)))
      problems.push(`${at}: tags`);
    if (op['x-status'] !== 'Live' && !(op['x-status'] === 'Partial' && typeof op['description'] === 'string' && op['description'].trim()))
      problems.push(`${at}: x-status`);
    // Under /api/public/v1 the security requirement is always explicit; the
    // OAuth protocol endpoints (absolute paths) describe client authentication themselves.
    if (!Array.isArray(op['security'])) {
      if (o.path.startsWith('/api/public/v1/')) problems.push(`${at}: no security requirement declared (use secured() or security: [])`);
    } else if (isPublic(op)) {
      if (o.path.startsWith('/api/public/v1/') && !PUBLIC_API_PATHS.includes(o.path))
        problems.push(`${at}: security [] but not in PUBLIC_API_PATHS`);
    } else {
      for (const s of ['401', '403', '429', '500']) if (!responses[s]) problems.push(`${at}: ${s} not documented`);
      if (o.path.startsWith('/api/public/v1/') && typeof op['x-required-permission'] !== 'string')
        problems.push(`${at}: x-required-permission missing`);
    }
    if (!responses['429']?.['headers']?.['Retry-After']) problems.push(`${at}: 429 without Retry-After header`);
    const params = (op['parameters'] ?? []) as Json[];
    if ((params.some(canFail) || op['requestBody']) && !responses['400'])
      problems.push(`${at}: takes validated input but 400 not documented`);
    if (pathParams(o).length > 0 && !responses['404'] && !responses['400'])
      problems.push(`${at}: path parameter but neither 404 nor 400 documented`);
    for (const p of params) {
      if (p['in'] === 'query' && p['name'] === 'limit') {
        const s = p['schema'] ?? {};
        if (s['default'] === undefined || s['minimum'] === undefined || s['maximum'] === undefined)
          problems.push(`${at}: limit without default/minimum/maximum`);
      }
      if (p['in'] === 'query' && p['name'] === 'offset') {
        const s = p['schema'] ?? {};
        if (s['default'] === undefined || s['minimum'] === undefined) problems.push(`${at}: offset without default/minimum`);
      }
    }
    if (!Object.keys(responses).some((s) => /^2\d\d$/.test(s))) problems.push(`${at}: no success response`);
    for (const [status, r] of Object.entries(responses)) {
      for (const [type, media] of Object.entries((r as Json)['content'] ?? {})) {
        if (!(media as Json)['schema']) problems.push(`${at}: ${status} ${type} without schema`);
        // OAuth protocol endpoints answer 400/401 with RFC 6749 §5.2 bodies (OAuth clients branch on those codes; docs/oauth.md).
        const oauthProtocolError =
          o.path.startsWith('/oauth/') &&
          (status === '400' || status === '401') &&
          (media as Json)['schema']?.['$ref'] === '#/components/schemas/OAuthError';
        if (
          Number(status) >= 400 &&
          type === 'application/json' &&
          (media as Json)['schema']?.['$ref'] !== '#/components/schemas/Error' &&
          !oauthProtocolError
        ) {
          problems.push(`${at}: ${status} is not the error envelope`);
        }
      }
    }
  }
  assert.deepEqual(problems, []);
});

/** True when a parameter's schema can reject a value (then 400 must be documented). */
function canFail(p: Json): boolean {
  const s = (p['schema'] ?? {}) as Json;
  if (p['in'] === 'query' && p['required']) return true;
  if (s['type'] !== undefined && s['type'] !== 'string') return true;
  return Object.keys(s).some((k) => !['type', 'description', 'example', 'examples', 'title'].includes(k));
}

/** A few served, protected GET operations without path parameters. */
function protectedGets(): Operation[] {
  return operations(doc).filter((o) => o.method === 'get' && isProtected(o.op) && pathParams(o).length === 0);
}

test('publication grants no access: a key scoped to something else gets 403, no credential 401', async () => {
  const scope = 'system.orchestration.admin.read';
  const minted = await t.request('POST', '/api/public/v1/admin/api-keys', {
    token: t.adminKey,
    body: { name: 'elsewhere', scopes: [scope] },
  });
  assert.equal(minted.status, 201, minted.text);
  const key = minted.body.secret as string;
  const checker = schemaChecker(doc);
  const targets = protectedGets()
    .filter((o) => o.op['x-required-permission'] !== ANY_AUTHENTICATED && !grants([scope], o.op['x-required-permission']))
    .slice(0, 4);
  assert.ok(targets.length >= 2, 'enough operations to probe');
  for (const o of targets) {
    const anon = await t.request('GET', o.path);
    assert.equal(anon.status, 401, `${o.path} without credential`);
    checkResponse(checker, o, { status: anon.status, contentType: anon.headers.get('content-type'), text: anon.text }, 'no credential');
    const r = await t.request('GET', o.path, { token: key });
    assert.equal(r.status, 403, `${o.path} with a key scoped to ${scope}`);
    assert.equal(r.body.error, 'forbidden');
    checkResponse(checker, o, { status: r.status, contentType: r.headers.get('content-type'), text: r.text }, 'scoped elsewhere');
    const ok = await t.request('GET', o.path, { token: t.adminKey });
    assert.equal(ok.status, 200, `${o.path} with the admin key: ${ok.text.slice(0, 200)}`);
  }
});

test('publication grants no access: the gateway budget applies to served operations and to the document itself', async () => {
  const small = await inProcessCell({ config: { rate: { capacity: 2, refillPerSecond: 1 } } });
  try {
    const checker = schemaChecker(doc);
    const targets: Operation[] = [
      ...protectedGets().slice(0, 3),
      ...operations(doc).filter((o) => o.path === '/api/public/v1/openapi.json' || o.path === '/api/public/v1/docs'),
    ];
    let n = 0;
    for (const o of targets) {
      const ip = `10.9.0.${++n}`;
      for (let i = 0; i < 2; i++) {
        const r = await small.request('GET', o.path, { token: small.adminKey, ip });
        assert.equal(r.status, 200, `${o.path} request ${i + 1} within the budget`);
      }
      const r = await small.request('GET', o.path, { token: small.adminKey, ip });
      assert.equal(r.status, 429, `${o.path}: third request over a budget of 2`);
      assert.equal(r.body.error, 'rate_limited');
      assert.ok(Number(r.headers.get('retry-after')) >= 1, 'Retry-After');
      assert.equal(r.headers.get('x-ratelimit-remaining'), '0');
      checkResponse(checker, o, { status: r.status, contentType: r.headers.get('content-type'), text: r.text }, 'over budget');
    }
  } finally {
    await small.close();
  }
});

test("publication grants no access: a key's own rate_limit_rpm applies to served operations", async () => {
  const minted = await t.request('POST', '/api/public/v1/admin/api-keys', { token: t.adminKey, body: { name: 'slow', rate_limit_rpm: 2 } });
  assert.equal(minted.status, 201, minted.text);
  const key = minted.body.secret as string;
  const checker = schemaChecker(doc);
  const o = protectedGets()[0]!;
  for (let i = 0; i < 2; i++) assert.equal((await t.request('GET', o.path, { token: key })).status, 200);
  const r = await t.request('GET', o.path, { token: key });
  assert.equal(r.status, 429, `${o.path}: third request over 2 rpm`);
  assert.ok(Number(r.headers.get('retry-after')) >= 1);
  checkResponse(checker, o, { status: r.status, contentType: r.headers.get('content-type'), text: r.text }, 'over rpm');
  t.clock.advance(60_000);
  assert.equal((await t.request('GET', o.path, { token: key })).status, 200, 'the budget refills with time');
});

test('one parameter name per path segment: two templates that share a prefix name its parameters alike', () => {
  const names = new Map<string, Map<string, string>>();
  const clash: string[] = [];
  const note = (kind: string, template: string, param: RegExp) => {
    const segs = template.split('/');
    segs.forEach((seg, i) => {
      const m = param.exec(seg);
      if (!m) return;
      const at = `${kind} ${segs.slice(0, i).join('/')}/*`;
      const seen = names.get(at) ?? new Map<string, string>();
      names.set(at, seen);
      const other = [...seen.entries()].find(([n]) => n !== m[1]);
      if (other) clash.push(`${at}: {${m[1]}} in ${template}, {${other[0]}} in ${other[1]}`);
      seen.set(m[1]!, template);
    });
  };
  for (const path of Object.keys(doc['paths'] ?? {})) note('document', path, /^\{(.+)\}$/);
  // The app's own routes too (the document serves a part of them).
  for (const r of t.app.routes) note('app', r.path, /^:([^{}]+?)(\{.*\})?$/);
  assert.deepEqual([...new Set(clash)], []);
});

test('oauth2: the client-credentials token URL, each permission a scope, and on each operation the scope it needs', async () => {
  const scheme = doc['components']['securitySchemes']['oauth2'];
  assert.equal(scheme.type, 'oauth2');
  const flow = scheme.flows.clientCredentials;
  assert.equal(flow.tokenUrl, '/oauth/token', 'relative to the server: the cell that served the document');
  const catalog = new Set(Object.keys(flow.scopes));
  for (const o of operations(doc)) {
    const sec = o.op['security'] as Json[] | undefined;
    if (!sec || sec.length === 0) continue;
    const at = `${o.method.toUpperCase()} ${o.path}`;
    const need = o.op['x-required-permission'] as string;
    const oauth = sec.filter((s) => 'oauth2' in s).map((s) => s['oauth2'] as string[]);
    assert.ok(oauth.length > 0, `${at}: an oauth2 requirement beside bearerAuth`);
    if (catalog.has(need)) {
      const also = (o.op['x-also-permitted'] as string[] | undefined) ?? [];
      assert.deepEqual(oauth, [[need], ...also.map((a) => [a])], `${at}: the scope is x-required-permission (${need})`);
      for (const a of also) assert.ok(catalog.has(a), `${at}: ${a} is a declared scope`);
    } else {
      assert.deepEqual(oauth, [[]], `${at}: ${need} is no catalog permission: any token, judged by the route`);
    }
  }
  // The scope the document names is the one the gate asks for: a client-credentials token with just that scope.
  const svc = (
    await t.request('POST', '/api/public/v1/admin/principals', {
      token: t.adminKey,
      body: { kind: 'service', name: 'doc-reader', roles: ['viewer'] },
    })
  ).body.id as string;
  const client = await t.request('POST', '/api/public/v1/admin/oauth/clients', {
    token: t.adminKey,
    body: { name: 'doc-reader', scope: ['audit.read'], subject_id: svc },
  });
  assert.equal(client.status, 201, client.text);
  const basic = Buffer.from(`${client.body.client_id}:${client.body.client_secret}`).toString('base64');
  const tok = await t.request('POST', flow.tokenUrl, {
    rawBody: new URLSearchParams({ grant_type: 'client_credentials', scope: 'audit.read' }).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${basic}` },
  });
  assert.equal(tok.status, 200, tok.text);
  const scopeOf = (path: string) => (doc['paths'][path]['get']['security'] as Json[]).find((s) => 'oauth2' in s)!['oauth2'];
  assert.deepEqual(scopeOf('/api/public/v1/admin/audit'), ['audit.read']);
  assert.equal((await t.request('GET', '/api/public/v1/admin/audit', { token: tok.body.access_token })).status, 200);
  assert.deepEqual(scopeOf('/api/public/v1/admin/principals'), ['iam.principals.read']);
  assert.equal((await t.request('GET', '/api/public/v1/admin/principals', { token: tok.body.access_token })).status, 403);
});
