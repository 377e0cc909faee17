// Step policies (core/engine/policy.ts): the validator names the field of the first problem, the
// canonical form sorts the reasons, and the backoff doubles up to its cap.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backoffAfter, stepPolicyOf, stepPolicyProblem } from '../../../core/engine/policy.ts';

const ok = { max_attempts: 3, backoff_ms: 100, max_backoff_ms: 250, on: ['tool_error', 'provider_error'] };

test('valid policies pass; the first problem names its field', () => {
  assert.equal(stepPolicyProblem({}), null);
  assert.equal(stepPolicyProblem({ timeout_ms: 1, retry: ok, other: 'ignored' }), null);
  const cases: [Record<string, unknown>, string][] = [
    [{ timeout_ms: 0 }, 'timeout_ms'],
    [{ timeout_ms: 1.5 }, 'timeout_ms'],
    [{ retry: [] }, 'retry'],
    [{ retry: { ...ok, extra: 1 } }, 'retry.extra'],
    [{ retry: { ...ok, max_attempts: 1 } }, 'retry.max_attempts'],
    [{ retry: { ...ok, max_attempts: 11 } }, 'retry.max_attempts'],
    [{ retry: { ...ok, backoff_ms: -1 } }, 'retry.backoff_ms'],
    [{ retry: { ...ok, max_backoff_ms: 99 } }, 'retry.max_backoff_ms'],
    [{ retry: { ...ok, on: [] } }, 'retry.on'],
    [{ retry: { ...ok, on: ['tool_error', 'step_timeout'] } }, 'retry.on.1'],
    [{ retry: { ...ok, on: ['tool_error', 'tool_error'] } }, 'retry.on'],
  ];
  for (const [v, field] of cases) assert.equal(stepPolicyProblem(v, 'billets.b1')?.field, `billets.b1.${field}`, JSON.stringify(v));
});

test('the canonical form keeps only the policy, reasons sorted; backoff doubles up to the cap', () => {
  assert.deepEqual(stepPolicyOf({ timeout_ms: 5, retry: ok, prompt: 'x' }), {
    timeout_ms: 5,
    retry: { backoff_ms: 100, max_attempts: 3, max_backoff_ms: 250, on: ['provider_error', 'tool_error'] },
  });
  assert.deepEqual(stepPolicyOf({}), {});
  assert.deepEqual(
    [1, 2, 3, 4].map((n) => backoffAfter({ ...ok, on: ['tool_error'] }, n)),
    [100, 200, 250, 250],
  );
});
