// Tool calls by the local signed model (runtime/local-chat.ts on node-llama-cpp): a forced choice always gives a
// call of an offered tool, its arguments parse and fit the tool's schema, the same prompt gives the same call, the
// call's parameters stream as they are generated, and a signal stops it. The tiny seeded model says nothing
// meaningful: these assert structure and determinism, never meaning.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { findRuntime, loadLocalSignedModel, type LocalModel } from '../../runtime/local-model.ts';
import type { ChatMessage, ModelDelta } from '../../core/engine/types.ts';
import { signedTinyModel } from '../fixtures/tiny-model.ts';

let skip: string | false = false;
try {
  findRuntime();
} catch {
  skip = 'edge-runtime/ is not installed (make edge-runtime)';
}

const TOOLS = [
  {
    name: 'kv.put',
    description: "Write a value to the run's workspace storage.",
    parameters: {
      type: 'object',
      properties: {
        key: { type: 'string', minLength: 1, maxLength: 200 },
        value: {},
        classification: { type: 'integer', minimum: 0, maximum: 100 },
      },
      required: ['key', 'value'],
    },
  },
  { name: 'clock.now', description: 'The current time.', parameters: { type: 'object', properties: {} } },
  {
    name: 'mcp.crm.lookup',
    description: 'Look a customer up.',
    parameters: { type: 'object', properties: { id: { type: 'string', maxLength: 24 }, active: { type: 'boolean' } }, required: ['id'] },
  },
];
const MESSAGES: ChatMessage[] = [
  { role: 'system', content: 'You are the field recorder.' },
  { role: 'user', content: 'Record the pressure reading of pump 7.' },
];

let dir = '';
let model: LocalModel;

before(async () => {
  if (skip) return;
  const f = await signedTinyModel('edge-tools-');
  dir = f.dir;
  model = await loadLocalSignedModel({ modelPath: f.modelPath, manifestPath: f.manifestPath, publishers: f.publishers, scratchDir: dir });
});

after(async () => {
  if (skip) return;
  await model.dispose();
  rmSync(dir, { recursive: true, force: true });
});

/** The arguments fit the tool's schema as the grammar states it: known keys only, required ones present, types right. */
function assertFits(name: string, args: Record<string, unknown>) {
  const tool = TOOLS.find((t) => t.name === name)!;
  const props = tool.parameters.properties as Record<string, { type?: string; maxLength?: number; minimum?: number; maximum?: number }>;
  for (const k of Object.keys(args)) assert.ok(k in props, `${name}: unexpected argument ${k}`);
  for (const k of (tool.parameters as { required?: string[] }).required ?? []) assert.ok(k in args, `${name}: missing ${k}`);
  for (const [k, v] of Object.entries(args)) {
    const p = props[k]!;
    if (p.type === 'string') assert.ok(typeof v === 'string' && v.length <= (p.maxLength ?? 256), `${k}: ${JSON.stringify(v)}`);
    if (p.type === 'boolean') assert.equal(typeof v, 'boolean');
    if (p.type === 'integer') assert.ok(Number.isInteger(v) && (v as number) >= p.minimum! && (v as number) <= p.maximum!, `${k}: ${v}`);
  }
}

test('a named tool is called, with arguments that parse and fit its schema, the same every time', { skip, timeout: 120_000 }, async () => {
  for (const name of ['kv.put', 'clock.now', 'mcp.crm.lookup']) {
    const req = { messages: MESSAGES, tools: TOOLS, toolChoice: { name }, maxTokens: 400 };
    const a = await model.chat(req);
    const b = await model.chat(req);
    assert.deepEqual(a, b, `${name}: greedy decoding gives the same answer`);
    assert.equal(a.toolCalls.length, 1, `${name}: ${JSON.stringify(a)}`);
    assert.equal(a.toolCalls[0]!.name, name);
    assert.equal(a.toolCalls[0]!.id, 'call_0');
    assertFits(name, a.toolCalls[0]!.arguments as Record<string, unknown>);
    assert.ok(a.inputTokens > 0 && a.outputTokens > 0 && a.outputTokens <= 400);
  }
});

test('required gives a call of an offered tool; auto lets the model answer; none offers nothing', { skip, timeout: 120_000 }, async () => {
  // The tiny model fills a string to its bound: a budget the longest call fits in.
  const forced = await model.chat({ messages: MESSAGES, tools: TOOLS, toolChoice: 'required', maxTokens: 1024 });
  assert.equal(forced.toolCalls.length, 1, JSON.stringify(forced));
  assert.ok(TOOLS.some((t) => t.name === forced.toolCalls[0]!.name));
  assertFits(forced.toolCalls[0]!.name, forced.toolCalls[0]!.arguments as Record<string, unknown>);
  // Left to itself the tiny model writes text (noise); whatever it does, it is well formed and repeatable.
  const free = await model.chat({ messages: MESSAGES, tools: TOOLS, maxTokens: 48 });
  assert.deepEqual(await model.chat({ messages: MESSAGES, tools: TOOLS, maxTokens: 48 }), free);
  for (const c of free.toolCalls) assertFits(c.name, c.arguments as Record<string, unknown>);
  assert.ok(free.outputTokens <= 48);
  const none = await model.chat({ messages: MESSAGES, tools: TOOLS, toolChoice: 'none', maxTokens: 24 });
  assert.deepEqual(none.toolCalls, []);
});

