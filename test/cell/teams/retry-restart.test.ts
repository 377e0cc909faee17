/**
 * A backoff wait is a durable timer (issue #24): a real cell process
 * (`node dist/cell.mjs serve`) waiting to retry a failed model call is killed
 * with SIGKILL; started again on its data, it resumes the wait: the next
 * attempt reaches the provider at the due time the journal recorded, not a
 * whole backoff after the restart. Needs `node scripts/build.mjs`.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import type { FakeOpenAI } from '../../fixtures/openai-server.ts';
import { startCellProcess, type CellProcess } from '../../helpers/cell-process.ts';
import { failOnceProvider, runWaitingToRetry } from '../../helpers/retry-wait.ts';
import { A, T, httpApi, ok, provider } from '../../helpers/teams.ts';
import { until } from '../../helpers/until.ts';

const BACKOFF_MS = 8_000;
let ai: FakeOpenAI | undefined;
let cell: CellProcess | undefined;
after(async () => {
  await cell?.kill().catch(() => undefined);
  cell?.cleanup();
  await ai?.close();
});

test('a restart after SIGKILL during a backoff resumes the wait at its recorded due time', async () => {
  const fake = await failOnceProvider();
  ai = fake.ai;
  const callsAt = fake.callsAt;
  cell = await startCellProcess();
  let api = httpApi(cell.url, cell.adminKey);
  await provider(api, ai);

  // The first attempt failed and its retry is due BACKOFF_MS later: the run waits.
  const { crew, run, failed } = await runWaitingToRetry(api, 'durable-backoff', BACKOFF_MS);
  const retryAt = failed.data.retry_at as number;
  // (On PostgreSQL the cell's clock is the database's, read again between the record and the due time.)
  assert.ok(Math.abs(retryAt - failed.at - BACKOFF_MS) < 500, `due ${retryAt - failed.at} ms after the failure`);

  await cell.kill('SIGKILL');
  cell = await startCellProcess({ dataDir: cell.dataDir });
  const restartedAt = Date.now();
  api = httpApi(cell.url, cell.adminKey);
  const done = await until(
    'the run to complete after the restart',
    async () => {
      const r = await ok(api, 'GET', `${T}/crews/${crew}/runs/${run}`);
      return r.state === 'completed' || r.state === 'failed' ? r : null;
    },
    120_000,
  );
  assert.equal(done.state, 'completed', JSON.stringify(done.error));
  assert.equal(done.output, 'after the wait');
  assert.equal(callsAt.length, 2, 'one retry');
  // The retry came at the recorded due time (the clocks are this machine's), not a whole backoff after the restart.
  assert.ok(callsAt[1]! >= retryAt - 500, `retried ${retryAt - callsAt[1]!} ms early`);
  assert.ok(callsAt[1]! < restartedAt + BACKOFF_MS, 'the wait resumed; it did not start again');
  const j = await ok(api, 'GET', `${A}/jobs/runs/${run}/journal`);
  const attempts = (j.records as any[]).filter((r) => r.kind === 'attempt').map((r) => [r.data.attempt, r.data.outcome]);
  assert.deepEqual(attempts, [
    [1, 'failed'],
    [2, 'ok'],
  ]);
});
