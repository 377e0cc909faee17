// The engine's chat as node-llama-cpp's function calling takes it (runtime/local-chat.ts): the grammar a tool's
// schema becomes, the functions offered per tool_choice, the history with calls and their results, and the calls
// back in the catalog's spelling with ids unique in the conversation. Pure: no model is loaded here
// (test/edge/local-tool-calls.test.ts runs them on the real runtime).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chatHistory, engineCalls, functionsOf, grammarSchema, paramsDelta } from '../../runtime/local-chat.ts';
import type { ChatMessage } from '../../core/engine/types.ts';

const SCALAR = { oneOf: [{ type: 'string', maxLength: 256 }, { type: 'boolean' }, { type: 'null' }] };

test('a schema becomes a bounded grammar: strings, lists, small integer ranges, objects closed', () => {
  assert.deepEqual(grammarSchema({ type: 'string' }), { type: 'string', maxLength: 256 });
  assert.deepEqual(grammarSchema({ type: 'string', minLength: 1, maxLength: 200 }), { type: 'string', minLength: 1, maxLength: 200 });
  assert.deepEqual(grammarSchema({ type: 'string', maxLength: 10_000 }), { type: 'string', maxLength: 256 });
  assert.deepEqual(grammarSchema({ type: 'array', items: { type: 'string' }, maxItems: 16 }), {
    type: 'array',
    items: { type: 'string', maxLength: 256 },
    maxItems: 16,
  });
  assert.deepEqual(grammarSchema({ type: 'array' }), { type: 'array', items: SCALAR, maxItems: 16 });
  assert.deepEqual(grammarSchema({ type: 'integer', minimum: 0, maximum: 3 }), { enum: [0, 1, 2, 3] });
  // Always values: node-llama-cpp's integer grammar takes an exponent (1e-5), which parses to no integer.
  const range = (from: number, n: number) => ({ enum: Array.from({ length: n }, (_, i) => from + i) });
  assert.deepEqual(grammarSchema({ type: 'integer', minimum: 0, maximum: 255 }), range(0, 256));
  assert.deepEqual(grammarSchema({ type: 'integer', minimum: 0 }), range(0, 16), 'an open range: its first 16 values');
  assert.deepEqual(grammarSchema({ type: 'integer', minimum: 0, maximum: 10_000 }), range(0, 16));
  assert.deepEqual(grammarSchema({ type: 'integer', maximum: 10 }), range(-5, 16), 'down from its maximum');
  assert.deepEqual(grammarSchema({ type: 'integer' }), range(0, 16));
  assert.deepEqual(grammarSchema({ type: 'integer', minimum: 5, maximum: 1 }), { enum: [5] });
  assert.deepEqual(
    grammarSchema({
      type: 'object',
      properties: { key: { type: 'string', description: 'the key' }, n: { type: 'number' } },
      required: ['key', 'ghost'],
      patternProperties: { '^x': {} },
    }),
    {
      type: 'object',
      properties: { key: { type: 'string', maxLength: 256, description: 'the key' }, n: { type: 'number' } },
      required: ['key'],
      additionalProperties: false,
    },
  );
  assert.deepEqual(grammarSchema({ properties: {} }), { type: 'object', properties: {}, additionalProperties: false });
});

test('values the grammar cannot state become what it can: enums, constants, alternatives, any scalar', () => {
  assert.deepEqual(grammarSchema({}), SCALAR, 'a value of any type');
  assert.deepEqual(grammarSchema({ $ref: '#/$defs/x' }), SCALAR);
  assert.deepEqual(grammarSchema({ enum: ['a', 1, null] }), { enum: ['a', 1, null] });
  assert.deepEqual(grammarSchema({ enum: [{ a: 1 }] }), SCALAR, 'an enum of objects is not one the grammar takes');
  assert.deepEqual(grammarSchema({ const: 'x' }), { const: 'x' });
  assert.deepEqual(grammarSchema({ anyOf: [{ type: 'string' }, { type: 'null' }] }), {
    oneOf: [{ type: 'string', maxLength: 256 }, { type: 'null' }],
  });
  assert.deepEqual(grammarSchema({ type: ['string', 'null'] }), { oneOf: [{ type: 'string', maxLength: 256 }, { type: 'null' }] });
  assert.deepEqual(grammarSchema({ type: 'weird' }), SCALAR);
  // Deep nesting ends in a scalar: the grammar is finite whatever the schema.
  let deep: Record<string, unknown> = { type: 'string' };
  for (let i = 0; i < 20; i++) deep = { type: 'object', properties: { x: deep } };
  assert.ok(JSON.stringify(grammarSchema(deep)).includes('"oneOf"'));
});

const TOOLS = [
  { name: 'kv.get', description: 'read', parameters: { type: 'object', properties: { key: { type: 'string' } } } },
  { name: 'clock.now', description: 'now', parameters: { type: 'object', properties: {} } },
];

test('the functions offered: all of them, the named one alone, or none; by wire name', () => {
  assert.deepEqual(Object.keys(functionsOf(TOOLS, undefined)), ['kv__get', 'clock__now']);
  assert.deepEqual(Object.keys(functionsOf(TOOLS, 'required')), ['kv__get', 'clock__now']);
  assert.deepEqual(Object.keys(functionsOf(TOOLS, { name: 'clock.now' })), ['clock__now']);
  assert.deepEqual(functionsOf(TOOLS, 'none'), {});
  assert.deepEqual(functionsOf(TOOLS, { name: 'clock.now' })['clock__now'], {
    description: 'now',
    params: { type: 'object', properties: {}, additionalProperties: false },
  });
});

test('the history keeps each call with the result the tool gave it, and ends with the turn to generate', () => {
  const messages: ChatMessage[] = [
    { role: 'system', content: 'You are the scout.' },
    { role: 'user', content: 'go' },
    { role: 'assistant', content: '', tool_calls: [{ id: 'call_0', name: 'kv.get', arguments: { key: 'a' } }] },
    { role: 'tool', tool_call_id: 'call_0', content: '{"found":false}' },
    { role: 'assistant', content: 'thinking', tool_calls: [{ id: 'call_1', name: 'clock.now', arguments: {} }] },
    { role: 'tool', tool_call_id: 'call_1', content: 'not json' },
  ];
  assert.deepEqual(chatHistory(messages), [
    { type: 'system', text: 'You are the scout.' },
    { type: 'user', text: 'go' },
    { type: 'model', response: [{ type: 'functionCall', name: 'kv__get', params: { key: 'a' }, result: { found: false } }] },
    { type: 'model', response: ['thinking', { type: 'functionCall', name: 'clock__now', params: {}, result: 'not json' }] },
    { type: 'model', response: [] },
  ]);
  // Calls come back in the catalog's spelling, numbered after the conversation's calls.
  assert.deepEqual(engineCalls(messages, [{ functionName: 'kv__get', params: { key: 'b' } }]), [
    { id: 'call_2', name: 'kv.get', arguments: { key: 'b' } },
  ]);
  assert.deepEqual(engineCalls([], [{ functionName: 'clock__now', params: undefined }]), [
    { id: 'call_0', name: 'clock.now', arguments: {} },
  ]);
  assert.deepEqual(paramsDelta({ callIndex: 0, functionName: 'kv__get', paramsChunk: '{"k' }), {
    text: '{"k',
    tool_call: { index: 0, name: 'kv.get' },
  });
});
