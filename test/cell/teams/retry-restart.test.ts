/**
 * A backoff wait is a durable timer (issue #24): a real cell process
 * (`node dist/cell.mjs serve`) waiting to retry a failed model call is killed
 * with SIGKILL; started again on its data, it resumes the wait: the next
 * attempt reaches the provider at the due time the journal recorded, not a
 * whole backoff after the restart. Needs `node scripts/build.mjs`.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { startOpenAIServer, type FakeOpenAI } from '../../fixtures/openai-server.ts';
import { startCellProcess, type CellProcess } from '../../helpers/cell-process.ts';
import { A, T, agent, httpApi, ok, provider } from '../../helpers/teams.ts';
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
  const callsAt: number[] = [];
  ai = await startOpenAIServer({
    apiKey: 'sk-fake',
    respond: () => {
      callsAt.push(Date.now());
      return callsAt.length === 1 ? { status: 503 } : { content: 'after the wait' };
    },
  });
  cell = await startCellProcess();
  let api = httpApi(cell.url, cell.adminKey);
  await provider(api, ai);
  const cap = { allowed_tools: [], permission_mode: 'auto', clearance_level: 0 };
  const f = await ok(api, 'POST', `${T}/formations`, { name: 'durable-backoff' });
  const b = await ok(api, 'POST', `${T}/formations/${f.formation_id}/billets`, {
    role_label: 'patient',
    required_skills: [],
    authority_cap: cap,
    retry: { max_attempts: 2, backoff_ms: BACKOFF_MS, max_backoff_ms: BACKOFF_MS, on: ['provider_error'] },
  });
  const a = await agent(api, 'patient', cap);
  const crew = await ok(api, 'POST', `${T}/crews`, { formation_id: f.formation_id, assignments: { [b.billet_id]: a } });
  const run = await ok(api, 'POST', `${T}/crews/${crew.crew_id}/runs`, { input: 'go' });

  // The first attempt failed and its retry is due BACKOFF_MS later: the run waits.
  const failed = await until(
    'the failed attempt',
    async () => {
      const j = await ok(api, 'GET', `${A}/jobs/runs/${run.run_id}/journal`);
      return (j.records as any[]).find((r) => r.kind === 'attempt' && r.data.outcome === 'failed');
    },
    60_000,
  );
  const retryAt = failed.data.retry_at as number;
  // (On PostgreSQL the cell's clock is the database's, read again between the record and the due time.)
  assert.ok(Math.abs(retryAt - failed.at - BACKOFF_MS) < 500, `due ${retryAt - failed.at} ms after the failure`);
  await until(
    'the run to wait',
    async () => (await ok(api, 'GET', `${T}/crews/${crew.crew_id}/runs/${run.run_id}`)).state === 'waiting',
    60_000,
  );

  await cell.kill('SIGKILL');
  cell = await startCellProcess({ dataDir: cell.dataDir });
  const restartedAt = Date.now();
  api = httpApi(cell.url, cell.adminKey);
  const done = await until(
    'the run to complete after the restart',
    async () => {
      const r = await ok(api, 'GET', `${T}/crews/${crew.crew_id}/runs/${run.run_id}`);
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
  const j = await ok(api, 'GET', `${A}/jobs/runs/${run.run_id}/journal`);
  const attempts = (j.records as any[]).filter((r) => r.kind === 'attempt').map((r) => [r.data.attempt, r.data.outcome]);
  assert.deepEqual(attempts, [
    [1, 'failed'],
    [2, 'ok'],
  ]);
});
