// The engine's model port over the AI module (cell/ai/complete.ts, Ai.complete): the engine's request
// on the OpenAI wire and its answer back, live fragments, and the refusals and failures a run sees,
// against a real cell (in process, its store) and a real HTTP server speaking Chat Completions.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { isEngineRefusal } from '../../../core/engine/refusal.ts';
import { isStepTimeout } from '../../../core/engine/timeout.ts';
import type { ModelDelta, ModelRequest } from '../../../core/engine/types.ts';
import { actor } from '../../helpers/actors.ts';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';
import { A, T, agent, ok, provider, type Api } from '../../helpers/teams.ts';
import { startOpenAIServer, type FakeOpenAI } from '../../fixtures/openai-server.ts';

let t: InProcess;
let ai: FakeOpenAI;
let api: Api;
/** An agent that names no provider: it calls the oldest (the fake server's, registered first). */
let agentId: string;
before(async () => {
  t = await inProcessCell();
  ai = await startOpenAIServer({ apiKey: 'sk-fake' });
  api = { request: t.request, token: t.adminKey };
  await provider(api, ai);
  // Providers registered later are newer: this one stays the oldest.
  t.clock.advance(1000);
  agentId = await agent(api, 'writer');
});
after(async () => {
  await t.close();
  await ai.close();
});

const KV_GET = { name: 'kv.get', description: 'reads a key', side_effects: false, parameters: { type: 'object' } };

function request(agentIdOf: string, extra: Partial<ModelRequest> = {}): ModelRequest {
  return {
    agent: { id: agentIdOf, seat: 's1', model: null },
    messages: [{ role: 'user', content: 'hi' }],
    tools: [],
    max_tokens: 64,
    ...extra,
  };
}

/** A scratch agent bound to a provider of its own. */
async function agentOn(providerId: string): Promise<string> {
  const a = await ok(api, 'POST', `${T}/agents`, { source: 'scratch', role_label: 'bound', provider_id: providerId });
  return a.agent_id;
}

test("the engine's request leaves in the OpenAI wire shape; the answer comes back as the engine's", async () => {
  ai.setResponder(() => ({
    content: null,
    tool_calls: [
      { id: 'c1', name: 'kv__get', arguments: { key: 'a' } },
      { id: 'c2', name: 'kv.get', arguments: 'not json' },
      { id: 'c3', name: 'kv__get', arguments: '[1]' },
    ],
    usage: { prompt_tokens: 7, completion_tokens: 3 },
  }));
  const n = ai.requests.length;
  const answer = await t.modules.ai.ai.complete(
    request(agentId, {
      agent: { id: agentId, seat: 's1', model: 'm-x' },
      messages: [
        { role: 'system', content: 'S' },
        { role: 'assistant', content: '', tool_calls: [{ id: 'c0', name: 'kv.get', arguments: { key: 'k' } }] },
        { role: 'tool', content: 'v', tool_call_id: 'c0' },
      ],
      tools: [KV_GET],
      max_tokens: 42,
    }),
  );
  assert.equal(ai.requests.length, n + 1);
  const body = ai.requests.at(-1)!.body;
  assert.equal(body.model, 'm-x');
  assert.equal(body['max_tokens'], 42);
  assert.deepEqual(body.tools, [
    { type: 'function', function: { name: 'kv__get', description: 'reads a key', parameters: { type: 'object' } } },
  ]);
  assert.deepEqual(body.messages, [
    { role: 'system', content: 'S' },
    {
      role: 'assistant',
      content: '',
      tool_calls: [{ id: 'c0', type: 'function', function: { name: 'kv__get', arguments: '{"key":"k"}' } }],
    },
    { role: 'tool', content: 'v', tool_call_id: 'c0' },
  ]);
  // Tool names in either spelling come back as the catalog's; arguments that are no JSON object come back unparsed.
  assert.deepEqual(answer, {
    content: '',
    usage: { input_tokens: 7, output_tokens: 3 },
    tool_calls: [
      { id: 'c1', name: 'kv.get', arguments: { key: 'a' } },
      { id: 'c2', name: 'kv.get', arguments: { _unparsed: 'not json' } },
      { id: 'c3', name: 'kv.get', arguments: { _unparsed: '[1]' } },
    ],
  });
});

test('without tools or a model of its own, the request names neither: the provider default_model is asked', async () => {
  ai.setResponder(() => ({ content: 'plain' }));
  const answer = await t.modules.ai.ai.complete(request(agentId));
  const body = ai.requests.at(-1)!.body;
  assert.equal(body.model, 'fake-model');
  assert.equal(body.tools, undefined);
  assert.deepEqual(answer, { content: 'plain', usage: { input_tokens: 10, output_tokens: 5 } });
});

