// The pin of an imported tool (core/catalog/pin.ts) and the review's diff (core/catalog/diff.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { declaredIdempotent, definitionPin, pinnedDefinition, sideEffecting, type PinnedDefinition } from '../../../core/catalog/pin.ts';
import { definitionDiff } from '../../../core/catalog/diff.ts';
import { canonicalJson, sha256Hex } from '../../../core/canonical.ts';

const def = (t: unknown): PinnedDefinition => {
  const r = pinnedDefinition(t);
  assert.ok(r.ok, JSON.stringify(r));
  return r.definition;
};

test('the pin is the SHA-256 of the RFC 8785 canonical JSON of the reviewed fields, nothing else', () => {
  const listed = {
    name: 'lookup',
    description: 'Find a customer',
    inputSchema: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] },
    annotations: { readOnlyHint: true },
    _meta: { 'example.com/x': 1 },
    icons: [{ src: 'https://example.com/i.png' }],
    execution: { taskSupport: 'forbidden' },
  };
  const d = def(listed);
  assert.deepEqual(Object.keys(d).sort(), ['annotations', 'description', 'inputSchema', 'name']);
  // Independently: the canonical text of exactly those members.
  const text = canonicalJson({
    name: 'lookup',
    description: 'Find a customer',
    inputSchema: listed.inputSchema,
    annotations: listed.annotations,
  });
  assert.equal(definitionPin(d), `sha256:${sha256Hex(text)}`);
  // Member order and fields outside the pin do not change it; the description does.
  const reordered = def({
    annotations: { readOnlyHint: true },
    inputSchema: { required: ['id'], properties: { id: { type: 'string' } }, type: 'object' },
    description: 'Find a customer',
    name: 'lookup',
  });
  assert.equal(definitionPin(reordered), definitionPin(d));
  assert.notEqual(definitionPin(def({ ...listed, description: 'Find a customer and email them' })), definitionPin(d));
});

test('a definition without a name or an object inputSchema is not a tool', () => {
  assert.equal(pinnedDefinition({ inputSchema: {} }).ok, false);
  assert.equal(pinnedDefinition({ name: 'x' }).ok, false);
  assert.equal(pinnedDefinition({ name: 'x', inputSchema: {}, description: 3 }).ok, false);
  assert.equal(pinnedDefinition({ name: 'x', inputSchema: {}, annotations: [] }).ok, false);
});

test('only readOnlyHint: true makes a tool read-only', () => {
  assert.equal(sideEffecting(def({ name: 'a', inputSchema: {} })), true);
  assert.equal(sideEffecting(def({ name: 'a', inputSchema: {}, annotations: { readOnlyHint: false } })), true);
  assert.equal(sideEffecting(def({ name: 'a', inputSchema: {}, annotations: { readOnlyHint: 'true' } })), true);
  assert.equal(sideEffecting(def({ name: 'a', inputSchema: {}, annotations: { readOnlyHint: true, destructiveHint: true } })), false);
});

test('only a side-effecting tool declared idempotentHint: true is idempotent, and the hint is pinned', () => {
  const tool = (annotations?: Record<string, unknown>) => def({ name: 'a', inputSchema: {}, ...(annotations ? { annotations } : {}) });
  assert.equal(declaredIdempotent(tool()), false, "MCP's default is false");
  assert.equal(declaredIdempotent(tool({ idempotentHint: true })), true);
  assert.equal(declaredIdempotent(tool({ readOnlyHint: false, idempotentHint: true, destructiveHint: true })), true);
  assert.equal(declaredIdempotent(tool({ idempotentHint: 'true' })), false);
  assert.equal(declaredIdempotent(tool({ idempotentHint: false })), false);
  // Meaningful only when not read-only (a read-only tool has no effect to repeat).
  assert.equal(declaredIdempotent(tool({ readOnlyHint: true, idempotentHint: true })), false);
  // A server that turns the hint on (or off) after review changes the pin: the call is refused until re-pinned.
  assert.notEqual(definitionPin(tool({ idempotentHint: true })), definitionPin(tool()));
  assert.notEqual(definitionPin(tool({ idempotentHint: true })), definitionPin(tool({ idempotentHint: false })));
});

test('the diff names each change at its JSON Pointer, with both sides', () => {
  const a = {
    name: 'x',
    description: 'old',
    inputSchema: { type: 'object', properties: { 'a/b': { type: 'string' } }, required: ['a/b'] },
  };
  const b = {
    name: 'x',
    description: 'new',
    inputSchema: { type: 'object', properties: { 'a/b': { type: 'number' } }, required: ['a/b', 'c'] },
    annotations: { readOnlyHint: true },
  };
  assert.deepEqual(definitionDiff(a, b), [
    { path: '/annotations', live: { readOnlyHint: true } },
    { path: '/description', pinned: 'old', live: 'new' },
    { path: '/inputSchema/properties/a~1b/type', pinned: 'string', live: 'number' },
    { path: '/inputSchema/required/1', live: 'c' },
  ]);
  assert.deepEqual(definitionDiff(a, a), []);
  assert.equal(definitionDiff({ l: Array.from({ length: 500 }, (_, i) => i) }, { l: [] }, 10).length, 10);
});
