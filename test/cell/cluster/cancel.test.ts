/**
 * A cancel recorded on one cell of a group stops the drive on the cell that
 * runs the run at once, with its model call in flight, not at the driver's
 * next write. Two in-process cells on one PostgreSQL store (the driver hears
 * the other cell's journal append through the store's change notifications);
 * skipped on the embedded engine.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startOpenAIServer } from '../../fixtures/openai-server.ts';
import { TEST_ENGINE } from '../../helpers/inproc.ts';
import { until, twoCells } from './_two-cells.ts';
import { ok, provider, team, T, type Api } from '../../helpers/teams.ts';

test('a cancel on another cell aborts the driver with its model call in flight', { skip: TEST_ENGINE !== 'postgres' }, async () => {
  let calls = 0;
  // The model takes a minute to answer: only an abort ends the drive sooner.
  const ai = await startOpenAIServer({
    apiKey: 'sk-fake',
    respond: () => {
      calls++;
      return { content: 'late', delayMs: 60_000 };
    },
  });
  const { a, b, close } = await twoCells();
  try {
    const api: Api = { request: a.request, token: a.adminKey };
    await provider(api, ai);
    const tm = await team(api, 'sequential', [{ role: 'slow' }]);
    const r = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'take your time' });
    await until('the model call to be in flight', () => calls > 0);
    assert.ok(a.modules.runs.runs.isDriven(r.run_id), 'cell-a drives the run');

    const apiB: Api = { request: b.request, token: a.adminKey };
    const t0 = Date.now();
    const cancelled = await ok(apiB, 'POST', `${T}/crews/${tm.crew}/runs/${r.run_id}/cancel`, undefined);
    assert.equal(cancelled.state, 'cancelled');
    await until('cell-a to stop driving the run', () => !a.modules.runs.runs.isDriven(r.run_id), 10_000);
    const tookMs = Date.now() - t0;
    assert.ok(tookMs < 10_000, `stopped ${tookMs} ms after the cancel, not when the model answered (60 s)`);
    const s = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${r.run_id}`);
    assert.equal(s.state, 'cancelled', 'one outcome, the cancel');
    const j = await ok(api, 'GET', `/api/public/v1/admin/jobs/runs/${r.run_id}/journal`);
    assert.equal(j.records.filter((x: { kind: string }) => x.kind === 'run_finished').length, 1, 'one run_finished');
    assert.equal(calls, 1, 'the model was asked once');
  } finally {
    await close();
    await ai.close();
  }
});