test("a streaming provider's fragments reach the engine as they come, tool names in the catalog's spelling", async () => {
  const streaming = await provider(api, ai, 'sk-fake', true);
  const bound = await agentOn(streaming);
  ai.setResponder(() => ({
    content: 'hello',
    pieces: ['he', 'llo'],
    tool_calls: [{ id: 'c9', name: 'kv__get', arguments: { key: 'z' } }],
  }));
  const deltas: ModelDelta[] = [];
  const answer = await t.modules.ai.ai.complete(request(bound, { tools: [KV_GET] }), { onDelta: (d) => deltas.push(d) });
  assert.equal(ai.requests.at(-1)!.body['stream'], true);
  assert.deepEqual(deltas, [
    { text: 'he' },
    { text: 'llo' },
    { text: '{"k', tool_call: { index: 0, id: 'c9', name: 'kv.get' } },
    { text: 'ey":"z"}', tool_call: { index: 0, id: 'c9', name: 'kv.get' } },
  ]);
  assert.equal(answer.content, 'hello');
  assert.deepEqual(answer.tool_calls, [{ id: 'c9', name: 'kv.get', arguments: { key: 'z' } }]);
});

test('an agent no longer known is refused agent_unknown, before anything leaves', async () => {
  const n = ai.requests.length;
  await assert.rejects(t.modules.ai.ai.complete(request('agt_none')), (e: unknown) => {
    assert.ok(isEngineRefusal(e), String(e));
    assert.equal(e.reason, 'agent_unknown');
    assert.deepEqual(e.details, { agent_id: 'agt_none' });
    return true;
  });
  assert.equal(ai.requests.length, n);
});

test("a refusal of the call path is the engine's refusal, reason and details kept: secret_not_usable", async () => {
  // A provider whose registrant bound its own secret, then was archived: the secret may no longer be sent.
  const ops = await actor(t, { name: 'binder', permissions: ['ai.providers', 'secrets.write'] });
  const sec = await t.request('POST', `${A}/secrets`, { token: ops.key, body: { name: 'binders', value: 'sk-fake' } });
  assert.equal(sec.status, 201, sec.text);
  const p = await t.request('POST', `${A}/ai/model-providers`, {
    token: ops.key,
    body: {
      provider_type: 'openai-compatible',
      default_model: 'fake-model',
      base_url: `${ai.url}/v1`,
      api_key_secret_id: sec.body.secret_id,
    },
  });
  assert.equal(p.status, 201, p.text);
  const bound = await agentOn(p.body.provider_id);
  assert.equal((await t.request('POST', `${A}/principals/${ops.id}/archive`, { token: t.adminKey })).status, 200);
  const n = ai.requests.length;
  await assert.rejects(t.modules.ai.ai.complete(request(bound)), (e: unknown) => {
    assert.ok(isEngineRefusal(e), String(e));
    assert.equal(e.reason, 'secret_not_usable');
    assert.deepEqual(e.details, { reason: 'secret_not_usable', provider_id: p.body.provider_id });
    return true;
  });
  assert.equal(ai.requests.length, n);
});

test("a call past the step's timeout is cancelled and thrown as StepTimeout; a provider failure as it is", async () => {
  ai.setResponder(() => ({ content: 'late', delayMs: 600_000 }));
  await assert.rejects(t.modules.ai.ai.complete(request(agentId, { timeout_ms: 200 })), (e: unknown) => {
    assert.ok(isStepTimeout(e), String(e));
    assert.equal(e.timeout_ms, 200);
    return true;
  });
  ai.setResponder(() => ({ status: 400 }));
  await assert.rejects(t.modules.ai.ai.complete(request(agentId)), (e: any) => {
    assert.ok(!isEngineRefusal(e));
    assert.equal(e.code, 'service_unavailable');
    assert.equal(e.details.reason, 'provider_rejected');
    return true;
  });
});

test('with no provider registered, an agent that names none is refused no_provider', async () => {
  const bare = await inProcessCell();
  try {
    const a = await bare.request('POST', `${T}/agents`, { token: bare.adminKey, body: { source: 'scratch', role_label: 'alone' } });
    assert.equal(a.status, 201, a.text);
    await assert.rejects(bare.modules.ai.ai.complete(request(a.body.agent_id)), (e: unknown) => {
      assert.ok(isEngineRefusal(e), String(e));
      assert.equal(e.reason, 'no_provider');
      assert.deepEqual(e.details, { agent_id: a.body.agent_id });
      return true;
    });
  } finally {
    await bare.close();
  }
});