test('after a call and its result the model answers the next round; ids stay unique', { skip, timeout: 120_000 }, async () => {
  const first = await model.chat({ messages: MESSAGES, tools: TOOLS, toolChoice: { name: 'clock.now' }, maxTokens: 200 });
  const call = first.toolCalls[0]!;
  const next: ChatMessage[] = [
    ...MESSAGES,
    { role: 'assistant', content: first.text, tool_calls: [call] },
    { role: 'tool', tool_call_id: call.id, content: JSON.stringify({ epoch_ms: 1_700_000_000_000 }) },
  ];
  const a = await model.chat({ messages: next, tools: TOOLS, toolChoice: { name: 'clock.now' }, maxTokens: 200 });
  assert.deepEqual(await model.chat({ messages: next, tools: TOOLS, toolChoice: { name: 'clock.now' }, maxTokens: 200 }), a);
  assert.equal(a.toolCalls[0]!.id, 'call_1', 'numbered after the calls already in the conversation');
  const b = await model.chat({ messages: next, tools: TOOLS, maxTokens: 32 });
  assert.ok(b.inputTokens > first.inputTokens, 'the call and its result are part of the prompt');
});

test("a call's parameters stream as they are generated; together they are its arguments", { skip, timeout: 120_000 }, async () => {
  const deltas: ModelDelta[] = [];
  const a = await model.chat({ messages: MESSAGES, tools: TOOLS, toolChoice: { name: 'mcp.crm.lookup' }, maxTokens: 200 }, (d) =>
    deltas.push(d),
  );
  const params = deltas.filter((d) => d.tool_call !== undefined);
  assert.ok(params.length > 1, JSON.stringify(deltas));
  assert.ok(params.every((d) => d.tool_call!.index === 0 && d.tool_call!.name === 'mcp.crm.lookup'));
  assert.deepEqual(JSON.parse(params.map((d) => d.text).join('')), a.toolCalls[0]!.arguments);
});

test('a signal stops a chat turn, and a queued one is never started', { skip, timeout: 120_000 }, async () => {
  const ac = new AbortController();
  const stopped = model.chat({ messages: MESSAGES, tools: TOOLS, maxTokens: 1000 }, () => ac.abort(), ac.signal);
  const queued = model.chat({ messages: MESSAGES, tools: TOOLS, toolChoice: 'required', maxTokens: 100 }, undefined, AbortSignal.abort());
  await assert.rejects(stopped, (e: { details?: { reason?: string } }) => e.details?.reason === 'cancelled');
  await assert.rejects(queued, (e: { details?: { reason?: string } }) => e.details?.reason === 'cancelled');
  const after = await model.chat({ messages: MESSAGES, tools: TOOLS, toolChoice: { name: 'clock.now' }, maxTokens: 100 });
  assert.equal(after.toolCalls[0]!.name, 'clock.now', 'the model is free again');
});

test('what the kept sequence already holds changes neither an answer nor its token counts', { skip, timeout: 120_000 }, async () => {
  // The one context sequence is kept between the calls of one run (runtime/local-model.ts): a call evaluates only
  // what it does not share with the call before. The same turn after another conversation, after a text prompt,
  // and twice in a row; then in another run, and in none, which start from an empty sequence.
  const partition = 'run_a';
  const req = { messages: MESSAGES, tools: TOOLS, toolChoice: { name: 'kv.put' }, maxTokens: 400, partition };
  const first = await model.chat(req);
  const other = await model.chat({
    messages: [MESSAGES[0]!, { role: 'user', content: 'Something else.' }],
    tools: TOOLS,
    maxTokens: 16,
    partition,
  });
  assert.notDeepEqual(other, first);
  const afterOther = await model.chat(req);
  const prompt = 'system: You are the field recorder.\nuser: Record it.\nassistant:';
  const text = await model.complete(prompt, 24, undefined, undefined, partition);
  const afterText = await model.chat(req);
  const again = await model.chat(req);
  const otherRun = await model.chat({ ...req, partition: 'run_b' });
  const noRun = await model.chat({ ...req, partition: undefined });
  for (const x of [afterOther, afterText, again, otherRun, noRun]) assert.deepEqual(x, first);
  // A text prompt's counts are its whole prompt, whatever the sequence held.
  assert.deepEqual(await model.complete(prompt, 24, undefined, undefined, partition), text);
  assert.deepEqual(await model.complete(prompt, 24), text);
});
