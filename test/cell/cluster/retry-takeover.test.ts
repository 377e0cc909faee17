/**
 * A backoff wait is taken over by a peer (issue #24): two cells on one
 * PostgreSQL database with short leases; a crew run on cell-a waits to retry
 * a failed model call; cell-a is killed with SIGKILL; cell-b takes the waiting
 * run over and resumes the wait: it waits for the due time cell-a recorded
 * (it does not start the backoff again), then makes the second attempt.
 *
 * Needs `node scripts/build.mjs` and PostgreSQL (CELL_TEST_STORE=postgres); skipped otherwise.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import type { FakeOpenAI } from '../../fixtures/openai-server.ts';
import { startCellProcess, type CellProcess } from '../../helpers/cell-process.ts';
import { TEST_ENGINE } from '../../helpers/inproc.ts';
import { pgDatabase, type PgDatabase } from '../../helpers/postgres.ts';
import { failOnceProvider, runWaitingToRetry } from '../../helpers/retry-wait.ts';
import { A, T, httpApi, ok, provider } from '../../helpers/teams.ts';
import { until } from '../../helpers/until.ts';

const SKIP = TEST_ENGINE !== 'postgres' ? 'needs PostgreSQL (CELL_TEST_STORE=postgres)' : false;
const GROUP_ARGS = ['--posture', 'multi-cell', '--heartbeat-ms', '100', '--lease-ms', '600'];
const BACKOFF_MS = 8_000;

let db: PgDatabase | undefined;
let ai: FakeOpenAI | undefined;
const cells: CellProcess[] = [];
after(async () => {
  for (const c of cells) {
    await c.kill('SIGKILL').catch(() => undefined);
    c.cleanup();
  }
  await ai?.close();
  await db?.drop();
});

test('a peer takes over a run waiting to retry and resumes the wait at its recorded due time', {
  skip: SKIP,
  timeout: 180_000,
}, async () => {
  db = await pgDatabase();
  const fake = await failOnceProvider();
  ai = fake.ai;
  const callsAt = fake.callsAt;
  const a = await startCellProcess({ args: ['--store', db.url, '--cell-id', 'cell-a', ...GROUP_ARGS] });
  cells.push(a);
  const api = httpApi(a.url, a.adminKey);
  await provider(api, ai);
  const b = await startCellProcess({ args: ['--store', db.url, '--cell-id', 'cell-b', ...GROUP_ARGS] });
  cells.push(b);
  const { crew, run, failed } = await runWaitingToRetry(api, 'taken-over-backoff', BACKOFF_MS);
  const retryAt = failed.data.retry_at as number;
  assert.equal(failed.cell_id, 'cell-a');
  // Half the backoff passes on cell-a before it dies. A peer that started the backoff again would
  // call at least a whole backoff after the kill; one that resumes the wait calls at the recorded due
  // time, half a backoff after the kill: a gap wide enough for a slow takeover on a loaded machine.
  await new Promise((r) => setTimeout(r, Math.max(0, retryAt - BACKOFF_MS / 2 - Date.now())));
  await a.kill('SIGKILL');
  const killedAt = Date.now();

  const apiB = httpApi(b.url, a.adminKey);
  const done = await until(
    'the run to complete on cell-b',
    async () => {
      const r = await ok(apiB, 'GET', `${T}/crews/${crew}/runs/${run}`);
      return r.state === 'completed' || r.state === 'failed' ? r : null;
    },
    120_000,
  );
  assert.equal(done.state, 'completed', JSON.stringify(done.error));
  assert.equal(callsAt.length, 2);
  assert.ok(callsAt[1]! >= retryAt - 500, `retried ${retryAt - callsAt[1]!} ms early`);
  assert.ok(callsAt[1]! < killedAt + BACKOFF_MS, 'the wait resumed on the peer; it did not start again');
  const j = (await ok(apiB, 'GET', `${A}/jobs/runs/${run}/journal`)).records as any[];
  const second = j.find((r) => r.kind === 'attempt' && r.data.attempt === 2)!;
  assert.equal(second.cell_id, 'cell-b', 'the peer made the second attempt');
  assert.equal(second.data.outcome, 'ok');
  const waitsOnB = j.filter((r) => r.kind === 'waiting' && r.cell_id === 'cell-b');
  assert.ok(
    waitsOnB.every((w) => w.data.wake_at === retryAt),
    'the peer waited for the due time cell-a recorded',
  );
});
