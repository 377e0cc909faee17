/**
 * Cancel of a run whose model call is in flight: the run's cancellation is
 * passed to the provider call as an AbortSignal, so a cancel interrupts a slow
 * provider at once; the run ends `cancelled`, the journal records the cancel,
 * and the model call's budget reservation is released.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { FakeOpenAI } from '../../fixtures/openai-server.ts';
import type { InProcess } from '../../helpers/inproc.ts';
import { A, T, ok, team, type Api, crewFixture } from '../../helpers/teams.ts';

let t: InProcess;
let ai: FakeOpenAI;
let api: Api;
before(async () => {
  ({ t, ai, api } = await crewFixture());
});
after(async () => {
  await t.close();
  await ai.close();
});

async function waitFor(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(cond(), `timed out waiting for ${what}`);
}

test('cancel interrupts a slow model call at once; the run ends cancelled with the cancel journaled', async () => {
  ai.setResponder(() => ({ content: 'far too late', delayMs: 60_000 }));
  const tm = await team(api, 'sequential', [{ role: 'slowpoke' }]);
  const before = ai.requests.length;
  const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'think hard' });
  await waitFor(() => ai.requests.length > before, 'the model call to reach the provider');
  assert.ok(t.modules.runs.runs.isDriven(run.run_id));

  const t0 = Date.now();
  const c = await ok(api, 'POST', `${A}/jobs/runs/${run.run_id}/cancel`, undefined, [200]);
  const cancelMs = Date.now() - t0;
  assert.equal(c.state, 'cancelled');
  assert.ok(cancelMs < 3_000, `the cancel did not wait for the provider (${cancelMs} ms)`);
  await t.modules.teams.teams.settled(run.run_id);
  assert.ok(Date.now() - t0 < 3_000, 'the driver stopped at once');
  assert.equal(t.modules.runs.runs.isDriven(run.run_id), false);

  const s = await ok(api, 'GET', `${T}/crews/${tm.crew}/runs/${run.run_id}`);
  assert.equal(s.state, 'cancelled');
  assert.equal(s.error.reason, 'cancelled');
  const j = await t.modules.runs.runs.readJournal(run.run_id);
  const kinds = j.map((r) => r.kind);
  assert.ok(kinds.includes('cancel_requested'), kinds.join(','));
  const last = j.at(-1)!;
  assert.equal(last.kind, 'run_finished');
  assert.equal((last.data as any).outcome ?? s.state, 'cancelled');
  assert.ok(
    !kinds.includes('step') || !j.some((r) => r.kind === 'step' && JSON.stringify(r.data ?? {}).includes('usage')),
    'no model step was recorded as completed',
  );
  assert.equal(ai.requests.length - before, 1, 'the cancelled call is not retried');

  const ledger = await ok(api, 'GET', `${T}/agents/${tm.agents['slowpoke']}/budget-ledger`);
  assert.equal(ledger.reserved, 0, 'the reservation of the interrupted call is released');
  assert.equal(ledger.spent, 0);

  // Idempotent: a second cancel answers the same.
  const again = await ok(api, 'POST', `${A}/jobs/runs/${run.run_id}/cancel`, undefined, [200]);
  assert.equal(again.state, 'cancelled');
});
