// How many tokens a model call reserves (core/engine/budget.ts): max_tokens, or what is left,
// refused only below the floor; the same rule for the seat ceiling, the cell's ledger and the device's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { MIN_MODEL_TOKENS, grantTokens, tokenFloor } from '../../../core/engine/budget.ts';

test('grantTokens: all of it when enough is left, what is left down to the floor, null below it', () => {
  assert.equal(MIN_MODEL_TOKENS, 64);
  assert.equal(grantTokens(1024, 5000, 64), 1024);
  assert.equal(grantTokens(1024, 500, 64), 500);
  assert.equal(grantTokens(1024, 64, 64), 64);
  assert.equal(grantTokens(1024, 63, 64), null);
  assert.equal(grantTokens(1024, -10, 64), null);
  assert.equal(grantTokens(1024, 100.7, 64), 100, 'whole tokens');
  assert.equal(grantTokens(16, 10, tokenFloor(16)), null, 'a call asking for 16 needs 16');
  assert.equal(grantTokens(16, 16, tokenFloor(16)), 16);
  assert.equal(tokenFloor(1024), 64);
  assert.equal(tokenFloor(10), 10);
});

test('grantTokens never grants more than asked or left, and refuses only below the floor', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 1e6 }), fc.integer({ min: -1e3, max: 1e6 }), (requested, left) => {
      const floor = tokenFloor(requested);
      const g = grantTokens(requested, left, floor);
      if (g === null) return Math.min(requested, left) < floor;
      return g <= requested && g <= left && g >= floor && g === Math.min(requested, left);
    }),
  );
});

// What a model call is charged, failed or not (issue 36: retries charged nothing, so 50 partly streamed
// failed calls left a ledger at spent 0).
import { runGraph } from '../../../core/engine/run.ts';
import { consumedBy, estimateTokens, failedCallTokens, withConsumed } from '../../../core/engine/budget.ts';
import type { ModelPort } from '../../../core/engine/types.ts';
import { OPTS, answer, graph, ports, seat } from './_harness.ts';
import { modelUsageByAgent } from '../../../core/journal/usage.ts';

const providerError = () =>
  Object.assign(new Error('the model provider failed'), {
    name: 'ServiceError',
    code: 'service_unavailable',
    details: { reason: 'provider_error' },
  });

/** A port that streams `pieces` of an answer, then fails (or answers, when `then` gives one). */
function streamingThen(pieces: string[], then: () => never | ReturnType<typeof answer>): ModelPort {
  return {
    async complete(_req, opts) {
      for (const p of pieces) opts?.onDelta?.({ text: p });
      return then();
    },
  };
}

test('failedCallTokens: what the port reported, else the streamed fragments and the prompt estimated, else nothing', () => {
  const messages = [{ content: 'x'.repeat(40) }, { content: null }];
  assert.equal(estimateTokens('x'.repeat(40)), 10);
  assert.equal(failedCallTokens(new Error('x'), 0, messages), 0, 'nothing streamed: nothing billed');
  assert.equal(failedCallTokens(new Error('x'), 3, messages), 13);
  const reported = withConsumed(new Error('x'), { input_tokens: 100, output_tokens: 7 });
  assert.deepEqual(consumedBy(reported), { input_tokens: 100, output_tokens: 7 });
  assert.equal(failedCallTokens(reported, 3, messages), 107);
  assert.equal(consumedBy({ consumed: { input_tokens: -1, output_tokens: 2 } }), null);
});

