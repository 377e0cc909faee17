// Retries and timeouts in the engine (core/engine/internal/attempts.ts) over the in-memory journal:
// a retried failure records its due time and waits; a drive before the due time waits for the same
// due time; the next attempt closes the run; failures the policy does not name, refusals and step
// timeouts are not retried; without a policy nothing is added to the journal.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runGraph } from '../../../core/engine/run.ts';
import { StepTimeout } from '../../../core/engine/timeout.ts';
import type { ModelPort } from '../../../core/engine/types.ts';
import { OPTS, answer, graph, ports, seat } from './_harness.ts';

/** A provider failure as the cell's client throws it (a ServiceError's shape: name, code, details.reason). */
const providerError = (reason: string) =>
  Object.assign(new Error('the model provider failed'), { name: 'ServiceError', code: 'service_unavailable', details: { reason } });

function failing(failures: unknown[]): { port: ModelPort; calls: number[] } {
  const calls: number[] = [];
  return {
    calls,
    port: {
      async complete() {
        calls.push(calls.length);
        const f = failures.shift();
        if (f !== undefined) throw f;
        return answer('fine');
      },
    },
  };
}

const retry = { max_attempts: 3, backoff_ms: 1000, max_backoff_ms: 1500, on: ['provider_error' as const] };

test('a retried failure waits for its due time, durably; the third attempt completes the run', async () => {
  const m = failing([providerError('provider_error'), providerError('provider_error')]);
  const { p, j, clock } = await ports({}, ['agt_a']);
  const g = graph([{ id: 'a', kind: 'agent', seat: 'a', config: { retry } }], [], [seat('a')]);
  const P = { ...p, model: m.port, attempts: j.attempts };
  let r = await runGraph(g, 'go', P, OPTS);
  assert.equal(r.outcome, 'waiting');
  assert.equal(r.reason, 'retry_backoff');
  const due = r.waiting!.wake_at!;
  assert.equal(due - clock.now(), 1000);
  // Too early: the same due time, no call.
  clock.advance(400);
  r = await runGraph(g, 'go', P, OPTS);
  assert.equal(r.waiting?.wake_at, due);
  assert.equal(m.calls.length, 1);
  clock.advance(600);
  r = await runGraph(g, 'go', P, OPTS);
  assert.equal(r.outcome, 'waiting');
  assert.equal(r.waiting!.wake_at! - clock.now(), 1500, 'doubled, capped');
  clock.advance(1500);
  r = await runGraph(g, 'go', P, OPTS);
  assert.equal(r.outcome, 'completed');
  assert.equal(m.calls.length, 3);
  const attempts = j.records.filter((x) => x.kind === 'attempt').map((x) => [x.data?.['attempt'], x.data?.['outcome']]);
  assert.deepEqual(attempts, [
    [1, 'failed'],
    [2, 'failed'],
    [3, 'ok'],
  ]);
  assert.deepEqual(await j.verify(), { ok: true });
});

test('not retried: a reason the policy does not name, attempts used up, a step timeout; no policy: no attempt records', async () => {
  for (const [failures, policy, reason, calls] of [
    [[providerError('provider_rate_limited')], { retry }, 'model_error', 1],
    [
      [providerError('provider_error'), providerError('provider_error')],
      { retry: { ...retry, max_attempts: 2, backoff_ms: 0, max_backoff_ms: 0 } },
      'model_error',
      2,
    ],
    [[new StepTimeout(50)], { retry, timeout_ms: 50 }, 'step_timeout', 1],
    [[providerError('provider_error')], {}, 'model_error', 1],
  ] as const) {
    const m = failing([...failures]);
    const x = await ports({}, ['agt_a']);
    const g = graph([{ id: 'a', kind: 'agent', seat: 'a', config: { ...policy } }], [], [seat('a')]);
    const r = await runGraph(g, 'go', { ...x.p, model: m.port, attempts: x.j.attempts }, OPTS);
    assert.equal(r.outcome, 'failed');
    assert.equal(r.reason, reason);
    assert.equal(m.calls.length, calls);
    const n = x.j.records.filter((rec) => rec.kind === 'attempt').length;
    assert.equal(n, 'retry' in policy ? calls : 0);
  }
});
