import assert from 'node:assert/strict';
import { test } from 'node:test';
import { evaluateArithmetic } from '../../../core/catalog/calc.ts';
import { egressAllowed } from '../../../core/authority/egress.ts';
import { TOOLS, toolRegistryView } from '../../../cell/tools/catalog.ts';
import { isServiceError } from '../../../core/errors.ts';

test('calc evaluates arithmetic with precedence, never code', () => {
  assert.equal(evaluateArithmetic('1 + 2 * 3'), 7);
  assert.equal(evaluateArithmetic('(1 + 2) * 3'), 9);
  assert.equal(evaluateArithmetic('2 ^ 3 ^ 2'), 512);
  assert.equal(evaluateArithmetic('-4 + 10 % 3'), -3);
  assert.equal(evaluateArithmetic('1.5e2 / 3'), 50);
  for (const bad of ['', 'process.exit(1)', '1 +', '1/0', '((((1', 'x', '1 2', '('.repeat(40) + '1' + ')'.repeat(40), '9'.repeat(300)]) {
    assert.throws(
      () => evaluateArithmetic(bad),
      (e: unknown) => isServiceError(e) && e.code === 'invalid_request',
      bad,
    );
  }
});

test('egress allowlist: origins, hosts, wildcards, kv, stdio sources; empty denies', () => {
  assert.equal(egressAllowed([], 'https://a.example'), false);
  assert.equal(egressAllowed(undefined, 'kv:ws1'), false);
  assert.equal(egressAllowed(['https://a.example'], 'https://a.example/x'), true);
  assert.equal(egressAllowed(['https://a.example'], 'http://a.example/x'), false);
  assert.equal(egressAllowed(['http://127.0.0.1:8080'], 'http://127.0.0.1:8081/'), false);
  assert.equal(egressAllowed(['a.example'], 'http://a.example:99/'), true);
  assert.equal(egressAllowed(['*.example.com'], 'https://x.example.com/'), true);
  assert.equal(egressAllowed(['*.example.com'], 'https://example.com/'), false);
  assert.equal(egressAllowed(['*.example.com'], 'https://evilexample.com/'), false);
  assert.equal(egressAllowed(['kv:ws1'], 'kv:ws1'), true);
  assert.equal(egressAllowed(['kv:ws1'], 'kv:ws2'), false);
  assert.equal(egressAllowed(['kv:*'], 'https://a.example'), false);
  assert.equal(egressAllowed(['mcp:files'], 'mcp:files'), true);
  assert.equal(egressAllowed(['mcp:*'], 'mcp:files'), true);
  assert.equal(egressAllowed(['*'], 'mcp:files'), true);
  assert.equal(egressAllowed(['mcp:files'], 'mcp:other'), false);
  assert.equal(egressAllowed(['kv:*', 'files'], 'mcp:files'), false);
  assert.equal(egressAllowed(['mcp:*'], 'https://a.example'), false);
});

test('every tool declares read-only or side-effecting and parameters', () => {
  const names = TOOLS.map((t) => t.name).sort();
  assert.deepEqual(names, ['calc', 'clock.now', 'http.get', 'http.request', 'kv.get', 'kv.put']);
  const v = toolRegistryView();
  assert.equal(v.find((t) => t.name === 'kv.put')!.side_effects, true);
  assert.equal(v.find((t) => t.name === 'kv.get')!.read_only, true);
  assert.equal(v.find((t) => t.name === 'http.request')!.side_effects, true);
});

test('every side-effecting tool says which of its calls may be issued again after a lost outcome', () => {
  const v = new Map(toolRegistryView().map((t) => [t.name, t]));
  assert.equal(v.get('kv.put')!.idempotent, true, 'the same value under the same key');
  assert.deepEqual(v.get('http.request')!.idempotent, { argument: 'method', values: ['GET', 'HEAD', 'PUT', 'DELETE'] });
  for (const t of v.values()) if (!t.side_effects) assert.equal(t.idempotent, false, t.name);
});

test('egress allowlist with methods: an entry without methods allows GET and HEAD only; a write needs its method named', () => {
  assert.equal(egressAllowed(['https://a.example'], 'https://a.example/x', 'GET'), true);
  assert.equal(egressAllowed(['https://a.example'], 'https://a.example/x', 'HEAD'), true);
  for (const m of ['POST', 'PUT', 'PATCH', 'DELETE'] as const) {
    assert.equal(egressAllowed(['https://a.example'], 'https://a.example/x', m), false, `${m} without a method entry`);
    assert.equal(egressAllowed(['*'], 'https://a.example/x', m), false, `${m} under * without methods`);
    assert.equal(egressAllowed(['*:https://a.example'], 'https://a.example/x', m), true, `${m} under *:`);
  }
  assert.equal(egressAllowed(['POST,PUT:https://a.example'], 'https://a.example/x', 'POST'), true);
  assert.equal(egressAllowed(['POST,PUT:https://a.example'], 'https://a.example/x', 'PATCH'), false);
  assert.equal(egressAllowed(['POST,PUT:https://a.example'], 'https://a.example/x', 'GET'), false, 'a write entry is not a read entry');
  assert.equal(egressAllowed(['POST:https://a.example'], 'https://b.example/x', 'POST'), false);
  assert.equal(egressAllowed(['DELETE:*.example.com'], 'https://x.example.com/', 'DELETE'), true);
  assert.equal(egressAllowed(['POST:*'], 'https://anywhere.example/', 'POST'), true);
  assert.equal(egressAllowed(['*:*'], 'https://anywhere.example/', 'PATCH'), true);
  // Methods are HTTP only: no entry naming them reaches workspace storage.
  assert.equal(egressAllowed(['*:*'], 'kv:ws1'), false);
  assert.equal(egressAllowed(['*'], 'kv:ws1'), true);
  // Lower-case or unknown method names are no method list (the entry matches nothing as a URL).
  assert.equal(egressAllowed(['post:https://a.example'], 'https://a.example/x', 'POST'), false);
  assert.equal(egressAllowed(['TRACE:https://a.example'], 'https://a.example/x', 'GET'), false);
});