test('a call that fails after part of its answer streamed is charged to the ledger and the attempt record', async () => {
  const retry = { max_attempts: 3, backoff_ms: 0, max_backoff_ms: 0, on: ['provider_error' as const] };
  const g = graph([{ id: 'a', kind: 'agent', seat: 'a', config: { retry } }], [], [seat('a')]);
  const { p, j, b } = await ports({}, ['agt_a']);
  let n = 0;
  const model = streamingThen(['a', 'b', 'c'], () => {
    if (n++ < 2) throw providerError();
    return answer('abc');
  });
  const r = await runGraph(g, 'go', { ...p, model, attempts: j.attempts }, OPTS);
  assert.equal(r.outcome, 'completed', JSON.stringify(r));
  const attempts = j.records.filter((x) => x.kind === 'attempt').map((x) => x.data);
  assert.equal(attempts.length, 3);
  const failedCharge = attempts[0]!['usage'] as number;
  assert.ok(failedCharge >= 3, `a failed attempt records what it was charged: ${JSON.stringify(attempts[0])}`);
  assert.equal(attempts[1]!['usage'], failedCharge);
  assert.equal(attempts[2]!['usage'], undefined, 'the answered attempt is charged its usage, in its step record');
  const commits = b.log.filter((l) => l.startsWith('commit')).map((l) => Number(l.split(' ')[2]));
  assert.deepEqual(commits.slice(0, 2), [failedCharge, failedCharge]);
  assert.equal(b.used, 2 * failedCharge + commits[2]!, 'the ledger holds every attempt');
});

test('a call that fails before anything streamed is charged nothing; one the port reports is charged that', async () => {
  const g = graph([{ id: 'a', kind: 'agent', seat: 'a', config: {} }], [], [seat('a')]);
  const quiet = await ports({}, ['agt_a']);
  const r1 = await runGraph(
    g,
    'go',
    {
      ...quiet.p,
      model: streamingThen([], () => {
        throw providerError();
      }),
    },
    OPTS,
  );
  assert.equal(r1.outcome, 'failed');
  assert.equal(quiet.b.used, 0);
  assert.equal(quiet.j.records.filter((x) => x.kind === 'attempt').length, 0, 'nothing consumed, nothing recorded');
  const told = await ports({}, ['agt_a']);
  const r2 = await runGraph(
    g,
    'go',
    {
      ...told.p,
      model: streamingThen(['a'], () => {
        throw withConsumed(providerError(), { input_tokens: 40, output_tokens: 9 });
      }),
    },
    OPTS,
  );
  assert.equal(r2.outcome, 'failed');
  assert.equal(told.b.used, 49);
  // With no retry policy, one failed attempt record says what was consumed: the journal shows all the run spent.
  const attempts = told.j.records.filter((x) => x.kind === 'attempt');
  assert.equal(attempts.length, 1);
  assert.deepEqual({ ...attempts[0]!.data }, { call: 'model', attempt: 1, outcome: 'failed', reason: 'provider_error', usage: 49 });
  assert.deepEqual(
    modelUsageByAgent(
      told.j.records,
      (s) => (s === 'a' ? 'agt_a' : null),
      (h) => told.j.blobs.get(h),
    ),
    { agt_a: 49 },
    'a journal import charges it',
  );
});

test("an answer is charged its usage and what the port's own failed attempts consumed before it", async () => {
  const g = graph([{ id: 'a', kind: 'agent', seat: 'a', config: {} }], [], [seat('a')]);
  const { p, j, b } = await ports({}, ['agt_a']);
  const model: ModelPort = {
    async complete() {
      return { ...answer('done'), failed_usage: { input_tokens: 30, output_tokens: 5 } };
    },
  };
  const r = await runGraph(g, 'go', { ...p, model }, OPTS);
  assert.equal(r.outcome, 'completed');
  const usage = answer('done').usage.input_tokens + answer('done').usage.output_tokens;
  assert.equal(b.used, usage + 35);
  const step = j.records.find((x) => x.kind === 'step' && x.step_id.includes('/model/'))!;
  assert.equal(step.data?.['usage'], usage, "the step's usage is its answer's");
  assert.equal(step.data?.['failed_usage'], 35);
  assert.deepEqual(
    j.blobs.get(step.output_hash),
    { content: 'done', usage: answer('done').usage },
    'the recorded answer is the answer alone',
  );
});
