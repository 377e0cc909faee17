import assert from 'node:assert/strict';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { toolRegistryView } from '../../../cell/tools/catalog.ts';
import { startOpenAIServer, type FakeOpenAI } from '../../fixtures/openai-server.ts';

const A = '/api/public/v1/admin';
let t: InProcess;
let ai: FakeOpenAI;
before(async () => {
  t = await inProcessCell({ config: { posture: 'sovereign' } });
  ai = await startOpenAIServer({ apiKey: 'sk-very-secret-value' });
});
after(async () => {
  await t.close();
  await ai.close();
});

test('a secret is stored encrypted, returned only as an id, and used by a provider call', async () => {
  const s = await t.request('POST', `${A}/secrets`, { token: t.adminKey, body: { name: 'openai', value: 'sk-very-secret-value' } });
  assert.equal(s.status, 201, s.text);
  assert.match(s.body.secret_id, /^sec_/);
  assert.equal(s.text.includes('sk-very'), false);
  const keyFile = join(t.dir, 'secrets.key');
  assert.equal(statSync(keyFile).mode & 0o777, 0o600);
  assert.equal(readFileSync(keyFile).length, 32);

  const p = await t.request('POST', `${A}/ai/model-providers`, {
    token: t.adminKey,
    body: { provider_type: 'openai-compatible', default_model: 'fake-1', base_url: `${ai.url}/v1`, api_key_secret_id: s.body.secret_id },
  });
  assert.equal(p.status, 201, p.text);
  assert.equal(p.body.posture.allowed, true);
  assert.equal(p.body.posture.rule, 'loopback-any-posture');
  ai.setResponder(() => ({ content: 'pong' }));
  const r = await t.modules.ai.ai.call(p.body.provider_id, { messages: [{ role: 'user', content: 'ping' }] });
  assert.equal(r.content, 'pong');
  assert.equal(ai.requests.at(-1)!.body.model, 'fake-1');

  const list = await t.request('GET', `${A}/ai/model-providers`, { token: t.adminKey });
  assert.equal(list.status, 200);
  assert.equal(list.body.providers.length, 1);
  assert.equal(JSON.stringify(list.body).includes('sk-very'), false);
  const one = await t.request('GET', `${A}/ai/model-providers/${p.body.provider_id}`, { token: t.adminKey });
  assert.equal(one.body.provider_id, p.body.provider_id);
});

test('a raw key field is refused (strict body)', async () => {
  const r = await t.request('POST', `${A}/ai/model-providers`, {
    token: t.adminKey,
    body: { provider_type: 'openai-compatible', default_model: 'm', base_url: `${ai.url}/v1`, api_key: 'sk-raw' },
  });
  assert.equal(r.status, 400);
  assert.equal(r.body.error, 'invalid_request');
});

test('a provider forbidden by the posture is refused at registration and audited', async () => {
  const r = await t.request('POST', `${A}/ai/model-providers`, {
    token: t.adminKey,
    body: { provider_type: 'openai-compatible', default_model: 'gpt', base_url: 'https://api.openai.com/v1' },
  });
  assert.equal(r.status, 403);
  assert.equal(r.body.error, 'forbidden');
  assert.equal(r.body.details.reason, 'posture_forbidden');
  assert.equal(r.body.details.rule, 'public-needs-cloud-enabled');
  const audit = await t.request('GET', `${A}/audit?limit=20`, { token: t.adminKey });
  assert.equal(audit.status, 200, audit.text);
  const rows = (audit.body.entries ?? audit.body.audit ?? audit.body.items ?? []) as { action: string; outcome: string }[];
  assert.ok(
    rows.some((e) => e.action === 'ai.provider.register' && e.outcome === 'refused'),
    audit.text,
  );
});

test('unknown provider types and unknown secrets are refused', async () => {
  const r1 = await t.request('POST', `${A}/ai/model-providers`, {
    token: t.adminKey,
    body: { provider_type: 'magic', default_model: 'm', base_url: 'http://127.0.0.1:1' },
  });
  assert.equal(r1.status, 403);
  assert.equal(r1.body.details.rule, 'unknown-type');
  const r2 = await t.request('POST', `${A}/ai/model-providers`, {
    token: t.adminKey,
    body: {
      provider_type: 'openai-compatible',
      default_model: 'm',
      base_url: 'http://127.0.0.1:1',
      api_key_secret_id: 'sec_00000000000000000000',
    },
  });
  assert.equal(r2.status, 400);
  assert.equal(r2.body.details.reason, 'unknown_secret');
});

test('agent runtimes and the tool registry', async () => {
  const rt = await t.request('GET', `${A}/ai/agent-runtimes`, { token: t.adminKey });
  assert.equal(rt.status, 200);
  assert.deepEqual(
    rt.body.runtimes.map((x: { runtime: string }) => x.runtime),
    ['openai-compatible', 'local-signed'],
  );
  // Both answer with tool calls and take every tool_choice; only the local model's calls are grammar-constrained.
  assert.deepEqual(
    rt.body.runtimes.map((x: { tool_calls: boolean; tool_choice: string[]; constrained_tool_calls: boolean }) => [
      x.tool_calls,
      x.tool_choice,
      x.constrained_tool_calls,
    ]),
    [
      [true, ['auto', 'none', 'required', 'named'], false],
      [true, ['auto', 'none', 'required', 'named'], true],
    ],
  );
  const tools = await t.request('GET', `${A}/ai/tool-registry`, { token: t.adminKey });
  assert.equal(tools.status, 200);
  assert.ok(tools.body.tools.some((x: { name: string }) => x.name === 'calc'));
  assert.equal(tools.headers.get('content-type'), 'application/json');
  const all = toolRegistryView();
  assert.equal(
    tools.text,
    JSON.stringify({ tools: all, limit: 100, offset: 0, total: all.length }),
    'the catalog, as c.json would write it',
  );
  // A page of it is sliced like any list.
  const page = await t.request('GET', `${A}/ai/tool-registry?limit=2&offset=1`, { token: t.adminKey });
  assert.equal(page.status, 200);
  assert.deepEqual(page.body, { tools: all.slice(1, 3), limit: 2, offset: 1, total: all.length });
});

test('without a credential: 401', async () => {
  const r = await t.request('GET', `${A}/ai/tool-registry`);
  assert.equal(r.status, 401);
});

test('local-signed: a model name, no URL, no secret; a model not installed fails closed at call time', async () => {
  const ok = await t.request('POST', `${A}/ai/model-providers`, {
    token: t.adminKey,
    body: { provider_type: 'local-signed', default_model: 'tiny-model' },
  });
  assert.equal(ok.status, 201, ok.text);
  assert.equal(ok.body.posture.allowed, true);
  assert.equal(ok.body.posture.rule, 'local-signed');
  const badName = await t.request('POST', `${A}/ai/model-providers`, {
    token: t.adminKey,
    body: { provider_type: 'local-signed', default_model: '../etc/passwd' },
  });
  assert.equal(badName.body.details.reason, 'bad_model_name');
  const url = await t.request('POST', `${A}/ai/model-providers`, {
    token: t.adminKey,
    body: { provider_type: 'local-signed', default_model: 'tiny', base_url: 'http://127.0.0.1:1' },
  });
  assert.equal(url.status, 403);
  assert.equal(url.body.details.rule, 'local-signed-no-url');
  await assert.rejects(
    t.modules.ai.ai.call(ok.body.provider_id, { messages: [] }),
    (e: any) => e.code === 'service_unavailable' && ['runtime_unavailable', 'model_missing'].includes(e.details.reason),
  );
});
