import assert from 'node:assert/strict';
import { test } from 'node:test';
import { evaluateArithmetic } from '../../../cell/tools/calc.ts';
import { egressAllowed } from '../../../cell/tools/egress.ts';
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
  assert.deepEqual(names, ['calc', 'clock.now', 'http.get', 'kv.get', 'kv.put']);
  const v = toolRegistryView();
  assert.equal(v.find((t) => t.name === 'kv.put')!.side_effects, true);
  assert.equal(v.find((t) => t.name === 'kv.get')!.read_only, true);
});
