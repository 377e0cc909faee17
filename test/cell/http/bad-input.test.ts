// Bad input never yields a 5xx or internal text: random bodies, raw garbage,
// wrong types, oversized bodies and odd path ids thrown at every route the
// app really has, with a valid admin credential so validation is reached.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { inProcessCell, type InProcess, type TestResponse } from '../../helpers/inproc.ts';

const CODES = new Set(['invalid_request', 'unauthorized', 'forbidden', 'not_found', 'conflict', 'rate_limited', 'service_unavailable']);
const OAUTH_CODES = new Set([
  'invalid_request',
  'invalid_client',
  'invalid_grant',
  'unauthorized_client',
  'unsupported_grant_type',
  'invalid_scope',
  'invalid_dpop_proof',
  'authorization_pending',
  'slow_down',
  'access_denied',
  'expired_token',
  'invalid_client_metadata',
  'invalid_redirect_uri',
]);

/** Routes that stream until a run ends; covered by their own tests. */
const SKIP = /\/events\/sse$/;

function assertEnvelope(r: TestResponse, what: string): void {
  assert.ok(r.status < 500, `${what} -> ${r.status} ${r.text.slice(0, 300)}`);
  if (r.status >= 400 && (r.headers.get('content-type') ?? '').includes('json')) {
    // OAuth protocol endpoints answer 400/401 with RFC 6749 §5.2 codes (docs/oauth.md).
    const oauthProtocol =
      /^POST \/oauth\/(token|device_authorization|introspect|revoke|register)$/.test(what) &&
      (r.status === 400 || r.status === 401) &&
      OAUTH_CODES.has(r.body?.error);
    // The MCP endpoint answers its transport's refusals as JSON-RPC errors (MCP Streamable HTTP), past the gateway's envelope.
    const mcpProtocol = / \/mcp$/.test(what) && typeof r.body?.error?.code === 'number' && typeof r.body.error.message === 'string';
    assert.ok(CODES.has(r.body?.error) || oauthProtocol || mcpProtocol, `${what}: envelope error code, got ${r.text.slice(0, 200)}`);
    if (!mcpProtocol) assert.equal(typeof r.body.message, 'string', what);
    assert.ok(
      !/at .+\.(ts|js|mjs):\d+|TypeError|SyntaxError|SQLITE|sql\.js/i.test(r.text),
      `${what}: internal text leaked: ${r.text.slice(0, 300)}`,
    );
  }
}

function routesOf(t: InProcess): { method: string; path: string }[] {
  const seen = new Set<string>();
  const out: { method: string; path: string }[] = [];
  for (const r of t.app.routes) {
    if (r.method === 'ALL' || SKIP.test(r.path) || r.path.includes('*')) continue;
    const k = `${r.method} ${r.path}`;
    if (seen.has(k)) continue;
    seen.add(k);
    out.push({ method: r.method, path: r.path });
  }
  return out;
}

const jsonish = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  fc.dictionary(
    fc.constantFrom(
      'name',
      'scopes',
      'owner_id',
      'kind',
      'roles',
      'job_type',
      'spec',
      'cron',
      'formation_id',
      'limit',
      'grant_type',
      'provider_type',
      'base_url',
      'password',
    ),
    fc.oneof(fc.string(), fc.integer(), fc.constant(null), fc.array(fc.string(), { maxLength: 3 }), fc.boolean(), fc.double()),
  ),
);

const pathId = fc.oneof(
  fc.string({ maxLength: 30 }),
  fc.constantFrom('key_00000000000000000000', '../../etc/passwd', '%00', "' OR 1=1 --", 'x'.repeat(300), '-1', '0'),
);

test('random and malformed input on every route: never a 5xx, always the envelope', async () => {
  const t = await inProcessCell({ config: { rate: { capacity: 1e9, refillPerSecond: 1e9 } } });
  try {
    const routes = routesOf(t);
    assert.ok(routes.length >= 10, `expected many routes, found ${routes.length}`);
    for (const { method, path } of routes) {
      const failure = await fc.check(
        fc.asyncProperty(jsonish, pathId, fc.boolean(), async (body, id, raw) => {
          const p = path.replace(/:[A-Za-z_]+/g, () => encodeURIComponent(id) || 'x');
          const opts = raw ? { token: t.adminKey, rawBody: JSON.stringify(body).slice(0, -1) + '}{' } : { token: t.adminKey, body };
          const r = await t.request(method, p, method === 'GET' || method === 'HEAD' ? { token: t.adminKey } : opts);
          assertEnvelope(r, `${method} ${p}`);
        }),
        { numRuns: 15, seed: 4242 },
      );
      if (failure.failed) {
        const cause = failure.errorInstance instanceof Error ? failure.errorInstance.message : String(failure.errorInstance);
        assert.fail(`${method} ${path} with ${JSON.stringify(failure.counterexample)}: ${cause}`);
      }
    }
  } finally {
    await t.close();
  }
});

test('odd query values and garbage credentials get 400/401 envelopes', async () => {
  const t = await inProcessCell({ config: { rate: { capacity: 1e9, refillPerSecond: 1e9 } } });
  try {
    for (const q of ['limit=0', 'limit=2001000', 'limit=-1', 'limit=abc', 'offset=-5', 'limit=1.5', 'limit=']) {
      const r = await t.request('GET', `/api/public/v1/admin/api-keys?${q}`, { token: t.adminKey });
      assert.equal(r.status, 400, q);
      assertEnvelope(r, q);
    }
    for (const h of [
      'Bearer',
      'Bearer ',
      'Basic abc',
      'Bearer svck_live_short',
      'Bearer a.b.c',
      'Bearer ' + 'x'.repeat(5000),
      'DPoP svck_live_' + 'A'.repeat(43),
    ]) {
      const r = await t.request('GET', '/api/public/v1/admin/api-keys', { headers: { authorization: h } });
      assert.equal(r.status, 401, h.slice(0, 40));
      assertEnvelope(r, h.slice(0, 40));
    }
    const big = await t.request('POST', '/api/public/v1/admin/api-keys', {
      token: t.adminKey,
      rawBody: JSON.stringify({ name: 'x'.repeat(2 * 1024 * 1024) }),
    });
    assert.equal(big.status, 400);
    assert.equal(big.body.details.reason, 'body_too_large');
    const notJson = await t.request('POST', '/api/public/v1/admin/api-keys', {
      token: t.adminKey,
      rawBody: '{"name":',
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(notJson.status, 400);
    assertEnvelope(notJson, 'truncated json');
    const wrongType = await t.request('POST', '/api/public/v1/admin/api-keys', {
      token: t.adminKey,
      rawBody: 'name=x',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    assert.equal(wrongType.status, 400);
    const unknown = await t.request('GET', '/api/public/v1/admin/no-such-thing', { token: t.adminKey });
    assert.equal(unknown.status, 404);
    assertEnvelope(unknown, 'unknown path');
  } finally {
    await t.close();
  }
});
