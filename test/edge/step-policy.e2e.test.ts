// Step policies on the real edge program (issue #24), `node dist/edge.mjs serve` with a crew bundle whose
// billets carry them and the signed tiny model: the inspector's retry policy retries a failed local model
// call after its backoff (attempt records, a durable wait that a restart of the device resumes, not
// restarts); the reviewer's timeout stops its local generation and fails the run `step_timeout`.
// The local model's failures come from the program's test hook (AGENT_CELL_EDGE_TEST_FAIL_MODEL_CALLS).
// Needs `node scripts/build.mjs` (dist/edge.mjs) and edge-runtime/.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { edgeWorld, SECRET, T0 } from './_edge-fixtures.ts';
import { edgeProgramMissing as why, serveWorld, stopEdge, untilRun } from './_edge-process.ts';

type World = Awaited<ReturnType<typeof edgeWorld>>;

const serve = (w: World, offsetMs: number, failModelCalls: number) =>
  serveWorld(w, { offsetMs, env: { AGENT_CELL_EDGE_TEST_FAIL_MODEL_CALLS: String(failModelCalls) } });
const kill = stopEdge;

async function call(url: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const r = await fetch(url + path, {
    method,
    headers: { authorization: `Bearer ${SECRET}`, 'content-type': 'application/json' },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: r.status, body: await r.json() };
}

const RUNS = '/api/public/v1/admin/agent-teams/crews/crw_1/runs';

const until = (url: string, runId: string, pred: (r: any) => boolean) =>
  untilRun(async () => (await call(url, 'GET', `${RUNS}/${runId}`)).body, pred);

const ENDED = (r: any) => ['completed', 'failed', 'refused', 'cancelled'].includes(r.state);

test('edge: a retry waits out its backoff, across a restart, and a timeout stops the local model', {
  skip: why(),
  timeout: 300_000,
}, async () => {
  const w = await edgeWorld({
    // Long answers (seconds of generation on the tiny model): the reviewer's 500 ms ends well before one.
    maxTokens: 600,
    policies: {
      a: { retry: { max_attempts: 3, backoff_ms: 8000, max_backoff_ms: 8000, on: ['provider_error'] } },
      b: { timeout_ms: 500 },
    },
  });
  // The bundles were issued at T0: the device's clock reads a second after it, and runs on from there.
  const offset = T0 + 1000 - Date.now();
  try {
    // The first local model call fails; the run waits for its backoff.
    const e1 = await serve(w, offset, 1);
    let runId: string;
    try {
      const p = await call(e1.url, 'POST', RUNS, { input: 'Inspect pump 7.' });
      assert.equal(p.status, 202, JSON.stringify(p.body));
      runId = p.body.run_id;
      const waiting = await until(e1.url, runId, (r) => r.state === 'waiting' || ENDED(r));
      assert.equal(waiting.state, 'waiting', JSON.stringify(waiting));
    } finally {
      // The device stops hard during the wait.
      await kill(e1.proc, 'SIGKILL');
    }
    // Started again (its model now answering): the wait is resumed from the journal, then the run goes on.
    const e2 = await serve(w, offset, 0);
    try {
      const done = await until(e2.url, runId, ENDED);
      assert.equal(done.state, 'failed', JSON.stringify(done));
      assert.equal(done.reason, 'step_timeout');
      const records: any[] = (await call(e2.url, 'GET', `/api/public/v1/admin/jobs/runs/${runId}/journal`)).body.records;

      // The inspector: two attempts, the first failed with provider_error and a due time, the second no sooner.
      const attempts = records.filter((r) => r.kind === 'attempt' && String(r.step_id).startsWith('agent:a'));
      assert.deepEqual(
        attempts.map((r) => [r.data.attempt, r.data.outcome, r.data.reason ?? null]),
        [
          [1, 'failed', 'provider_error'],
          [2, 'ok', null],
        ],
      );
      const retryAt = attempts[0].data.retry_at as number;
      // Due a backoff after the failure (the record is stamped a moment after the failure was seen).
      assert.ok(retryAt - attempts[0].at <= 8000 && retryAt - attempts[0].at > 7000, `due ${retryAt - attempts[0].at} ms after`);
      // A device started again before the due time waits for the same due time: resumed, not restarted.
      const waits = records.filter((r) => r.kind === 'waiting');
      assert.ok(
        waits.length >= 1 && waits.every((x) => x.data.reason === 'retry_backoff' && x.data.wake_at === retryAt),
        JSON.stringify(waits),
      );
      assert.ok(attempts[1].at >= retryAt, 'the second call came no sooner than its due time');
      const step = records.find((r) => r.kind === 'step' && r.step_id === attempts[0].step_id);
      assert.equal(step?.data.attempts, 2);

      // The reviewer: its call ran past 500 ms and was stopped; the run failed step_timeout.
      const finished = records.at(-1);
      assert.equal(finished.kind, 'run_finished');
      assert.equal(finished.data.outcome, 'failed');
      assert.ok(!records.some((r) => r.kind === 'step' && String(r.step_id).startsWith('agent:b')), 'the reviewer never answered');
      // What the stopped call consumed (the tokens it generated before the deadline, if any: a loaded machine
      // may give it none) is recorded, though no retry policy asked for attempts (test/edge/budget-holds.test.ts
      // holds the deterministic case).
      const stopped = records.filter((r) => r.kind === 'attempt' && String(r.step_id).startsWith('agent:b'));
      assert.ok(stopped.length <= 1, JSON.stringify(stopped));
      for (const a of stopped) assert.ok(a.data.outcome === 'failed' && a.data.usage > 0, JSON.stringify(a.data));
    } finally {
      await kill(e2.proc, 'SIGTERM');
    }
  } finally {
    rmSync(w.dir, { recursive: true, force: true });
  }
});
